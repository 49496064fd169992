/**
 * The embedded store: the areas on one SQLite file (./sqlite/database.ts), in the order of ./store.ts. Each area is its
 * own class beside its interface (src/store/<area>/sqlite.ts).
 */
import { SqliteAlerts } from './alerts/sqlite.js'
import { ALERT_WRITES } from './alerts/types.js'
import { SqliteCatalog } from './catalog/sqlite.js'
import { SqliteIdempotency } from './idempotency/sqlite.js'
import { IDEMPOTENCY_WRITES } from './idempotency/types.js'
import { SqliteKeys } from './keys/sqlite.js'
import { KEY_WRITES } from './keys/types.js'
import { SqliteSchema } from './schema/sqlite.js'
import { SqliteSelling } from './selling/sqlite.js'
import { SELLING_WRITES } from './selling/types.js'
import { SqliteStock } from './stock/sqlite.js'
import { STOCK_WRITES } from './stock/types.js'
import type { Store } from './store.js'
import { SqliteStreams } from './streams/sqlite.js'
import { STREAM_WRITES } from './streams/types.js'
import { SqliteWebhooks } from './webhooks/sqlite.js'
import { WEBHOOK_WRITES } from './webhooks/types.js'
import { SqliteDatabase, type SqliteOptions } from './sqlite/database.js'
import type { SqliteWriter } from './sqlite/writer.js'
import { guard } from './sqlite/errors.js'

/**
 * Each write `writes` declares of `area` (the same declarations the read-only store keeps to) runs on the writer
 * thread's store, under the same area and name. `observed`: the area's writes join the group commit, whose commits the
 * commit observer sees.
 */
function forwardWrites (writer: SqliteWriter, name: string, area: object, writes: Readonly<Record<string, unknown>>, observed: boolean): void {
  for (const method of Object.keys(writes)) {
    Object.defineProperty(area, method, { value: (...args: unknown[]) => writer.call(name, method, args, observed), writable: true, configurable: true })
  }
}

export class SqliteStore implements Store {
  readonly kind = 'sqlite'
  readonly schema: SqliteSchema
  readonly stock: SqliteStock
  readonly idempotency: SqliteIdempotency
  readonly keys: SqliteKeys
  readonly webhooks: SqliteWebhooks
  readonly streams: SqliteStreams
  readonly catalog: SqliteCatalog
  readonly selling: SqliteSelling
  readonly alerts: SqliteAlerts
  readonly #db: SqliteDatabase

  constructor (path: string, options: SqliteOptions = {}) {
    const db = new SqliteDatabase(path, options)
    this.#db = db
    this.schema = new SqliteSchema(db)
    this.stock = new SqliteStock(db)
    this.idempotency = new SqliteIdempotency(db)
    this.keys = new SqliteKeys(db)
    this.webhooks = new SqliteWebhooks(db)
    this.streams = new SqliteStreams(db)
    this.catalog = new SqliteCatalog(db)
    this.selling = new SqliteSelling(db)
    this.alerts = new SqliteAlerts(db)
    const writer = db.writer
    if (writer !== null) {
      // The areas' writes run on the writer thread's store; the schema's (startup, `petstore migrate`) and an import
      // (the CLI's, with its progress callback) stay on this connection.
      forwardWrites(writer, 'stock', this.stock, STOCK_WRITES, true)
      forwardWrites(writer, 'selling', this.selling, SELLING_WRITES, true)
      forwardWrites(writer, 'alerts', this.alerts, ALERT_WRITES, true)
      forwardWrites(writer, 'idempotency', this.idempotency, IDEMPOTENCY_WRITES, false)
      forwardWrites(writer, 'keys', this.keys, KEY_WRITES, false)
      forwardWrites(writer, 'webhooks', this.webhooks, WEBHOOK_WRITES, false)
      forwardWrites(writer, 'streams', this.streams, STREAM_WRITES, false)
    }
  }

  /** Checkpoints in this connection's COMMITs again (the writer thread's store, when the checkpointer thread failed). */
  checkpointInCommits (): void {
    this.#db.checkpointInCommits()
  }

  async ping (): Promise<void> {
    guard(() => this.#db.prepare('SELECT 1').get())
  }

  async close (): Promise<void> {
    await this.#db.close()
  }

  /** No pool: one connection in process. */
  poolStats (): null {
    return null
  }
}
