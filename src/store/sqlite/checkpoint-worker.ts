/**
 * The checkpointer thread of a serving SQLite store (./checkpointer.ts): its own connection to the file copies the WAL
 * back into the database (a checkpoint), so that the serving connection, whose auto-checkpoint is off, never does it
 * on the event loop while requests wait.
 *
 * Every `pollMs` it reads the WAL's frame count (mxFrame) and how many of them are in the database already
 * (nBackfill) from the wal-index header in the `-shm` file (https://sqlite.org/walformat.html, a read of 136 bytes).
 * While the WAL holds `thresholdFrames` or more and some are not copied, it checkpoints PASSIVE: it copies what the
 * WAL holds without waiting for, or blocking, the writer or readers. Once every frame is copied, the serving
 * connection's next write starts the WAL again from its beginning (SQLite's rule), so the WAL stays near the threshold.
 * Should the writer never leave such a gap and the WAL reach `limitFrames` with every frame copied, it checkpoints
 * RESTART: that takes the write lock, copies the frames of the last few commits and makes the next write start the WAL
 * again, waiting at most RESTART_WAIT_MS for the writer and the readers (the one place a write may wait for a
 * checkpoint, briefly). While a reader keeps old frames (a backup's snapshot), PASSIVE cannot copy them and RESTART
 * is not tried, since it would hold the write lock while it waited for that reader: the WAL grows until the reader is
 * done, as it did when SQLite checkpointed in the COMMIT.
 *
 * Durability is SQLite's own: a checkpoint copies frames that are already durable (each COMMIT synced the WAL),
 * syncs the WAL before and the database file after copying (synchronous=FULL), and a frame is overwritten only
 * after the database file holding it is synced. A crash anywhere leaves the WAL to be replayed on the next open.
 *
 * The wal-index header is read without SQLite's locks: a torn read only makes one poll early or late.
 */
import Database from 'better-sqlite3'
import { closeSync, openSync, readSync } from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'

export interface CheckpointerSettings {
  path: string
  pollMs: number
  thresholdFrames: number
  limitFrames: number
  busyTimeoutMs: number
}

/** What the thread posts after each checkpoint it ran. */
export interface CheckpointReport {
  mode: 'PASSIVE' | 'RESTART'
  /** Frames in the WAL, and copied to the database, as SQLite answered (-1: busy, another connection checkpointed). */
  log: number
  checkpointed: number
  ms: number
}

/** Offsets in the -shm file: the first copy of the wal-index header, then the checkpoint info after both copies. */
const VERSION_OFFSET = 0
const MX_FRAME_OFFSET = 16
const N_BACKFILL_OFFSET = 96
const WAL_INDEX_VERSION = 3007000

/** How long RESTART may wait for the writer and the readers (holding the write lock once it has it), ms. */
const RESTART_WAIT_MS = 100

const settings = workerData as CheckpointerSettings
const db = new Database(settings.path, { fileMustExist: true })
// Opening beside a busy writer waits as the store's connection does.
db.pragma(`busy_timeout = ${settings.busyTimeoutMs}`)
db.pragma('journal_mode = WAL')
db.pragma('synchronous = FULL')
db.pragma('wal_autocheckpoint = 0')
// From now on only RESTART waits (PASSIVE never does): briefly.
db.pragma(`busy_timeout = ${RESTART_WAIT_MS}`)

let shm: number | null = null
const header = Buffer.alloc(N_BACKFILL_OFFSET + 4)

/** mxFrame and nBackfill now, or null when the -shm file cannot be read as a wal-index. */
function walState (): { frames: number, copied: number } | null {
  try {
    shm ??= openSync(`${settings.path}-shm`, 'r')
    if (readSync(shm, header, 0, header.length, 0) < header.length) return null
  } catch {
    return null
  }
  if (header.readUInt32LE(VERSION_OFFSET) !== WAL_INDEX_VERSION) return null
  return { frames: header.readUInt32LE(MX_FRAME_OFFSET), copied: header.readUInt32LE(N_BACKFILL_OFFSET) }
}

function checkpoint (mode: 'PASSIVE' | 'RESTART'): CheckpointReport {
  const start = performance.now()
  const row = (db.pragma(`wal_checkpoint(${mode})`) as Array<{ busy: number, log: number, checkpointed: number }>)[0]
  const report: CheckpointReport = { mode, log: Number(row?.log ?? -1), checkpointed: Number(row?.checkpointed ?? -1), ms: performance.now() - start }
  parentPort?.postMessage(report)
  return report
}

let stopped = false
let timer: NodeJS.Timeout | undefined
/** Polls since the last blind checkpoint, when the wal-index cannot be read. */
let blind = 0
/** Without the wal-index: a PASSIVE checkpoint this many polls apart. */
const BLIND_EVERY = 20

function poll (): void {
  if (stopped) return
  try {
    const wal = walState()
    if (wal === null) {
      // Not readable (not created yet, or a format this code does not know): checkpoint on a timer instead.
      if (++blind >= BLIND_EVERY) { blind = 0; checkpoint('PASSIVE') }
    } else if (wal.frames >= settings.limitFrames) {
      const passive = checkpoint('PASSIVE')
      if (passive.log > 0 && passive.checkpointed === passive.log) checkpoint('RESTART')
    } else if (wal.frames >= settings.thresholdFrames && wal.copied < wal.frames) {
      checkpoint('PASSIVE')
    }
  } catch (error) {
    // SQLITE_BUSY past busy_timeout (a long transaction of another process), an I/O error: the next poll tries again,
    // and the serving connection's data is untouched.
    parentPort?.postMessage({ error: String(error) })
  }
  timer = setTimeout(poll, settings.pollMs)
}

parentPort?.on('message', (message: unknown) => {
  if (message !== 'stop') return
  stopped = true
  clearTimeout(timer)
  if (shm !== null) closeSync(shm)
  db.close()
  parentPort?.close()
})

poll()
