import { isPostgresUrl, type Config } from '../config.js'
import { StoreReadOnlyError } from '../errors.js'
import { aheadError, requireUsable, type SchemaStatus } from './migrations.js'
import { PostgresStore } from './postgres/index.js'
import { SqliteStore } from './sqlite/index.js'
import type { EpochConfirmation, Store } from './types.js'

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
  // A command that writes (an import records changes) first confirms the store's epoch: a restored store gets its new
  // one before any change is made in it.
  if (access === 'write') await store.confirmEpoch()
  return status
}

/** A line for the log or the terminal when confirming the epoch found something to say; else null. */
export function epochNotice (confirmation: EpochConfirmation): string | null {
  const { epoch, started, unreadable } = confirmation
  const parts: string[] = []
  if (started) {
    parts.push(`A new store epoch ${epoch.epoch} began (${epoch.reason}): changes from now on get new event ids and cursors, and cursors ` +
      'from a history this store no longer has are refused with 410 cursor_expired.')
  }
  if (unreadable.length > 0) {
    parts.push(`Could not read ${unreadable.join(', ')}: a restore or failover that changes only ${unreadable.length === 1 ? 'it' : 'them'} is not detected.`)
  }
  return parts.length === 0 ? null : parts.join(' ')
}

/**
 * What a read-only store still does: the reads, named one by one. Anything else fails, so a write added to the Store
 * later is refused here until someone decides otherwise (a list of writes missed adjustQuantity once).
 */
const READS: ReadonlySet<string> = new Set<keyof Store | keyof SqliteStore>([
  'schemaStatus', 'ping', 'close', 'poolStats', 'listInventory', 'inventoryVersion', 'inventoryPages', 'changedElsewhere',
  'getStockEntry', 'stockHistory', 'listChanges', 'feedHead', 'feedHistory', 'listWebhooks', 'getWebhook', 'listWebhookDeliveries', 'getWebhookDelivery', 'webhookBacklog', 'getPet', 'countPets', 'listOrders', 'findApiKeyByHash', 'listApiKeys', 'findIdempotencyRecord',
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
export async function migrateStore (store: Store, databaseUrl: string, options: { restored?: boolean } = {}): Promise<{ applied: number, from: number, to: number, backup: string | null, epoch: EpochConfirmation, objectsUnchecked?: string }> {
  const status = await store.schemaStatus()
  if (status.ahead.length > 0) throw aheadError(status)
  let backup: string | null = null
  if (store instanceof SqliteStore && status.version > 0 && status.pending.length > 0 && databaseUrl !== ':memory:') {
    backup = `${databaseUrl}.backup-v${status.version}`
    await store.backup(backup)
  }
  const applied = await store.migrate()
  // After a restore of PostgreSQL (pg_restore, point-in-time recovery), `petstore migrate` is the command that runs
  // first: it starts the restored store's new epoch (`restored`: whether or not it can tell).
  const epoch = await store.confirmEpoch({ restored: options.restored === true })
  return { applied, from: status.version, to: (await store.schemaStatus()).version, backup, epoch, ...(status.objectsUnchecked === undefined ? {} : { objectsUnchecked: status.objectsUnchecked }) }
}
