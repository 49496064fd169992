/**
 * OTLP export from a thread of its own (docs/adr/0054-spans-exported-from-a-thread-of-their-own.md). The SDK's batch
 * processor hands each batch here; it crosses to the thread as plain values (./span-records.ts), and there the
 * exporter the environment names (./exporter.ts), behind the scrubbing one (./redact.ts), serializes and sends it. The
 * event loop that answers requests does neither: a batch of 512 spans took about 2 ms to serialize, and an HTTP
 * client in the same isolate as the server made the server's own write path slower for every request (its stream
 * and message functions, shared by both, saw two kinds of objects where they had seen one).
 *
 * The thread is started with the exporter and unreferenced (it never keeps the process alive); one that fails or
 * exits fails the batches it held, and the next batch starts another.
 */
import { diag } from '@opentelemetry/api'
import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace'
import { Worker } from 'node:worker_threads'
import { workerModule } from '../worker-module.js'
import { SpanEncoder, type SpanBatch } from './span-records.js'

/** What the export thread is asked: a batch to export, a flush, or to shut its exporter down and end. */
export type ToExportThread =
  | { id: number, kind: 'export', batch: SpanBatch }
  | { id: number, kind: 'flush' | 'shutdown' }

/** Its answer to a request, by id: the export's result code, and the error's message when it failed. */
export interface FromExportThread { id: number, code: ExportResultCode, error?: string }

interface Thread {
  worker: Worker
  encoder: SpanEncoder
  /** Requests sent and not answered: what to call with the answer. */
  waiting: Map<number, (answer: FromExportThread) => void>
}

/** A SpanExporter whose batches are exported by another thread. */
export class ThreadSpanExporter implements SpanExporter {
  readonly #env: Record<string, string>
  #thread: Thread | null = null
  #nextId = 0
  #shutDown = false

  /** `env`: the environment tracing was configured from, the thread's process.env (its exporter reads OTEL_*). */
  constructor (env: Readonly<Record<string, string | undefined>>) {
    this.#env = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined))
    this.#thread = this.#start()
  }

  export (spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.#shutDown) {
      resultCallback({ code: ExportResultCode.FAILED, error: new Error('the exporter is shut down') })
      return
    }
    const thread = this.#thread ?? (this.#thread = this.#start())
    let batch: SpanBatch
    try {
      batch = thread.encoder.encode(spans)
    } catch (error) {
      resultCallback({ code: ExportResultCode.FAILED, error: error instanceof Error ? error : new Error(String(error)) })
      return
    }
    this.#ask(thread, { id: this.#nextId++, kind: 'export', batch }, (answer) => {
      resultCallback(answer.error === undefined ? { code: answer.code } : { code: answer.code, error: new Error(answer.error) })
    })
  }

  async forceFlush (): Promise<void> {
    const thread = this.#thread
    if (thread !== null) await new Promise<void>((resolve) => { this.#ask(thread, { id: this.#nextId++, kind: 'flush' }, () => { resolve() }) })
  }

  /** Shuts the thread's exporter down (it sends what it still holds, within its own timeout), then ends the thread. */
  async shutdown (): Promise<void> {
    this.#shutDown = true
    const thread = this.#thread
    if (thread === null) return
    thread.worker.ref()
    await new Promise<void>((resolve) => { this.#ask(thread, { id: this.#nextId++, kind: 'shutdown' }, () => { resolve() }) })
    await thread.worker.terminate()
  }

  #ask (thread: Thread, request: ToExportThread, answered: (answer: FromExportThread) => void): void {
    thread.waiting.set(request.id, answered)
    try {
      thread.worker.postMessage(request)
    } catch (error) {
      // A value the structured clone cannot copy (an attribute the SDK let through): this batch fails, not the thread.
      thread.waiting.delete(request.id)
      answered({ id: request.id, code: ExportResultCode.FAILED, error: String(error) })
    }
  }

  #start (): Thread {
    const worker = new Worker(workerModule(import.meta.url, './export-worker'), { env: this.#env })
    const thread: Thread = { worker, encoder: new SpanEncoder(), waiting: new Map() }
    worker.unref()
    worker.on('message', (answer: FromExportThread) => {
      const answered = thread.waiting.get(answer.id)
      thread.waiting.delete(answer.id)
      answered?.(answer)
    })
    let failure = 'the export thread ended'
    worker.on('error', (error) => {
      failure = `the export thread failed: ${error.message}`
      diag.error(failure)
    })
    worker.on('exit', () => {
      if (this.#thread === thread) this.#thread = null
      for (const [id, answered] of thread.waiting) answered({ id, code: ExportResultCode.FAILED, error: failure })
      thread.waiting.clear()
    })
    return thread
  }
}
