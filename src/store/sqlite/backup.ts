/**
 * Backups of the embedded store's file, and restoring one. The copy is made with SQLite's online backup API (safe
 * while a server serves and writes), checked before anyone relies on it (SQLite's integrity check, a schema this
 * release knows, made of exactly what its migrations define), and put under its name only once it is whole: it is written under a temporary name in the same
 * directory, synced and renamed, so a run that fails or is killed never leaves a half file where a backup or the store
 * is expected (at worst a `.<name>.<random>.partial` file beside it).
 */
import Database from 'better-sqlite3'
import { randomBytes } from 'node:crypto'
import { closeSync, existsSync, fsyncSync, linkSync, mkdirSync, openSync, realpathSync, renameSync, rmSync, statSync, unlinkSync } from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import { SchemaError, type SchemaStatus } from '../migrations.js'
import { onlineCopy } from './database.js'
import { appliedMigrations, sqliteSchemaStatus } from './schema.js'

/** A file that cannot serve as a backup or as the store; the message says which file and why. */
export class StoreFileError extends Error {
  constructor (message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'StoreFileError'
  }
}

/** A backup would replace an existing file, and replacing was not asked for. */
export class TargetExistsError extends StoreFileError {
  constructor (readonly path: string) {
    super(`${path} exists`)
    this.name = 'TargetExistsError'
  }
}

/** The store's file is open in another process (a server, or another command), so it cannot be replaced now. */
export class StoreInUseError extends Error {
  constructor (readonly path: string) {
    super(`${path} is open in another process (a running server, or another command)`)
    this.name = 'StoreInUseError'
  }
}

/** What a checked copy holds. */
export interface StoreFileReport {
  path: string
  bytes: number
  /** The schema version of the copy, and the highest this release knows (a restored store behind it is migrated). */
  schemaVersion: number
  releaseSchemaVersion: number
  /** Rows per table, by table name (the schema's bookkeeping tables left out). */
  counts: Record<string, number>
}

/** Tables that hold nothing of their own: the record of migrations, and the one-row version of the listing. */
const BOOKKEEPING: ReadonlySet<string> = new Set(['schema_migrations', 'inventory_version'])

/** The files SQLite keeps beside a database while it is in use, or after a crash. */
const COMPANIONS = ['-wal', '-shm', '-journal'] as const

/** A temporary name beside `path`, in the same directory (a rename there is atomic). */
function partialName (path: string): string {
  return join(dirname(path), `.${basename(path)}.${randomBytes(4).toString('hex')}.partial`)
}

function removeWithCompanions (path: string): void {
  for (const suffix of ['', ...COMPANIONS]) rmSync(path + suffix, { force: true })
}

/** `path` absolute, its directory with symbolic links resolved (as far as it exists): two names of one entry compare equal. */
function canonical (path: string): string {
  const absolute = resolve(path)
  try {
    return join(realpathSync(dirname(absolute)), basename(absolute))
  } catch {
    return absolute
  }
}

/**
 * Which of the files SQLite keeps beside the store `path` names, whether it exists now or not ('-wal', ...), or null.
 * SQLite puts them beside the file a link to the store leads to, so the store's own name and that file's both count.
 * A backup written there would replace a serving store's log (its acknowledged writes lost, other readers seeing a
 * damaged database), or be taken for the log by the next server and then deleted by it.
 */
function companionOf (storePath: string, path: string): string | null {
  const stores = new Set([canonical(storePath)])
  try {
    stores.add(realpathSync(storePath))
  } catch { /* no store yet: its name is all there is */ }
  const target = canonical(path)
  for (const store of stores) {
    for (const suffix of COMPANIONS) {
      if (target === store + suffix || sameFile(path, store + suffix)) return suffix
    }
  }
  return null
}

function sameFile (a: string, b: string): boolean {
  const [first, second] = [statSync(a, { throwIfNoEntry: false }), statSync(b, { throwIfNoEntry: false })]
  return first !== undefined && second !== undefined && first.dev === second.dev && first.ino === second.ino
}

/** Flushes a file's content to the disk. */
function syncFile (path: string): void {
  const fd = openSync(path, 'r+')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Flushes a directory's entries (a rename is durable only then); skipped where a directory cannot be opened or synced (Windows). */
function syncDirectory (path: string): void {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return
  }
  try {
    fsyncSync(fd)
  } catch (error) {
    if (!['EISDIR', 'EPERM', 'EINVAL', 'EBADF'].includes(String((error as { code?: unknown }).code))) throw error
  } finally {
    closeSync(fd)
  }
}

