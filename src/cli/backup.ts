/**
 * `petstore backup FILE` and `petstore restore FILE`: the embedded SQLite store's file, copied while it serves and
 * put back while nothing uses it (src/store/sqlite/backup.ts). PostgreSQL has its own tools for both (docs/backup.md).
 */
import type { Config } from '../config.js'
import { isPostgresUrl } from '../store/postgres/options.js'
import { backupStoreFile, restoreStoreFile, StoreInUseError, TargetExistsError, type StoreFileReport } from '../store/sqlite/backup.js'
import { parse } from './common.js'
import type { Clock, Io } from './io.js'

const POSTGRES_TOOLS = {
  backup: 'back it up with pg_dump, or with base backups and WAL archiving for point-in-time recovery',
  restore: 'restore it with pg_restore (from pg_dump), or by point-in-time recovery from a base backup'
} as const

/** The SQLite file DATABASE_URL names, or null after saying why there is none (exit 2). */
function storeFile (config: Config, command: 'backup' | 'restore', io: Io): string | null {
  if (isPostgresUrl(config.databaseUrl)) {
    io.stderr(`petstore: ${command} works on the embedded SQLite store, and DATABASE_URL names PostgreSQL: ${POSTGRES_TOOLS[command]} (docs/backup.md).\n`)
    return null
  }
  if (config.databaseUrl === ':memory:') {
    io.stderr(`petstore: DATABASE_URL is :memory:, a store without a file: there is nothing to ${command}.\n`)
    return null
  }
  return config.databaseUrl
}

function size (bytes: number): string {
  return bytes < 1_048_576 ? `${Math.ceil(bytes / 1024)} KB` : `${(bytes / 1_048_576).toFixed(1)} MB`
}

/** The rows per table, one a line, aligned. */
function countLines (counts: Record<string, number>): string {
  const width = Math.max(0, ...Object.keys(counts).map((name) => name.length))
  return Object.entries(counts).map(([name, count]) => `  ${name.padEnd(width)}  ${count.toLocaleString('en')}\n`).join('')
}

function reportJson (report: StoreFileReport, extra: Record<string, unknown>): string {
  return JSON.stringify({ ...extra, path: report.path, bytes: report.bytes, integrity: 'ok', schemaVersion: report.schemaVersion, releaseSchemaVersion: report.releaseSchemaVersion, counts: report.counts }) + '\n'
}

export async function backupCommand (args: string[], config: Config, io: Io): Promise<number> {
  const { values, positionals } = parse(args, { force: { type: 'boolean' }, json: { type: 'boolean' } }, 1)
  const file = positionals[0] as string
  const store = storeFile(config, 'backup', io)
  if (store === null) return 2
  const started = performance.now()
  let report: StoreFileReport
  try {
    report = await backupStoreFile(store, file, { replace: values.force === true })
  } catch (error) {
    if (!(error instanceof TargetExistsError)) throw error
    io.stderr(`petstore: ${file} exists: name a new file, or replace it with --force\n`)
    return 1
  }
  const seconds = Math.round(performance.now() - started) / 1000
  io.stdout(values.json === true
    ? reportJson(report, { store, seconds })
    : `Backed up ${store} to ${file} in ${seconds} s: ${size(report.bytes)}, schema version ${report.schemaVersion}, integrity check ok.\n` +
      countLines(report.counts))
  return 0
}

export async function restoreCommand (args: string[], config: Config, io: Io, clock: Clock): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: 'boolean' } }, 1)
  const file = positionals[0] as string
  const store = storeFile(config, 'restore', io)
  if (store === null) return 2
  let restored
  try {
    restored = await restoreStoreFile(file, store, new Date(clock()))
  } catch (error) {
    if (!(error instanceof StoreInUseError)) throw error
    io.stderr(`petstore: cannot restore: ${error.message}. Stop the service (and any other petstore command) first; nothing was changed.\n`)
    return 1
  }
  const { report, kept } = restored
  if (values.json === true) {
    io.stdout(reportJson(report, { restoredFrom: file, kept }))
    return 0
  }
  const behind = report.schemaVersion < report.releaseSchemaVersion
    ? ` It is at schema version ${report.schemaVersion}: the next ${io.command} serve (or ${io.command} migrate) brings it to ${report.releaseSchemaVersion}.`
    : ''
  io.stdout(`Restored ${file} into ${store}: schema version ${report.schemaVersion}, integrity check ok.${behind}\n` +
    (kept === null ? 'There was no store to replace.\n' : `The store it replaced is kept at ${kept}.\n`) +
    countLines(report.counts))
  return 0
}
