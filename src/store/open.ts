import { isPostgresUrl, type Config } from '../config.js'
import { StoreReadOnlyError } from '../errors.js'
import { aheadError, requireUsable, type SchemaStatus } from './migrations.js'
import { PostgresStore } from './postgres/index.js'
import { SqliteStore } from './sqlite/index.js'
import type { Store } from './types.js'

/** Opens the store named by DATABASE_URL: postgres:// or postgresql:// for PostgreSQL, a file path for SQLite. Does not migrate. */
export function openStore (config: Pick<Config, 'databaseUrl' | 'database'>): Store {
  if (isPostgresUrl(config.databaseUrl)) return new PostgresStore(config.databaseUrl, config.database)
  return new SqliteStore(config.databaseUrl)
}

/**
 * Makes a store ready for a command that reads or writes it, without ever changing the schema of a store that
 * has one: a store without any schema yet (a new file, an empty database) is initialized; any other must be at
 * this release's version (SchemaError 'behind' says to run `petstore migrate`); a store ahead of this release
 * serves reads only (SchemaError 'ahead' for writes); an edited migration is SchemaError 'edited'.
 */
export async function readyForUse (store: Store, access: 'read' | 'write'): Promise<SchemaStatus> {
  const status = await store.schemaStatus()
  if (status.version === 0 && status.pending.length > 0) {
    await store.migrate()
    return await store.schemaStatus()
  }
  requireUsable(status, access)
  return status
}

/**
 * What a read-only store still does: the reads, named one by one. Anything else fails, so a write added to the Store
 * later is refused here until someone decides otherwise (a list of writes missed adjustQuantity once).
 */
const READS: ReadonlySet<string> = new Set<keyof Store | keyof SqliteStore>([
  'schemaStatus', 'ping', 'close', 'poolStats', 'listInventory', 'inventoryVersion', 'inventoryPages', 'changedElsewhere',
  'getStockEntry', 'stockHistory', 'listChanges', 'feedHead', 'listWebhooks', 'getWebhook', 'listWebhookDeliveries', 'getWebhookDelivery', 'webhookBacklog', 'getPet', 'countPets', 'listOrders', 'findApiKeyByHash', 'listApiKeys', 'findIdempotencyRecord',
  'backup', 'durability'
])

/**
 * Writes a read-only store skips without failing: a key's last use is a record of traffic, not a change anyone
 * asked for, and failing it would only log a warning per key each minute. A read-only instance records no last use.
 */
const SKIPPED: ReadonlySet<string> = new Set<keyof Store>(['recordKeyUse'])

/**
 * The store for an instance whose release is older than the store's schema (a newer release migrated it and was
 * rolled back): every read passes, every write fails with StoreReadOnlyError (503 at the edge), except the record of
 * a key's last use, which is skipped.
 */
export function readOnly (store: Store, status: SchemaStatus): Store {
  const reason = aheadError(status).message
  return new Proxy(store, {
    get (target, property) {
      const value: unknown = Reflect.get(target, property, target)
      if (typeof value !== 'function') return value
      if (typeof property === 'string' && SKIPPED.has(property)) return async () => {}
      if (typeof property !== 'string' || !READS.has(property)) return async () => { throw new StoreReadOnlyError(reason) }
      return (value as (...args: unknown[]) => unknown).bind(target)
    }
  })
}

/**
 * Applies pending migrations. A SQLite store that has a schema (and so, possibly, data) is first copied next to
 * its file (`<file>.backup-v<version>`): a migration that goes wrong on a machine's only copy loses nothing.
 * PostgreSQL is backed up by its operators' own means (pg_dump, snapshots). Returns how many migrations were
 * applied, where the copy is, and why the schema's objects could not be compared with the migrations' here, if so.
 */
export async function migrateStore (store: Store, databaseUrl: string): Promise<{ applied: number, from: number, to: number, backup: string | null, objectsUnchecked?: string }> {
  const status = await store.schemaStatus()
  if (status.ahead.length > 0) throw aheadError(status)
  let backup: string | null = null
  if (store instanceof SqliteStore && status.version > 0 && status.pending.length > 0 && databaseUrl !== ':memory:') {
    backup = `${databaseUrl}.backup-v${status.version}`
    await store.backup(backup)
  }
  const applied = await store.migrate()
  return { applied, from: status.version, to: (await store.schemaStatus()).version, backup, ...(status.objectsUnchecked === undefined ? {} : { objectsUnchecked: status.objectsUnchecked }) }
}