/** SQLite's word for a file that is not a database, or a damaged one, as a StoreFileError naming the file. */
function fileProblem (label: string, error: unknown): unknown {
  const code = String((error as { code?: unknown }).code)
  if (code === 'SQLITE_NOTADB') return new StoreFileError(`${label} is not a SQLite database`, { cause: error })
  if (code.startsWith('SQLITE_CORRUPT')) return new StoreFileError(`${label} is damaged (SQLite: ${(error as Error).message})`, { cause: error })
  if (error instanceof SchemaError) return new StoreFileError(`${label}: ${error.message}`, { cause: error })
  return error
}

/**
 * Checks the database file at `path` (named `label` in messages) and says what it holds: SQLite's integrity check
 * must answer ok, and it must be a store of this service whose migrations this release knows in some landed form (its
 * version may be behind or ahead of this release's: the caller decides), with exactly the tables, indexes, triggers
 * and views those migrations make (src/store/sqlite/schema.ts). On the way it is switched from WAL to a rollback
 * journal, so that it is one self-contained file (a server switches it back when it opens it).
 */
function inspect (path: string, label: string): { status: SchemaStatus, counts: Record<string, number> } {
  let db: Database.Database | undefined
  try {
    db = new Database(path, { fileMustExist: true })
    db.pragma('journal_mode = DELETE')
    const problems = db.prepare('PRAGMA integrity_check(5)').pluck().all() as string[]
    if (problems.length !== 1 || problems[0] !== 'ok') {
      throw new StoreFileError(`${label} fails SQLite's integrity check: ${problems.join('; ')}`)
    }
    const applied = appliedMigrations(db)
    if (applied.length === 0) throw new StoreFileError(`${label} is a SQLite database, but not a store of this service (no applied migrations)`)
    const status = sqliteSchemaStatus(db, applied)
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
      .pluck().all() as string[]
    const counts: Record<string, number> = {}
    for (const table of tables.filter((name) => !BOOKKEEPING.has(name))) {
      counts[table] = Number(db.prepare(`SELECT count(*) FROM "${table.replaceAll('"', '""')}"`).pluck().get())
    }
    return { status, counts }
  } catch (error) {
    throw fileProblem(label, error)
  } finally {
    db?.close()
  }
}

function report (path: string, checked: ReturnType<typeof inspect>): StoreFileReport {
  return {
    path,
    bytes: statSync(path).size,
    schemaVersion: checked.status.version,
    releaseSchemaVersion: checked.status.latest,
    counts: checked.counts
  }
}

/**
 * Puts the finished copy at `path`: a rename, which replaces an existing file, when `replace`; otherwise a hard link,
 * which fails on an existing one, so a file that appeared meanwhile is never overwritten (where the file system has no
 * hard links: a check, then the rename).
 */
function install (temp: string, path: string, replace: boolean): void {
  if (replace) {
    renameSync(temp, path)
  } else {
    try {
      linkSync(temp, path)
      unlinkSync(temp)
    } catch (error) {
      const code = (error as { code?: unknown }).code
      if (code === 'EEXIST') throw new TargetExistsError(path)
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS') throw error
      if (existsSync(path)) throw new TargetExistsError(path)
      renameSync(temp, path)
    }
  }
  syncDirectory(dirname(path))
}

/**
 * Backs up the store file at `storePath` to `path` while servers and commands may go on using it: one online backup
 * step reads one snapshot of the database, so the copy holds every transaction committed before it began, and writers
 * do not wait for it (WAL). The copy is checked (integrity, the same schema version as the store) before it takes its
 * name. An existing `path` is refused (TargetExistsError) unless `replace`.
 */
export async function backupStoreFile (storePath: string, path: string, options: { replace: boolean }): Promise<StoreFileReport> {
  if (!existsSync(storePath)) throw new StoreFileError(`there is no store at ${storePath} to back up`)
  if (sameFile(storePath, path)) throw new StoreFileError(`${path} is the store itself`)
  if (statSync(path, { throwIfNoEntry: false })?.isDirectory() === true) throw new StoreFileError(`${path} is a directory: name the backup's file`)
  if (!existsSync(dirname(resolve(path)))) throw new StoreFileError(`the directory ${dirname(path)} does not exist: create it first`)
  const companion = companionOf(storePath, path)
  if (companion !== null) {
    throw new StoreFileError(`${path} is a file SQLite keeps beside the store (its ${companion} file): name a file of its own`)
  }
  if (!options.replace && existsSync(path)) throw new TargetExistsError(path)
  const temp = partialName(path)
  try {
    let source: Database.Database | undefined
    let version: number
    try {
      source = new Database(storePath, { fileMustExist: true })
      version = sqliteSchemaStatus(source).version
      await onlineCopy(source, temp)
    } catch (error) {
      throw fileProblem(storePath, error)
    } finally {
      source?.close()
    }
    const checked = inspect(temp, `the copy of ${storePath}`)
    if (checked.status.version !== version) {
      throw new StoreFileError(`the copy is at schema version ${checked.status.version} and the store was at ${version} (migrated meanwhile?): run the backup again`)
    }
    syncFile(temp)
    install(temp, path, options.replace)
    return report(path, checked)
  } catch (error) {
    removeWithCompanions(temp)
    throw error
  }
}

