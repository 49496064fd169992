/**
 * The store a service opens: one object per area of what it keeps, each an interface of its own beside its SQLite
 * and PostgreSQL implementations (src/store/<area>/). Nothing uses the whole of it but the composition roots (the app,
 * the server, the CLI): the domain, the routes and the listing cache each take the areas, and the methods, they use.
 * Methods throw StoreUnavailableError when the database cannot be reached; every write is atomic.
 */
import type { AlertStore } from './alerts/types.js'
import type { CatalogStore } from './catalog/types.js'
import type { IdempotencyStore } from './idempotency/types.js'
import type { KeyStore } from './keys/types.js'
import type { SchemaStore } from './schema/types.js'
import type { SellingStore } from './selling/types.js'
import type { StockStore } from './stock/types.js'
import type { StreamStore } from './streams/types.js'
import type { WebhookStore } from './webhooks/types.js'

/** A connection pool's state, for metrics. */
export interface PoolStats {
  /** Connections open (idle or in use). */
  total: number
  idle: number
  /** Callers waiting for a connection. */
  waiting: number
  /** The pool's cap (DATABASE_POOL_SIZE). */
  max: number
}

export interface Store {
  /** A short name for logs and /readyz. */
  readonly kind: 'sqlite' | 'postgres'
  /** Migrations and where the schema stands. */
  readonly schema: SchemaStore
  /** Stock entries, their writes, the ledger and the change feed. */
  readonly stock: StockStore
  /** The records of writes sent with an Idempotency-Key. */
  readonly idempotency: IdempotencyStore
  /** API keys. */
  readonly keys: KeyStore
  /** Webhook subscriptions, deliveries and attempts. */
  readonly webhooks: WebhookStore
  /** The change streams open now. */
  readonly streams: StreamStore
  /** Pets and orders, and imports of them. */
  readonly catalog: CatalogStore
  /** Holds on stock and the orders placed through the API. */
  readonly selling: SellingStore
  /** Reorder points and the low-stock state they give pets. */
  readonly alerts: AlertStore
  /** Resolves when the database answers a trivial query. */
  ping (): Promise<void>
  close (): Promise<void>
  /** The connection pool's state; null for a store without a pool (SQLite: one connection in process). */
  poolStats (): PoolStats | null
}
