/** Opening the store DATABASE_URL names, readying it for a command, and migrating it. */
import { aheadError, requireUsable, type SchemaStatus } from './migrations.js'
import { isPostgresUrl, type PostgresOptions } from './postgres/options.js'
import type { EpochConfirmation } from './schema/types.js'
import type { CommitObserver } from './sqlite/group-commit.js'
import type { Store } from './store.js'

/** What opening a store may be given besides its settings. */
export interface OpenOptions {
  /** What watches the SQLite store's group commits (the tracing of a traced process); nothing on PostgreSQL. */
  commitObserver?: CommitObserver
  /** SQLite: checkpoint on a thread of its own, never in a request's COMMIT (a serving process); nothing on PostgreSQL. */
  backgroundCheckpoints?: boolean
  /** SQLite: every write on a thread of its own, never a COMMIT on the event loop (a serving process); nothing on PostgreSQL. */
  writerThread?: boolean
}

/**
 * Opens the store named by DATABASE_URL: postgres:// or postgresql:// for PostgreSQL, a file path for SQLite. Does not
 * migrate. Loads only the implementation it opens: a SQLite process never loads pg, and a command starts sooner.
 */
export async function openStore (config: { databaseUrl: string, database: PostgresOptions }, options: OpenOptions = {}): Promise<Store> {
  if (isPostgresUrl(config.databaseUrl)) {
    const { PostgresStore } = await import('./postgres-store.js')
    return new PostgresStore(config.databaseUrl, config.database)
  }
  const { SqliteStore } = await import('./sqlite-store.js')
  return new SqliteStore(config.databaseUrl, {
    ...(options.commitObserver === undefined ? {} : { commitObserver: options.commitObserver }),
    ...(options.backgroundCheckpoints === true ? { backgroundCheckpoints: true } : {}),
    ...(options.writerThread === true ? { writerThread: true } : {})
  })
}

/**
 * Makes a store ready for a command that reads or writes it, without ever changing the schema of a store that
 * has one: a store without any schema yet (a new file, an empty database) is initialized; any other must be at
 * this release's version (SchemaError 'behind' says to run `petstore migrate`); a store ahead of this release
 * serves reads only (SchemaError 'ahead' for writes); an edited migration is SchemaError 'edited'.
 */
export async function readyForUse (store: Pick<Store, 'schema'>, access: 'read' | 'write'): Promise<SchemaStatus> {
  const status = await store.schema.schemaStatus()
  if (status.version === 0 && status.pending.length > 0) {
    await store.schema.migrate()
    return await store.schema.schemaStatus()
  }
  requireUsable(status, access)
  // A command that writes (an import records changes) first confirms the store's epoch: a restored store gets its new
  // one before any change is made in it.
  if (access === 'write') await store.schema.confirmEpoch()
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
 * Applies pending migrations. A store kept in a file (SQLite) that has a schema (and so, possibly, data) is first
 * copied next to its file (`<file>.backup-v<version>`): a migration that goes wrong on a machine's only copy loses
 * nothing. PostgreSQL is backed up by its operators' own means (pg_dump, snapshots). Returns how many migrations
 * were applied, where the copy is, and why the schema's objects could not be compared with the migrations' here, if so.
 */
export async function migrateStore (store: Pick<Store, 'schema'>, databaseUrl: string, options: { restored?: boolean } = {}):
Promise<{ applied: number, from: number, to: number, backup: string | null, epoch: EpochConfirmation, objectsUnchecked?: string }> {
  const { schema } = store
  const status = await schema.schemaStatus()
  if (status.ahead.length > 0) throw aheadError(status)
  let backup: string | null = null
  if (schema.copyTo !== undefined && status.version > 0 && status.pending.length > 0 && databaseUrl !== ':memory:') {
    backup = `${databaseUrl}.backup-v${status.version}`
    await schema.copyTo(backup)
  }
  const applied = await schema.migrate()
  // After a restore of PostgreSQL (pg_restore, point-in-time recovery), `petstore migrate` is the command that runs
  // first: it starts the restored store's new epoch (`restored`: whether or not it can tell).
  const epoch = await schema.confirmEpoch({ restored: options.restored === true })
  return {
    applied, from: status.version, to: (await schema.schemaStatus()).version, backup, epoch,
    ...(status.objectsUnchecked === undefined ? {} : { objectsUnchecked: status.objectsUnchecked })
  }
}
