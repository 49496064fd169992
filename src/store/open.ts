/** Opening the store DATABASE_URL names, readying it for a command, and migrating it. */
import { aheadError, requireUsable, type SchemaStatus } from './migrations.js'
import { PostgresStore } from './postgres-store.js'
import { isPostgresUrl, type PostgresOptions } from './postgres/options.js'
import type { CommitObserver } from './sqlite/group-commit.js'
import { SqliteStore } from './sqlite-store.js'
import type { Store } from './store.js'

/** What opening a store may be given besides its settings. */
export interface OpenOptions {
  /** What watches the SQLite store's group commits (the tracing of a traced process); nothing on PostgreSQL. */
  commitObserver?: CommitObserver
}

/** Opens the store named by DATABASE_URL: postgres:// or postgresql:// for PostgreSQL, a file path for SQLite. Does not migrate. */
export function openStore (config: { databaseUrl: string, database: PostgresOptions }, options: OpenOptions = {}): Store {
  if (isPostgresUrl(config.databaseUrl)) return new PostgresStore(config.databaseUrl, config.database)
  return new SqliteStore(config.databaseUrl, options.commitObserver === undefined ? {} : { commitObserver: options.commitObserver })
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
  return status
}

/**
 * Applies pending migrations. A store kept in a file (SQLite) that has a schema (and so, possibly, data) is first
 * copied next to its file (`<file>.backup-v<version>`): a migration that goes wrong on a machine's only copy loses
 * nothing. PostgreSQL is backed up by its operators' own means (pg_dump, snapshots). Returns how many migrations
 * were applied and where the copy is.
 */
export async function migrateStore (store: Pick<Store, 'schema'>, databaseUrl: string): Promise<{ applied: number, from: number, to: number, backup: string | null }> {
  const { schema } = store
  const status = await schema.schemaStatus()
  if (status.ahead.length > 0) throw aheadError(status)
  let backup: string | null = null
  if (schema.copyTo !== undefined && status.version > 0 && status.pending.length > 0 && databaseUrl !== ':memory:') {
    backup = `${databaseUrl}.backup-v${status.version}`
    await schema.copyTo(backup)
  }
  const applied = await schema.migrate()
  return { applied, from: status.version, to: (await schema.schemaStatus()).version, backup }
}
