/**
 * The SQLite store's schema: its migrations (../sqlite/migrations.ts), applied in one IMMEDIATE transaction, and its
 * epochs, of which a copy of the file (../sqlite/database.ts COPY_MARK) opened as the store starts a new one.
 */
import type Database from 'better-sqlite3'
import { aheadError, appliedChecksum, checksum, detectQueries, type SchemaStatus } from '../migrations.js'
import { COPY_MARK, onlineCopy, type SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { applyMigration, BOOKKEEPING, PLAN } from '../sqlite/migrations.js'
import { appliedMigrations, sqliteSchemaStatus } from '../sqlite/schema.js'
import { EPOCH_COLUMNS, newEpochId, toEpoch, type EpochRow } from '../stock/rows.js'
import type { EpochConfirmation, SchemaStore } from './types.js'

function hasEpochs (db: Database.Database): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_epochs'").get() !== undefined
}

/**
 * Starts a new epoch in a marked copy opened as the store (or in any store, `always`), and clears the mark, in one
 * IMMEDIATE transaction (two processes opening the copy at once start one epoch); the epoch, or null when the file is
 * not a marked copy (or has no epochs yet: migrate() does it once it has).
 */
function startEpochOfCopy (db: Database.Database, always = false): EpochRow | null {
  const marked = (): boolean => always || Number(db.pragma('user_version', { simple: true })) === COPY_MARK
  if (!marked() || !hasEpochs(db)) return null
  return db.transaction((): EpochRow | null => {
    if (!marked()) return null
    const { seq, head } = db.prepare('SELECT (SELECT max(seq) FROM store_epochs) AS seq, (SELECT max(id) FROM stock_ledger) AS head').get() as { seq: bigint, head: bigint | null }
    const row: EpochRow = { epoch: newEpochId(), after_order: 0n, after_id: head ?? 0n, started_at: new Date().toISOString(), reason: 'restored' }
    db.prepare('INSERT INTO store_epochs (seq, epoch, after_order, after_id, started_at, reason) VALUES (?, ?, ?, ?, ?, ?)')
      .run(seq + 1n, row.epoch, row.after_order, row.after_id, row.started_at, row.reason)
    db.pragma('user_version = 0')
    return row
  }).immediate()
}

export class SqliteSchema implements SchemaStore {
  readonly #db: SqliteDatabase
  /** The epoch this process started in a marked copy, until confirmEpoch() reports it. */
  #started: EpochRow | null = null

  constructor (db: SqliteDatabase) {
    this.#db = db
    // A copy opened as the store: a new epoch before anything can write to it, whichever command opens it first.
    if (db.path !== ':memory:') this.#started = guard(() => startEpochOfCopy(db.connection))
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
      db.exec(BOOKKEEPING.create)
      if (db.prepare("SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'").get() === undefined) {
        db.exec(BOOKKEEPING.addChecksum)
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
        applyMigration(db, migration)
        insert.run(migration.version, migration.name, new Date().toISOString(), checksum(migration))
      }
      return status.pending.length
    })
    const applied = guard(() => apply.immediate())
    // A copy of a store from before epochs gets its new epoch once the migrations have made the table.
    this.#started ??= guard(() => startEpochOfCopy(db))
    return applied
  }

  async confirmEpoch ({ restored = false }: { restored?: boolean } = {}): Promise<EpochConfirmation> {
    return guard(() => {
      this.#started ??= startEpochOfCopy(this.#db.connection, restored)
      const started = this.#started
      this.#started = null
      const current = this.#db.prepare(`SELECT ${EPOCH_COLUMNS} FROM store_epochs e ORDER BY e.seq DESC LIMIT 1`).get() as EpochRow
      return { epoch: toEpoch(current), started: started !== null && started.epoch === current.epoch, unreadable: [] }
    })
  }

  /** Copies the database to `path` with SQLite's online backup (a consistent copy while others may write), marked as a copy. */
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
