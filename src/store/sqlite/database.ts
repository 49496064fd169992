/**
 * The connection every area of the SQLite store works on: one file through better-sqlite3, in WAL mode with
 * synchronous=FULL so that an acknowledged write survives a crash or power loss, its prepared statements, and its
 * group commit. All integers are read as bigint (safeIntegers) so int64 ids stay exact.
 */
import Database from 'better-sqlite3'
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { Checkpointer, type CheckpointerOptions } from './checkpointer.js'
import { GroupCommit, type CommitObserver } from './group-commit.js'
import { SqliteWriter } from './writer.js'

export interface SqliteOptions {
  /** How long a statement waits for another process's write lock before failing (busy_timeout), in ms. */
  busyTimeoutMs?: number
  /** What watches the group commits (the tracing of a traced process). */
  commitObserver?: CommitObserver
  /**
   * Checkpoint on a thread of its own instead of in the COMMIT that fills the WAL (./checkpointer.ts): what a serving
   * process does, so that no request waits for a checkpoint. Not for ':memory:'. Short-lived connections (the CLI)
   * keep SQLite's auto-checkpoint.
   */
  backgroundCheckpoints?: boolean | CheckpointerOptions
  /**
   * Every write of the areas on a thread of its own (./writer.ts), this connection only reading: what a serving process
   * does, so that no request waits for a COMMIT's fsync. Not for ':memory:'.
   */
  writerThread?: boolean
  /**
   * false: this connection's COMMITs never checkpoint, and nothing else here does (the writer thread's connection,
   * whose process checkpoints on the serving connection's thread); until checkpointInCommits() is called.
   */
  checkpointInCommits?: boolean
}

/** SQLite's default auto-checkpoint threshold, in WAL frames. */
const SQLITE_AUTOCHECKPOINT = 1000

export class SqliteDatabase {
  /** The file (or ':memory:'). */
  readonly path: string
  readonly connection: Database.Database
  /** Writes that join the group commit. */
  readonly writes: GroupCommit
  readonly #statements = new Map<string, Database.Statement>()
  readonly #checkpointer: Checkpointer | null = null
  /** The thread every write of the areas runs on, if this connection is a serving one that reads only. */
  readonly writer: SqliteWriter | null = null

  constructor (path: string, options: SqliteOptions = {}) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
    this.path = path
    const db = new Database(path)
    this.connection = db
    db.defaultSafeIntegers(true)
    // The CLI may write while a server runs, and a serving store's writer thread opens while the server migrates: wait
    // for the lock instead of failing at once, from the first statement on (switching to WAL may need it).
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000
    db.pragma(`busy_timeout = ${busyTimeoutMs}`)
    // Small pages for a new database: a group commit of stock updates writes every page it touched to the WAL,
    // and inventory rows are a few bytes; 1 KiB pages cut that copying and PATCH cost
    // (docs/adr/0003-embedded-sqlite-by-default-postgresql-to-scale-out.md). A no-op
    // on an existing database.
    db.pragma('page_size = 1024')
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = FULL')
    db.pragma('foreign_keys = ON')
    if (options.checkpointInCommits === false) db.pragma('wal_autocheckpoint = 0')
    const background = options.backgroundCheckpoints
    if (background !== undefined && background !== false && path !== ':memory:') {
      // This connection never checkpoints while it serves: the thread does (docs/adr/0042-sqlite-checkpoints-off-the-event-loop.md).
      db.pragma('wal_autocheckpoint = 0')
      // Should the thread fail, the connection that writes checkpoints by itself again, as SQLite does by default.
      const fallBack = (): void => {
        this.checkpointInCommits()
        this.writer?.checkpointInCommits()
      }
      this.#checkpointer = new Checkpointer(path, busyTimeoutMs, fallBack, background === true ? {} : background)
    }
    if (options.writerThread === true && path !== ':memory:') {
      // docs/adr/0048-sqlite-writes-on-a-thread-of-their-own.md. With a checkpointer thread, the writer's COMMITs do
      // not checkpoint; without one they do, as SQLite does by default (on the writer thread too).
      this.writer = new SqliteWriter({ path, busyTimeoutMs, checkpointInCommits: this.#checkpointer === null }, options.commitObserver)
    }
    this.writes = new GroupCommit(db, options.commitObserver)
  }

  /** Checkpoints in this connection's COMMITs again, as SQLite does by default (the checkpointer thread failed). */
  checkpointInCommits (): void {
    if (this.connection.open) this.connection.pragma(`wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT}`)
  }

  /** Prepared statements are compiled once per connection and reused. */
  prepare (sql: string): Database.Statement {
    let statement = this.#statements.get(sql)
    if (statement === undefined) {
      statement = this.connection.prepare(sql)
      this.#statements.set(sql, statement)
    }
    return statement
  }

  /**
   * Answers the writes asked for and stops the writer thread, stops the checkpointer thread, if any, then closes the
   * connection (the last connection to close checkpoints what the WAL still holds, and removes it).
   */
  async close (): Promise<void> {
    await this.writer?.close()
    await this.#checkpointer?.stop()
    if (this.connection.open) this.connection.close()
  }
}

/** Pages per step of an online backup: all of them. */
const WHOLE_FILE = 0x7fffffff

/**
 * The mark of a copy of the store's file (PRAGMA user_version, which SQLite keeps for applications): set on every
 * copy made with onlineCopy (petstore backup, the copy petstore restore puts in place, the one kept before a
 * migration), never on the store itself. The first time such a copy is opened as the store, its history may fork
 * from the one the original went on with, so a new epoch begins and the mark is cleared (../schema/sqlite.ts).
 * "COPY" in ASCII.
 */
export const COPY_MARK = 0x434f5059

/**
 * Copies the database on `db` to a new file at `path` with SQLite's online backup API, in one step. A step reads one
 * snapshot, so the copy is consistent while other connections go on writing (WAL: they do not wait for it). In
 * steps of better-sqlite3's default 100 pages, a write by another connection between two steps restarts the copy from
 * its first page, and under steady writes it may never finish.
 */
export async function onlineCopy (db: Database.Database, path: string): Promise<void> {
  await db.backup(path, { progress: () => WHOLE_FILE })
  // Marked as a copy (COPY_MARK): whoever opens it as the store first starts a new epoch in it.
  const copy = new Database(path, { fileMustExist: true })
  try {
    copy.pragma(`user_version = ${COPY_MARK}`)
  } finally {
    copy.close()
  }
}
