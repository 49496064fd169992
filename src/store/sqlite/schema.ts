/**
 * Where a SQLite file's schema stands against this release (sqliteSchemaStatus: the migrations schema_migrations
 * records, and the objects they make), for the store's schema area (src/store/schema/sqlite.ts) and for files that are
 * not the store (a backup being checked, ./backup.ts).
 *
 * The schema check of a SQLite file (src/store/schema-check.ts): every row of its main schema (sqlite_master: tables,
 * indexes, triggers, views, SQLite's own tables such as sqlite_sequence and sqlite_stat1, virtual tables) must be one
 * that the migrations it records as applied make, in the form they make it, when run on an empty in-memory database.
 * Nothing is listed by hand, so a new migration is checked as soon as it exists. It reads the schema only (no table
 * is scanned), so it costs the same on a large file as on an empty one.
 */
import Database from 'better-sqlite3'
import { appliedHistory, checksum, detectQueries, schemaStatus, type AppliedMigration, type Migration, type SchemaStatus } from '../migrations.js'
import { requireSchema, type SchemaObject } from '../schema-check.js'
import { applyMigration, BOOKKEEPING, PLAN } from './migrations.js'

/**
 * The tokens of SQL text that normalization keeps as written (string literals, quoted names in any of SQLite's
 * three quotes, comments with a line comment's newline), a run of SQLite's whitespace, or anything else.
 */
const TOKENS = /('(?:[^']|'')*'?|"(?:[^"]|"")*"?|`(?:[^`]|``)*`?|\[[^\]]*\]?|--[^\n]*\n?|\/\*[\s\S]*?(?:\*\/|$))|([ \t\n\f\r]+)|([^'"`[ \t\n\f\r\-/]+|[\s\S])/gy

/**
 * SQL text with each run of whitespace between tokens made one space, and nothing else changed: texts that differ
 * only in line endings or indentation compare equal, and any other difference (a letter's case in a string, a
 * space inside a quoted name, a comment) does not.
 */
export function normalizeSql (sql: string): string {
  let text = ''
  for (const [, kept, space, other] of sql.matchAll(TOKENS)) text += space === undefined ? (kept ?? other ?? '') : ' '
  return text.trim()
}

interface MasterRow { type: string, name: string, tbl_name: string, sql: string | null }

/** A table's columns as SQLite resolved them (name -> type, not null, default, key position, hidden). */
function columnsOf (db: Database.Database, table: string): ReadonlyMap<string, string> {
  const rows = db.prepare("SELECT name, type, \"notnull\", dflt_value, pk, hidden FROM pragma_table_xinfo(?, 'main') ORDER BY cid").all(table) as
    Array<{ name: string, type: string, notnull: unknown, dflt_value: string | null, pk: unknown, hidden: unknown }>
  return new Map(rows.map((c) => [c.name, `${c.type} ${String(c.notnull)} ${c.dflt_value ?? 'null'} ${String(c.pk)} ${String(c.hidden)}`]))
}

/**
 * Every object of the main schema of `db` (another attached database or the connection's temporary one is not the
 * file's). A table's columns, only to say what differs, are read when asked (`lazy`: while `db` is still open) or at
 * once, and only for ordinary tables (a virtual table's module is not run).
 */
export function sqliteObjects (db: Database.Database, { lazy }: { lazy: boolean }): SchemaObject[] {
  const rows = db.prepare('SELECT type, name, tbl_name, sql FROM main.sqlite_master').all() as MasterRow[]
  return rows.map((row) => {
    const definition = row.sql === null ? '' : normalizeSql(row.sql)
    const object = { type: row.type, name: row.name, table: row.tbl_name, definition }
    if (row.type !== 'table' || !/^CREATE TABLE /i.test(definition)) return object
    if (lazy) return { ...object, columns: () => columnsOf(db, row.name) }
    const columns = columnsOf(db, row.name)
    return { ...object, columns: () => columns }
  })
}

/** How the file's schema_migrations table was made: not at all, by a release before checksums, or with them. */
export type Bookkeeping = 'none' | 'before checksums' | 'checksums'

export function bookkeepingOf (db: Database.Database): Bookkeeping {
  if (db.prepare("SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get() === undefined) return 'none'
  return db.prepare("SELECT 1 FROM pragma_table_info('schema_migrations', 'main') WHERE name = 'checksum'").get() === undefined ? 'before checksums' : 'checksums'
}

/** Expected schemas by history: a process checks the same few histories again and again (each start, each command). */
const expectedByHistory = new Map<string, readonly SchemaObject[]>()

/** The objects that running `history` (in order) on an empty database makes, with the bookkeeping table as the store has it. */
export function expectedSqliteObjects (history: readonly Migration[], bookkeeping: Bookkeeping): readonly SchemaObject[] {
  const key = [bookkeeping, ...history.map((m) => `${m.version}:${checksum(m)}`)].join(' ')
  let objects = expectedByHistory.get(key)
  if (objects === undefined) {
    const db = new Database(':memory:')
    try {
      if (bookkeeping !== 'none') db.exec(bookkeeping === 'checksums' ? BOOKKEEPING.create : BOOKKEEPING.createBeforeChecksums)
      for (const migration of history) applyMigration(db, migration)
      objects = sqliteObjects(db, { lazy: false })
    } finally {
      db.close()
    }
    expectedByHistory.set(key, objects)
  }
  return objects
}

/**
 * Throws SchemaError('altered') naming every object of the file on `db` that its history (the migrations it ran, in
 * the form they ran) does not make, or makes otherwise, and every one it makes that is missing.
 */
export function requireSqliteSchema (db: Database.Database, history: readonly Migration[], version: number): void {
  requireSchema(sqliteObjects(db, { lazy: true }), expectedSqliteObjects(history, bookkeepingOf(db)), version)
}

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
 * migration was edited, or when the file's schema objects are not those its migrations make ('altered'; a store
 * ahead of this release is not compared: its later migrations are unknown here, and it is served read-only). Also
 * for files that are not the store (a backup being checked). It reads the schema and schema_migrations only.
 */
export function sqliteSchemaStatus (db: Database.Database, applied: AppliedMigration[] = appliedMigrations(db)): SchemaStatus {
  const detected = new Map(detectQueries(PLAN).map((query) => [query, Number(db.prepare(query).pluck().get()) === 1]))
  const status = schemaStatus(applied, PLAN, detected)
  if (status.ahead.length === 0) requireSqliteSchema(db, appliedHistory(applied, PLAN, detected), status.version)
  return status
}
