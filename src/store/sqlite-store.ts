/**
 * The embedded store: the areas on one SQLite file (./sqlite/database.ts), in the order of ./store.ts. Each area is its
 * own class beside its interface (src/store/<area>/sqlite.ts).
 */
import { SqliteAlerts } from './alerts/sqlite.js'
import { SqliteCatalog } from './catalog/sqlite.js'
import { SqliteIdempotency } from './idempotency/sqlite.js'
import { SqliteKeys } from './keys/sqlite.js'
import { SqliteSchema } from './schema/sqlite.js'
import { SqliteSelling } from './selling/sqlite.js'
import { SqliteStock } from './stock/sqlite.js'
import type { Store } from './store.js'
import { SqliteStreams } from './streams/sqlite.js'
import { SqliteWebhooks } from './webhooks/sqlite.js'
import { SqliteDatabase, type SqliteOptions } from './sqlite/database.js'
import { guard } from './sqlite/errors.js'

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