/** `path` with a UTC time stamp, and a counter where that name is taken: `petstore.db.before-restore-20261124T120000Z`. */
function keptName (path: string, now: Date): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')
  let name = `${path}.before-restore-${stamp}`
  for (let n = 2; existsSync(name); n++) name = `${path}.before-restore-${stamp}-${n}`
  return name
}

/**
 * Takes the store file out of service: renames it to a kept name and returns that (null when there was no store).
 * Throws StoreInUseError when another process has it open. Every connection to a WAL database holds a shared lock on
 * the file for as long as it is open, and leaving WAL needs the only connection: `journal_mode = DELETE` succeeds only
 * when no server or command has the store open. The locks are the operating system's and end with their process, so a
 * crashed server does not count as holding it. On its way, leaving WAL copies what the write-ahead log holds into the
 * file (committed writes of a crashed server included) and removes the -wal and -shm files, so the kept file is
 * complete and nothing of it can be taken for the log of the file that replaces it.
 */
function setAside (storePath: string, now: Date): string | null {
  const kept = keptName(storePath, now)
  if (existsSync(storePath)) {
    let db: Database.Database | undefined
    try {
      // A server holds the lock for its lifetime: waiting for it gains nothing.
      db = new Database(storePath, { fileMustExist: true, timeout: 0 })
      db.pragma('journal_mode = DELETE')
    } catch (error) {
      const code = String((error as { code?: unknown }).code)
      if (code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED') throw new StoreInUseError(storePath)
      // A file that is not a database, or a damaged one, cannot be open in a server; it is kept like any other.
      if (code !== 'SQLITE_NOTADB' && !code.startsWith('SQLITE_CORRUPT')) throw error
    } finally {
      db?.close()
    }
    renameSync(storePath, kept)
  }
  // What is left beside the store stays with it (under the kept name, where SQLite pairs them again).
  let moved = false
  for (const suffix of COMPANIONS) {
    if (existsSync(storePath + suffix)) {
      renameSync(storePath + suffix, kept + suffix)
      moved = true
    }
  }
  return existsSync(kept) || moved ? kept : null
}

export interface RestoreResult {
  /** The restored store as checked. */
  report: StoreFileReport
  /** Where the store it replaced is now (null: there was none). */
  kept: string | null
}

/**
 * Replaces the store file at `storePath` with the backup at `path`. The backup is copied beside the store first and
 * checked there (integrity; a store of this service at a schema version this release knows: an older one is fine, a
 * newer one is refused; its schema objects exactly those its migrations make); the backup file itself is only read. Then, unless another process has the store open
 * (StoreInUseError), the store is renamed to a kept name and the copy, synced, renamed into its place. Nothing is
 * replaced when any check fails.
 */
export async function restoreStoreFile (path: string, storePath: string, now: Date = new Date()): Promise<RestoreResult> {
  if (!existsSync(path)) throw new StoreFileError(`${path} does not exist`)
  if (statSync(path).isDirectory()) throw new StoreFileError(`${path} is a directory, not a backup file`)
  if (sameFile(path, storePath)) throw new StoreFileError(`${path} is the store itself`)
  mkdirSync(dirname(storePath), { recursive: true })
  const temp = partialName(storePath)
  try {
    let source: Database.Database | undefined
    try {
      source = new Database(path, { fileMustExist: true, readonly: true })
      await onlineCopy(source, temp)
    } catch (error) {
      throw fileProblem(path, error)
    } finally {
      source?.close()
    }
    const checked = inspect(temp, path)
    const { version, latest } = checked.status
    if (checked.status.ahead.length > 0) {
      throw new StoreFileError(`${path} is at schema version ${version}, newer than this release's (${latest}): restore it with the release that wrote it`)
    }
    syncFile(temp)
    const kept = setAside(storePath, now)
    try {
      renameSync(temp, storePath)
    } catch (error) {
      // The store goes back where it was rather than leave no store at all.
      if (kept !== null && existsSync(kept)) renameSync(kept, storePath)
      throw error
    }
    syncDirectory(dirname(storePath))
    return { report: report(storePath, checked), kept }
  } catch (error) {
    removeWithCompanions(temp)
    throw error
  }
}
