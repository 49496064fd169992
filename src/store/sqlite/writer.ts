/**
 * A serving SQLite store's writer: a worker thread with a connection of its own (../sqlite-writer-thread.ts) runs every
 * write of the areas, so that no COMMIT, and no fsync of synchronous=FULL, runs on the event loop while requests wait
 * (docs/adr/0048-sqlite-writes-on-a-thread-of-their-own.md). The serving connection reads only.
 *
 * Writes asked for in one turn of the event loop go to the thread in one message, and the thread answers them in one:
 * the thread's group commit (./group-commit.ts) puts those that join it in one transaction. A write is answered once
 * its commit is durable, as before; a read after that answer sees it (WAL: each read starts from the newest commit).
 */
import { Worker } from 'node:worker_threads'
import { AppError, StoreReadOnlyError, StoreUnavailableError, type ErrorCode } from '../../errors.js'
import type { CommitObserver } from './group-commit.js'
import { workerModule } from '../../worker-module.js'

/** What the thread opens: the store's file, and how long its connection waits for another process's lock. */
export interface WriterSettings {
  path: string
  busyTimeoutMs: number
  /** Whether its COMMITs checkpoint, as SQLite does by default: only when no checkpointer thread does. */
  checkpointInCommits: boolean
}

/** A write for the thread: the area, the area's method and its arguments (structured-cloneable). */
export type WriteCall = [area: string, method: string, args: unknown[]]

/** An error as it crosses threads: structured clone keeps neither the class nor the fields the edge reads. */
export interface SentError {
  name: string
  message: string
  code?: string
  headers?: Record<string, string>
}

/** The answer to a write: what it resolved with, or the error it failed with. */
export type WriteReply = [ok: true, value: unknown] | [ok: false, error: SentError]

/** How long closing waits, beyond a write's own lock wait, for the thread to end by itself before stopping it. */
const CLOSE_TIMEOUT_MS = 5_000

/** From the event loop to the thread. */
export type ToWriter = { seq: number, calls: WriteCall[] } | 'checkpoint-in-commits' | 'close'
/** From the thread: the answers to one message's writes (`seq`), together and in the order of its writes. */
export interface FromWriter { seq: number, replies: WriteReply[] }

/** An error as the thread sends it. */
export function sendError (error: unknown): SentError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) }
  const sent: SentError = { name: error.name, message: error.message }
  const code = (error as { code?: unknown }).code
  if (typeof code === 'string') sent.code = code
  if (error instanceof AppError) sent.headers = { ...error.headers }
  return sent
}

/** The error the thread sent, as the class the edge and the callers know (503s, the API's codes), or a plain Error. */
export function receivedError (sent: SentError): Error {
  switch (sent.name) {
    case 'StoreUnavailableError': return new StoreUnavailableError(sent.message)
    case 'StoreReadOnlyError': return new StoreReadOnlyError(sent.message)
    case 'AppError': return new AppError(sent.code as ErrorCode, sent.message, sent.headers)
  }
  const error = new Error(sent.message)
  error.name = sent.name
  if (sent.code !== undefined) Object.assign(error, { code: sent.code })
  return error
}

interface Waiting {
  resolve: (value: unknown) => void
  reject: (error: unknown) => void
}

/** One message's writes while the thread works on them: their callers, in order, and the end of their commit's span. */
interface Sent {
  callers: Waiting[]
  end: ((error?: unknown) => void) | null
}

export class SqliteWriter {
  readonly #settings: WriterSettings
  readonly #observer: CommitObserver | undefined
  #worker: Worker | null = null
  /** Writes not sent yet, and their callers: they go at the end of this turn of the event loop. */
  #queue: WriteCall[] = []
  #callers: Waiting[] = []
  /** What the observer kept of each queued write that a commit span covers. */
  #kept: unknown[] = []
  /** Messages sent and not answered, by their number. */
  readonly #sent = new Map<number, Sent>()
  #nextSeq = 1
  #checkpointInCommits = false
  #closed: Promise<void> | null = null

  constructor (settings: WriterSettings, observer?: CommitObserver) {
    this.#settings = settings
    this.#observer = observer
    this.#start()
  }

