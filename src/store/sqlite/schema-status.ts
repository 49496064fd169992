/**
 * What a SQLite database's schema_migrations says against this release: for the store's schema area
 * (../schema/sqlite.ts) and for files that are not the store (a backup being checked, ./backup.ts).
 */
import type Database from 'better-sqlite3'
import { detectQueries, schemaStatus, type AppliedMigration, type SchemaStatus } from '../migrations.js'
import { PLAN } from './migrations.js'

/** The rows of schema_migrations (checksums null where not recorded); none when the table does not exist. */
export function appliedMigrations (db: Database.Database): AppliedMigration[] {
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get() === undefined) return []
  const hasChecksum = db.prepare("SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'").get() !== undefined
  const rows = db.prepare(`SELECT version, name, ${hasChecksum ? 'checksum' : 'NULL AS checksum'} FROM schema_migrations ORDER BY version`)
    .all() as Array<{ version: bigint | number, name: string, checksum: string | null }>
  return rows.map((row) => ({ version: Number(row.version), name: row.name, checksum: row.checksum }))
}

/**
 * Where the schema of the SQLite database on `db` stands against this release; throws SchemaError when an applied
 * migration was edited. Also for files that are not the store (a backup being checked).
 */
export function sqliteSchemaStatus (db: Database.Database, applied: AppliedMigration[] = appliedMigrations(db)): SchemaStatus {
  const detected = new Map(detectQueries(PLAN).map((query) => [query, Number(db.prepare(query).pluck().get()) === 1]))
  return schemaStatus(applied, PLAN, detected)
}
