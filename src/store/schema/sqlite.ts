/** The SQLite store's schema: its migrations (../sqlite/migrations.ts), applied in one IMMEDIATE transaction. */
import { aheadError, appliedChecksum, checksum, detectQueries, type SchemaStatus } from '../migrations.js'
import { onlineCopy, type SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { PLAN } from '../sqlite/migrations.js'
import { appliedMigrations, sqliteSchemaStatus } from '../sqlite/schema-status.js'
import type { SchemaStore } from './types.js'

export class SqliteSchema implements SchemaStore {
  readonly #db: SqliteDatabase

  constructor (db: SqliteDatabase) {
    this.#db = db
  }

  async schemaStatus (): Promise<SchemaStatus> {
    return guard(() => sqliteSchemaStatus(this.#db.connection))
  }

  /**
   * Validates the applied migrations, records the checksums of rows from before checksums, and applies what is
   * pending, all in one IMMEDIATE transaction (it takes the write lock first, so two processes migrating at once
   * apply each version once). A store ahead of this release, or with an edited migration, is left as it is.
   */
  async migrate (): Promise<number> {
    const db = this.#db.connection
    const apply = db.transaction(() => {
      db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL, checksum TEXT)')
      if (db.prepare("SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'").get() === undefined) {
        db.exec('ALTER TABLE schema_migrations ADD COLUMN checksum TEXT')
      }
      const applied = appliedMigrations(db)
      const status = sqliteSchemaStatus(db, applied)
      if (status.ahead.length > 0) throw aheadError(status)
      const detected = new Map(detectQueries(PLAN).map((query) => [query, Number(db.prepare(query).pluck().get()) === 1]))
      const record = db.prepare('UPDATE schema_migrations SET checksum = ? WHERE version = ?')
      for (const row of applied) {
        if (row.checksum === null) record.run(appliedChecksum(row, PLAN, detected), row.version)
      }
      const insert = db.prepare('INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES (?, ?, ?, ?)')
      for (const migration of status.pending) {
        for (const step of migration.steps ?? [migration.sql ?? '']) {
          if (typeof step === 'string') db.exec(step)
          else if (Number(db.prepare(step.when).pluck().get()) === 1) db.exec(step.then)
        }
        insert.run(migration.version, migration.name, new Date().toISOString(), checksum(migration))
      }
      return status.pending.length
    })
    return guard(() => apply.immediate())
  }

  /** Copies the database to `path` with SQLite's online backup (a consistent copy while others may write). */
  async copyTo (path: string): Promise<void> {
    await onlineCopy(this.#db.connection, path)
  }

  /** The durability settings in force on the connection (for tests and diagnostics). */
  durability (): { journalMode: string, synchronous: 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA' } {
    const db = this.#db.connection
    const journalMode = String(db.pragma('journal_mode', { simple: true }))
    const level = Number(db.pragma('synchronous', { simple: true }))
    return { journalMode, synchronous: (['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const)[level] ?? 'OFF' }
  }
}
