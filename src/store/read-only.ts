/**
 * The store of an instance whose release is older than the store's schema (a newer release migrated it and was rolled
 * back): every read passes, every write fails with StoreReadOnlyError (503 at the edge), except those an area
 * declares skipped (a key's last use). What is a write, and what becomes of it, each area says beside its interface
 * (STOCK_WRITES and the others), and the compiler holds that declaration to the interface's writes: no list of names
 * is kept here.
 */
import { StoreReadOnlyError } from '../errors.js'
import { ALERT_WRITES } from './alerts/types.js'
import { CATALOG_WRITES } from './catalog/types.js'
import { IDEMPOTENCY_WRITES } from './idempotency/types.js'
import { KEY_WRITES } from './keys/types.js'
import { aheadError, type SchemaStatus } from './migrations.js'
import { SCHEMA_WRITES } from './schema/types.js'
import { SELLING_WRITES } from './selling/types.js'
import { STOCK_WRITES } from './stock/types.js'
import type { Store } from './store.js'
import { STREAM_WRITES } from './streams/types.js'
import { WEBHOOK_WRITES } from './webhooks/types.js'

/** What a read-only store does with a write: fail it, or do nothing and succeed. */
type WriteAccess = 'refuse' | 'skip'

/** `area` with each write its declaration names refused or skipped; everything else passes. */
function withoutWrites<A extends object> (area: A, writes: Readonly<Record<string, WriteAccess>>, reason: string): A {
  const refuse = async (): Promise<never> => { throw new StoreReadOnlyError(reason) }
  const skip = async (): Promise<void> => {}
  return new Proxy(area, {
    get (target, property) {
      const value: unknown = Reflect.get(target, property, target)
      if (typeof value !== 'function') return value
      const access = typeof property === 'string' && Object.hasOwn(writes, property) ? writes[property] : undefined
      if (access === 'refuse') return refuse
      if (access === 'skip') return skip
      return (value as (...args: unknown[]) => unknown).bind(target)
    }
  })
}

/** The store for a release older than its schema (`status` says how much older): reads only. */
export function readOnly (store: Store, status: SchemaStatus): Store {
  const reason = aheadError(status).message
  return {
    kind: store.kind,
    schema: withoutWrites(store.schema, SCHEMA_WRITES, reason),
    stock: withoutWrites(store.stock, STOCK_WRITES, reason),
    idempotency: withoutWrites(store.idempotency, IDEMPOTENCY_WRITES, reason),
    keys: withoutWrites(store.keys, KEY_WRITES, reason),
    webhooks: withoutWrites(store.webhooks, WEBHOOK_WRITES, reason),
    streams: withoutWrites(store.streams, STREAM_WRITES, reason),
    catalog: withoutWrites(store.catalog, CATALOG_WRITES, reason),
    selling: withoutWrites(store.selling, SELLING_WRITES, reason),
    alerts: withoutWrites(store.alerts, ALERT_WRITES, reason),
    ping: () => store.ping(),
    close: () => store.close(),
    poolStats: () => store.poolStats()
  }
}
