/**
 * OTLP export from a thread of its own (docs/adr/0054-spans-exported-from-a-thread-of-their-own.md). The SDK's batch
 * processor hands each batch here; it crosses to the thread as plain values (./span-records.ts), and there the
 * exporter the environment names (./exporter.ts), behind the scrubbing one (./redact.ts), serializes and sends it. The
 * event loop that answers requests does neither: a batch of 512 spans took about 2 ms to serialize, and an HTTP
 * client in the same isolate as the server made the server's own write path slower for every request (its stream
 * and message functions, shared by both, saw two kinds of objects where they had seen one).
 *
 * The thread starts with the exporter, which says whether it could make its exporter (`ready`: a setting the exporter
 * refuses stops the start, as it did when the exporter was made here). It keeps the process alive only while it owes
 * an answer (a start, a batch, a flush, a shutdown), each bounded by the exporter's timeout: an idle thread never
 * holds a stopping process, whether or not the SDK got as far as shutting it down. A thread that ends fails the
 * batches it held, and the next batch starts another, no sooner than a backoff after one that could not start. A batch that cannot reach the thread whole ends it too: the thread and this side
 * must agree on the resources and scopes already sent.
 */
import { diag } from '@opentelemetry/api'
import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace'
import { Worker } from 'node:worker_threads'
import { workerModule } from '../worker-module.js'
import { otelVariable } from './env.js'
import { SpanEncoder, type SpanBatch } from './span-records.js'

/** What the export thread is asked: a batch to export, a flush, or to shut its exporter down. */
export type ToExportThread =
  | { id: number, kind: 'export', batch: SpanBatch }
  | { id: number, kind: 'flush' | 'shutdown' }

/**
 * What it says: whether its exporter exists (`ready`, once, first), or its answer to a request, by id: the result
 * code, and the error's message when it failed.
 */
export type FromExportThread =
  | { kind: 'ready', error?: string }
  | { kind: 'answer', id: number, code: ExportResultCode, error?: string }

type Answer = Extract<FromExportThread, { kind: 'answer' }>

interface Thread {
  worker: Worker
  encoder: SpanEncoder
  /** Settles once the thread has its exporter, or failed to make it. */
  ready: Promise<void>
  /** Whether it has made its exporter; 'failed' once it is known it could not. */
  started: boolean | 'failed'
  /** Requests sent and not answered: what to call with the answer. */
  waiting: Map<number, (answer: Answer) => void>
}

/** The wait before starting a thread again after one could not start: doubled each time, up to the last. */
const RESTART_BACKOFF_MS = { first: 1000, last: 60_000 }
/** What shutdown allows beyond the exporter's own timeout before it ends the thread regardless. */
const SHUTDOWN_MARGIN_MS = 5000
/** OTEL_EXPORTER_OTLP_TIMEOUT's default. */
const DEFAULT_EXPORT_TIMEOUT_MS = 10_000

/** A SpanExporter whose batches are exported by another thread. */
export class ThreadSpanExporter implements SpanExporter {
  readonly #env: Record<string, string>
  readonly #shutdownLimitMs: number
  readonly #first: Thread
  #thread: Thread | null
  #nextId = 0
  #shutDown = false
  #backoffMs = 0
  #notBefore = 0

