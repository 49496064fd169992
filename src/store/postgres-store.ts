/**
 * The shared store for scale-out: the areas on one PostgreSQL pool (./postgres/database.ts), in the order of
 * ./store.ts. Each area is its own class beside its interface (src/store/<area>/postgres.ts).
 */
import { PostgresAlerts } from './alerts/postgres.js'
import { PostgresCatalog } from './catalog/postgres.js'
import { PostgresIdempotency } from './idempotency/postgres.js'
import { PostgresKeys } from './keys/postgres.js'
import { PostgresSchema } from './schema/postgres.js'
import { PostgresSelling } from './selling/postgres.js'
import { PostgresStock } from './stock/postgres.js'
import type { PoolStats, Store } from './store.js'
import { PostgresStreams } from './streams/postgres.js'
import { PostgresWebhooks } from './webhooks/postgres.js'
import { PostgresDatabase } from './postgres/database.js'
import type { PostgresOptions } from './postgres/options.js'

export class PostgresStore implements Store {
  readonly kind = 'postgres'
  readonly schema: PostgresSchema
  readonly stock: PostgresStock
  readonly idempotency: PostgresIdempotency
  readonly keys: PostgresKeys
  readonly webhooks: PostgresWebhooks
  readonly streams: PostgresStreams
  readonly catalog: PostgresCatalog
  readonly selling: PostgresSelling
  readonly alerts: PostgresAlerts
  readonly #db: PostgresDatabase

  constructor (connectionString: string, options: PostgresOptions = {}) {
    const db = new PostgresDatabase(connectionString, options)
    this.#db = db
    this.schema = new PostgresSchema(db)
    this.stock = new PostgresStock(db)
    this.idempotency = new PostgresIdempotency(db)
    this.keys = new PostgresKeys(db)
    this.webhooks = new PostgresWebhooks(db)
    this.streams = new PostgresStreams(db)
    this.catalog = new PostgresCatalog(db)
    this.selling = new PostgresSelling(db)
    this.alerts = new PostgresAlerts(db)
  }

  async ping (): Promise<void> {
    await this.#db.ping()
  }

  async close (): Promise<void> {
    await this.#db.close()
  }

  poolStats (): PoolStats {
    return this.#db.poolStats()
  }
}