  /**
   * Runs `area.method(...args)` on the thread's store; resolves with what it resolved with, once durable. `observed`:
   * a write of the group commit, whose commit the observer sees (a span) as it did on the event loop.
   */
  call (area: string, method: string, args: unknown[], observed: boolean): Promise<unknown> {
    if (this.#closed !== null) return Promise.reject(new StoreUnavailableError('the SQLite store is closed'))
    return new Promise((resolve, reject) => {
      this.#callers.push({ resolve, reject })
      this.#queue.push([area, method, args])
      if (observed && this.#observer !== undefined) this.#kept.push(this.#observer.queued())
      if (this.#queue.length === 1) setImmediate(() => { this.#send() })
    })
  }

  /** The checkpointer thread failed: the writer's commits checkpoint again, as SQLite does by default. */
  checkpointInCommits (): void {
    this.#checkpointInCommits = true
    this.#worker?.postMessage('checkpoint-in-commits' satisfies ToWriter)
  }

  /** Answers every write asked for, then stops the thread and closes its connection. */
  async close (): Promise<void> {
    this.#closed ??= this.#close()
    await this.#closed
  }

  async #close (): Promise<void> {
    if (this.#queue.length > 0) this.#send()
    const worker = this.#worker
    if (worker === null) return
    const exited = new Promise<void>((resolve) => worker.once('exit', () => { resolve() }))
    worker.ref()
    // The thread answers every write sent before this message, then closes its connection and ends.
    worker.postMessage('close' satisfies ToWriter)
    // A thread that has not ended once its writes could have waited out their lock is stopped; what it had not
    // answered then fails as unavailable (the exit handler).
    const timer = setTimeout(() => { void worker.terminate() }, this.#settings.busyTimeoutMs + CLOSE_TIMEOUT_MS)
    try {
      await exited
    } finally {
      clearTimeout(timer)
    }
  }

  #start (): Worker {
    const worker = new Worker(workerModule(import.meta.url, '../sqlite-writer-thread'), { workerData: this.#settings, name: 'sqlite-writer' })
    this.#worker = worker
    if (this.#checkpointInCommits) worker.postMessage('checkpoint-in-commits' satisfies ToWriter)
    worker.on('message', (message: FromWriter) => { this.#answer(message) })
    let error: unknown = null
    worker.on('error', (thrown) => { error = thrown })
    worker.once('exit', (code) => {
      if (this.#worker === worker) this.#worker = null
      // Whatever was sent and not answered is failed; the next write starts a new thread.
      const reason = new StoreUnavailableError(`the SQLite writer thread ended (${error === null ? `exit code ${code}` : String(error)})`,
        { cause: error })
      const lost = [...this.#sent.values()]
      this.#sent.clear()
      for (const sent of lost) {
        sent.end?.(reason)
        for (const caller of sent.callers) caller.reject(reason)
      }
    })
    // The thread keeps the process alive only while it has writes to answer.
    worker.unref()
    return worker
  }

  #send (): void {
    const calls = this.#queue
    if (calls.length === 0) return
    const callers = this.#callers
    this.#queue = []
    this.#callers = []
    const kept = this.#kept
    this.#kept = []
    const worker = this.#worker ?? this.#start()
    const end = kept.length === 0 || this.#observer === undefined ? null : this.#observer.committing(kept)
    if (this.#sent.size === 0) worker.ref()
    const seq = this.#nextSeq++
    this.#sent.set(seq, { callers, end })
    try {
      worker.postMessage({ seq, calls } satisfies ToWriter)
    } catch (error) {
      // An argument that cannot be cloned (a function): a bug of the caller, failed here rather than in the thread.
      this.#sent.delete(seq)
      if (this.#sent.size === 0 && this.#closed === null) worker.unref()
      end?.(error)
      for (const caller of callers) caller.reject(error)
    }
  }

  #answer ({ seq, replies }: FromWriter): void {
    const sent = this.#sent.get(seq)
    this.#sent.delete(seq)
    // Closing keeps the thread referenced until it has ended.
    if (this.#sent.size === 0 && this.#closed === null) this.#worker?.unref()
    if (sent === undefined) return
    let failed = 0
    replies.forEach((reply, i) => {
      const caller = sent.callers[i] as Waiting
      if (reply[0]) {
        caller.resolve(reply[1])
      } else {
        failed++
        caller.reject(receivedError(reply[1]))
      }
    })
    sent.end?.(failed > 0 && failed === replies.length ? new Error(`${failed} writes failed`) : undefined)
  }
}
