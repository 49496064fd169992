/**
 * Checkpoints of a serving SQLite store, off its event loop: a worker thread with a connection of its own
 * (./checkpoint-worker.ts) copies the WAL into the database file, while the serving connection has
 * wal_autocheckpoint=0. Before, SQLite's auto-checkpoint ran inside the COMMIT that took the WAL past 1,000 pages:
 * on the event loop, a write of those pages to the database file and its fsync while every request waited
 * (docs/adr/0042-sqlite-checkpoints-off-the-event-loop.md).
 */
import { Worker } from 'node:worker_threads'
import type { CheckpointerSettings, CheckpointReport } from './checkpoint-worker.js'
import { workerModule } from '../../worker-module.js'

export interface CheckpointerOptions {
  /** How often the thread looks at the WAL, ms. */
  pollMs?: number
  /** Frames (pages) in the WAL from which it copies them (PASSIVE): SQLite's own auto-checkpoint threshold. */
  thresholdFrames?: number
  /**
   * Frames from which, once all are copied, it makes the WAL start again even if it must wait a little for the writer
   * (RESTART): the WAL's bound, except while a reader keeps old frames (a backup).
   */
  limitFrames?: number
  /** Called with each checkpoint the thread ran (tests, diagnostics). */
  onCheckpoint?: (report: CheckpointReport) => void
}

/** What the serving connection does if the thread fails or ends before stop(): checkpoint by itself again. */
export type CheckpointerFailed = (error: unknown) => void

export const CHECKPOINT_DEFAULTS = { pollMs: 5, thresholdFrames: 1000, limitFrames: 16_000 } as const

export class Checkpointer {
  readonly #worker: Worker
  readonly #exited: Promise<void>
  #stopping = false

  constructor (path: string, busyTimeoutMs: number, failed: CheckpointerFailed, options: CheckpointerOptions = {}) {
    const settings: CheckpointerSettings = {
      path,
      pollMs: options.pollMs ?? CHECKPOINT_DEFAULTS.pollMs,
      thresholdFrames: options.thresholdFrames ?? CHECKPOINT_DEFAULTS.thresholdFrames,
      limitFrames: options.limitFrames ?? CHECKPOINT_DEFAULTS.limitFrames,
      busyTimeoutMs
    }
    this.#worker = new Worker(workerModule(import.meta.url, './checkpoint-worker'), { workerData: settings, name: 'sqlite-checkpoint' })
    const onCheckpoint = options.onCheckpoint
    this.#worker.on('message', (message: CheckpointReport | { error: string }) => {
      if (onCheckpoint !== undefined && !('error' in message)) onCheckpoint(message)
    })
    // A thread that fails (its connection could not open) or ends would leave the WAL to grow: the serving
    // connection is told, and checkpoints by itself again.
    let error: unknown = null
    this.#worker.on('error', (thrown) => { error = thrown })
    this.#exited = new Promise((resolve) => {
      this.#worker.once('exit', (code) => {
        if (!this.#stopping) failed(error ?? new Error(`the checkpointer thread ended (exit code ${code})`))
        resolve()
      })
    })
    // The thread never keeps the process alive by itself.
    this.#worker.unref()
  }

  /** Stops the thread after the checkpoint it is running, if any, and closes its connection. */
  async stop (): Promise<void> {
    // Kept alive until it has closed its connection.
    this.#stopping = true
    this.#worker.ref()
    this.#worker.postMessage('stop')
    await this.#exited
  }
}
