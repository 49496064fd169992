/**
 * The export thread (./export-thread.ts): the OTLP exporter the environment names (./exporter.ts; the thread's
 * process.env is the environment tracing was configured from), behind the scrubbing exporter (./redact.ts),
 * exporting the batches the application thread sends, one answer per request. Its diagnostics go where the SDK's go
 * in the application thread: to the console when OTEL_LOG_LEVEL is set, as NodeSDK arranges there.
 */
import { diag, DiagConsoleLogger } from '@opentelemetry/api'
import { diagLogLevelFromString, ExportResultCode } from '@opentelemetry/core'
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

// Requests that arrive while the exporter loads wait in the port: its listener is added once the exporter exists.
const exporter = new ScrubbingSpanExporter(await otlpExporter(process.env))
const decoder = new SpanDecoder()
const answer = (message: FromExportThread): void => { port.postMessage(message) }
const failed = (id: number, error: unknown): void => {
  answer({ id, code: ExportResultCode.FAILED, error: error instanceof Error ? error.message : String(error) })
}

port.on('message', (request: ToExportThread) => {
  const { id } = request
  switch (request.kind) {
    case 'export':
      try {
        exporter.export(decoder.decode(request.batch), (result) => {
          answer(result.error === undefined ? { id, code: result.code } : { id, code: result.code, error: result.error.message })
        })
      } catch (error) {
        failed(id, error)
      }
      return
    case 'flush':
      exporter.forceFlush().then(() => { answer({ id, code: ExportResultCode.SUCCESS }) }, (error: unknown) => { failed(id, error) })
      return
    case 'shutdown':
      // Answered once the exporter has sent what it held (within its own timeout); the application thread then ends this one.
      exporter.shutdown().then(() => { answer({ id, code: ExportResultCode.SUCCESS }) }, (error: unknown) => { failed(id, error) })
  }
})
