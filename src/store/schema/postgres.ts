/** The PostgreSQL store's schema: its migrations (../postgres/migrations.ts), applied under an advisory lock. */
import { aheadError, appliedChecksum, checksum, schemaStatus, type AppliedMigration, type SchemaStatus } from '../migrations.js'
import type { PostgresDatabase, Queryable } from '../postgres/database.js'
import { PLAN } from '../postgres/migrations.js'
import type { SchemaStore } from './types.js'

/** No PostgreSQL migration shares a name with an earlier variant, so no store is ever asked which one it ran. */
const NOTHING_DETECTED: ReadonlyMap<string, boolean> = new Map()

/** Migrations of all instances take this advisory lock, so concurrent starters apply each version once. */
const MIGRATION_LOCK = 7_265_001_042n

export class PostgresSchema implements SchemaStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  /** The rows of schema_migrations (checksums null where not recorded); none when the table does not exist. */
  async #appliedMigrations (client: Queryable): Promise<AppliedMigration[]> {
    const { rows: [table] } = await client.query<{ found: boolean, checksum: boolean }>(
      `SELECT to_regclass('schema_migrations') IS NOT NULL AS found,
         EXISTS (SELECT 1 FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = 'schema_migrations' AND column_name = 'checksum') AS checksum`)
    if (table?.found !== true) return []
    const { rows } = await client.query<AppliedMigration>(
      `SELECT version, name, ${table.checksum ? 'checksum' : 'NULL AS checksum'} FROM schema_migrations ORDER BY version`)
    return rows
  }

  async schemaStatus (): Promise<SchemaStatus> {
    return schemaStatus(await this.#db.statements((db) => this.#appliedMigrations(db)), PLAN, NOTHING_DETECTED)
  }

  /**
   * Validates the applied migrations, records the checksums of rows from before checksums, and applies what is
   * pending, in one transaction under an advisory lock, so that instances migrating at once apply each version
   * once. A store ahead of this release, or with an edited migration, is left as it is.
   */
  async migrate (): Promise<number> {
    return this.#db.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL, checksum text)')
      await client.query('ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text')
      const applied = await this.#appliedMigrations(client)
      const status = schemaStatus(applied, PLAN, NOTHING_DETECTED)
      if (status.ahead.length > 0) throw aheadError(status)
      for (const row of applied) {
        if (row.checksum !== null) continue
        await client.query('UPDATE schema_migrations SET checksum = $1 WHERE version = $2', [appliedChecksum(row, PLAN, NOTHING_DETECTED), row.version])
      }
      for (const migration of status.pending) {
        await client.query(migration.sql ?? '')
        await client.query('INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES ($1, $2, now(), $3)',
          [migration.version, migration.name, checksum(migration)])
      }
      return status.pending.length
    })
  }
}