  /** `env`: the environment tracing was configured from, the thread's process.env (its exporter reads OTEL_*). */
  constructor (env: Readonly<Record<string, string | undefined>>) {
    this.#env = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined))
    const timeout = Number(otelVariable(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') ?? otelVariable(env, 'OTEL_EXPORTER_OTLP_TIMEOUT'))
    this.#shutdownLimitMs = (Number.isFinite(timeout) && timeout > 0 ? timeout : DEFAULT_EXPORT_TIMEOUT_MS) + SHUTDOWN_MARGIN_MS
    this.#first = this.#start()
    this.#thread = this.#first
  }

  /** Resolves once the first thread has made its exporter; rejects with the reason it could not. */
  async ready (): Promise<void> {
    const { worker } = this.#first
    // The start waits for it, and may have nothing else keeping the process alive yet.
    worker.ref()
    try {
      await this.#first.ready
    } finally {
      worker.unref()
    }
  }

  export (spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    const fail = (error: unknown): void => {
      resultCallback({ code: ExportResultCode.FAILED, error: error instanceof Error ? error : new Error(String(error)) })
    }
    if (this.#shutDown) return fail('the exporter is shut down')
    let thread = this.#thread
    if (thread === null) {
      if (Date.now() < this.#notBefore) return fail('the export thread could not start; it is tried again after a pause')
      thread = this.#thread = this.#start()
    }
    let batch: SpanBatch
    try {
      batch = thread.encoder.encode(spans)
    } catch (error) {
      // The encoder may have counted resources or scopes as sent: a new thread and encoder start from nothing.
      this.#end(thread)
      return fail(error)
    }
    this.#ask(thread, { id: this.#nextId++, kind: 'export', batch }, (answer) => {
      resultCallback(answer.error === undefined ? { code: answer.code } : { code: answer.code, error: new Error(answer.error) })
    })
  }

  async forceFlush (): Promise<void> {
    const thread = this.#thread
    if (thread !== null) await new Promise<void>((resolve) => { this.#ask(thread, { id: this.#nextId++, kind: 'flush' }, () => { resolve() }) })
  }

  /**
   * Shuts the thread's exporter down (it sends what it still holds, within its own timeout), then ends the thread;
   * a thread that has not answered within that timeout and a margin is ended regardless.
   */
  async shutdown (): Promise<void> {
    this.#shutDown = true
    const thread = this.#thread
    if (thread === null) return
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      new Promise<void>((resolve) => { this.#ask(thread, { id: this.#nextId++, kind: 'shutdown' }, () => { resolve() }) }),
      new Promise<void>((resolve) => { timer = setTimeout(resolve, this.#shutdownLimitMs) })
    ])
    clearTimeout(timer)
    // Ended before this returns: the stopping process waits for it.
    thread.worker.ref()
    await thread.worker.terminate()
  }

  #ask (thread: Thread, request: ToExportThread, answered: (answer: Answer) => void): void {
    // Owed an answer, the thread keeps the process alive (a graceful stop's last batch); idle, it does not.
    if (thread.waiting.size === 0) thread.worker.ref()
    thread.waiting.set(request.id, answered)
    try {
      thread.worker.postMessage(request)
    } catch (error) {
      // A value the structured clone cannot copy (an attribute changed after its span ended): this batch fails, and
      // the thread ends with it, since it never learnt the resources and scopes the batch would have sent it.
      this.#settle(thread, request.id)?.({ kind: 'answer', id: request.id, code: ExportResultCode.FAILED, error: String(error) })
      this.#end(thread)
    }
  }

  /** Takes the caller of request `id` off the thread's list; the thread lets the process go once it owes nothing. */
  #settle (thread: Thread, id: number): ((answer: Answer) => void) | undefined {
    const answered = thread.waiting.get(id)
    thread.waiting.delete(id)
    if (thread.waiting.size === 0) thread.worker.unref()
    return answered
  }

  /**
   * A thread that never made its exporter (nothing once it has): it is ended, and the next one waits, longer each time,
   * so a setting the exporter refuses costs little.
   */
  #couldNotStart (thread: Thread): void {
    if (thread.started !== false) return
    thread.started = 'failed'
    this.#backoffMs = Math.min(this.#backoffMs === 0 ? RESTART_BACKOFF_MS.first : this.#backoffMs * 2, RESTART_BACKOFF_MS.last)
    this.#notBefore = Date.now() + this.#backoffMs
    this.#end(thread)
  }

  /** Ends a thread that can no longer be trusted; the next batch starts another. */
  #end (thread: Thread): void {
    if (this.#thread === thread) this.#thread = null
    void thread.worker.terminate()
  }

  #start (): Thread {
    const worker = new Worker(workerModule(import.meta.url, './export-worker'), { env: this.#env, name: 'span-export' })
    let settle: { resolve: () => void, reject: (error: Error) => void } | undefined
    const ready = new Promise<void>((resolve, reject) => { settle = { resolve, reject } })
    // Awaited by ready() for the first thread only: a later one's failure is reported, not thrown.
    ready.catch(() => {})
    const thread: Thread = { worker, encoder: new SpanEncoder(), ready, started: false, waiting: new Map() }
    let failure = 'the export thread ended'
    worker.on('message', (message: FromExportThread) => {
      if (message.kind === 'ready') {
        if (message.error === undefined) {
          thread.started = true
          this.#backoffMs = 0
          settle?.resolve()
        } else {
          failure = `the export thread could not make its exporter: ${message.error}`
          settle?.reject(new Error(message.error))
          this.#couldNotStart(thread)
        }
        return
      }
      this.#settle(thread, message.id)?.(message)
    })
    worker.on('messageerror', (error) => {
      failure = `a message from the export thread could not be read: ${error.message}`
      this.#end(thread)
    })
    worker.on('error', (error) => {
      failure = `the export thread failed: ${error.message}`
      settle?.reject(error)
      // A thread that could not make its exporter also throws, and this may come before its 'ready' message: no batch
      // is sent to it meanwhile.
      this.#couldNotStart(thread)
    })
    worker.on('exit', () => {
      if (this.#thread === thread) this.#thread = null
      if (thread.started === false) {
        this.#couldNotStart(thread)
        settle?.reject(new Error(failure))
      }
      if (!this.#shutDown) diag.error(failure)
      for (const [id, answered] of thread.waiting) answered({ kind: 'answer', id, code: ExportResultCode.FAILED, error: failure })
      thread.waiting.clear()
    })
    // After the listeners: adding the 'message' one references the thread again.
    worker.unref()
    return thread
  }
}
