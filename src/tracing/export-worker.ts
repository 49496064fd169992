/**
 * The export thread (./export-thread.ts): the OTLP exporter the environment names (./exporter.ts; the thread's
 * process.env is the environment tracing was configured from), behind the scrubbing exporter (./redact.ts),
 * exporting the batches the application thread sends, one answer per request. Its diagnostics go where the SDK's go
 * in the application thread: to the console when OTEL_LOG_LEVEL is set, as NodeSDK arranges there.
 */
import { diag, DiagConsoleLogger } from '@opentelemetry/api'
import { diagLogLevelFromString, ExportResultCode } from '@opentelemetry/core'
import type { SpanExporter } from '@opentelemetry/sdk-trace'
import { parentPort } from 'node:worker_threads'
import { otelVariable } from './env.js'
import type { FromExportThread, ToExportThread } from './export-thread.js'
import { otlpExporter } from './exporter.js'
import { ScrubbingSpanExporter } from './redact.js'
import { SpanDecoder } from './span-records.js'

const port = parentPort
if (port === null) throw new Error('export-worker runs as a worker thread')

const logLevel = otelVariable(process.env, 'OTEL_LOG_LEVEL')
if (logLevel !== undefined) diag.setLogger(new DiagConsoleLogger(), { logLevel: diagLogLevelFromString(logLevel) })

const message = (error: unknown): string => error instanceof Error ? error.message : String(error)

// Requests that arrive while the exporter loads wait in the port: its listener is added once the exporter exists. A
// setting the exporter refuses (an endpoint that is no URL) is said first, and the thread ends.
let made: SpanExporter
try {
  made = await otlpExporter(process.env)
} catch (error) {
  port.postMessage({ kind: 'ready', error: message(error) } satisfies FromExportThread)
  port.close()
  throw error
}
const exporter = new ScrubbingSpanExporter(made)
const decoder = new SpanDecoder()
const answer = (id: number, code: ExportResultCode, error?: string): void => {
  port.postMessage((error === undefined ? { kind: 'answer', id, code } : { kind: 'answer', id, code, error }) satisfies FromExportThread)
}
const failed = (id: number, error: unknown): void => { answer(id, ExportResultCode.FAILED, message(error)) }
port.postMessage({ kind: 'ready' } satisfies FromExportThread)
// A request that could not be read has no id to answer: the thread ends, and the other side fails what it held.
port.on('messageerror', () => { process.exit(1) })

port.on('message', (request: ToExportThread) => {
  const { id } = request
  switch (request.kind) {
    case 'export': {
      let spans: ReturnType<SpanDecoder['decode']>
      try {
        spans = decoder.decode(request.batch)
      } catch (error) {
        // The two sides no longer agree on what was sent: this thread ends, and the next starts from nothing.
        failed(id, error)
        setImmediate(() => { process.exit(1) })
        return
      }
      try {
        exporter.export(spans, (result) => { answer(id, result.code, result.error?.message) })
      } catch (error) {
        failed(id, error)
      }
      return
    }
    case 'flush':
      exporter.forceFlush().then(() => { answer(id, ExportResultCode.SUCCESS) }, (error: unknown) => { failed(id, error) })
      return
    case 'shutdown':
      // Answered once the exporter has sent what it held (within its own timeout); the application thread then ends this one.
      exporter.shutdown().then(() => { answer(id, ExportResultCode.SUCCESS) }, (error: unknown) => { failed(id, error) })
  }
})
