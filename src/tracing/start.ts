/**
 * OpenTelemetry tracing for `petstore serve` (docs/observability.md, "Tracing";
 * docs/adr/0022-tracing-opentelemetry-off-unless-configured.md). Loaded by
 * bin/petstore.js only when the environment asks for traces (src/tracing/env.ts), and before any module of the app:
 * the pg and ioredis instrumentations patch those packages as they load, and this project imports them from ES
 * modules, which Node's require hooks never see. So the loader hook of import-in-the-middle is registered first (in
 * the application thread with module.registerHooks where Node allows, else on the loader thread), then the SDK
 * starts, and only then does bin/petstore.js import the CLI (and with it pg and ioredis).
 *
 * The SDK reads the standard variables itself: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT,
 * OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and _ARG, OTEL_PROPAGATORS, OTEL_BSP_*. The exporter
 * is chosen as the SDK would choose it (./exporter.ts) and every span passes through the scrubbing exporter
 * (./redact.ts) on its way out; OTLP is sent from a thread of its own (./export-thread.ts). Traces only: the metrics
 * stay Prometheus's (/metrics) and the logs stay on stdout.
 */
import { trace } from '@opentelemetry/api'
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources'
import { NodeSDK } from '@opentelemetry/sdk-node'
import { ConsoleSpanExporter, type SpanExporter } from '@opentelemetry/sdk-trace'
import { createAddHookMessageChannel } from 'import-in-the-middle'
import { register as registerSyncHooks, supportsSyncHooks } from 'import-in-the-middle/register-hooks.mjs'
import { register } from 'node:module'
import { ConfigError } from '../errors.js'
import { VERSION } from '../version.js'
import { ThreadSpanExporter } from './export-thread.js'
import { consoleExporterRequested } from './exporter.js'
import { ASYNC_HOOKS_WARNING, contextOnAsyncHooks } from './node-context.js'
import { ScrubbingSpanExporter } from './redact.js'
import { RequestTraceIds, samplingFromEnv } from './sampling.js'
import { enableSpans } from './spans.js'

/** The packages whose ES-module imports are intercepted, for their instrumentations: no other module is touched. */
const HOOKED = ['pg', 'ioredis']

/**
 * Registers import-in-the-middle's loader hook before the hooked packages load. Returns what to wait for once the
 * instrumentations exist: on the loader thread (Node versions whose module.registerHooks cannot run it), the loader
 * learns the hooked modules by message and must have acknowledged them before the app imports anything.
 */
function hookModules (): () => Promise<void> {
  if (supportsSyncHooks()) {
    registerSyncHooks({ include: HOOKED })
    return async () => {}
  }
  const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel()
  register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions)
  return waitForAllMessagesAcknowledged
}

/** Starts tracing: the loader hook, the instrumentations, the SDK, and the service's own spans (src/tracing/spans.ts). */
export async function startTracing (env: Readonly<Record<string, string | undefined>>): Promise<void> {
  const acknowledged = hookModules()
  // OTLP from a thread of its own (./export-thread.ts), which scrubs, serializes and sends each batch; the console
  // exporter, a tool for a developer's terminal, writes from this one.
  let exporter: SpanExporter
  // Whether the thread could make its exporter, waited for once the SDK has started (the thread loads meanwhile).
  let exporterReady = Promise.resolve()
  if (consoleExporterRequested(env)) exporter = new ScrubbingSpanExporter(new ConsoleSpanExporter())
  else {
    const thread = new ThreadSpanExporter(env)
    exporterReady = thread.ready()
    exporter = thread
  }
  // The sampler OTEL_TRACES_SAMPLER names, asked by the server span's hook (src/tracing/server.ts) and by the SDK.
  const { sampler, root } = samplingFromEnv(env)
  const traceIds = new RequestTraceIds()
  const sampling = { sampler, traceIds, root: () => traceIds.root(root) }
  const sdk = new NodeSDK({
    // Defaults below what the environment says: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': 'petstore-inventory', 'service.version': VERSION })),
    // Batched as OTEL_BSP_* say, like the exporter the SDK would have made; every span is scrubbed on its way out.
    traceExporter: exporter,
    sampler: sampling.sampler,
    idGenerator: sampling.traceIds,
    instrumentations: [
      // Spans only inside a traced request: the webhook dispatcher's polls and the purge timer make no traces.
      new PgInstrumentation({ requireParentSpan: true }),
      // The command name only: a Redis key holds a key id or a client's address, and its arguments are counters.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command })
    ],
    metricReaders: [],
    logRecordProcessors: []
  })
  sdk.start()
  // A setting the exporter refuses stops the start, as it did when the exporter was made on this thread: a
  // configuration error, said as the CLI says one (bin/petstore.js).
  await exporterReady.catch((error: unknown) => {
    throw new ConfigError(`the OTLP exporter refuses its settings (OTEL_EXPORTER_OTLP_*): ${error instanceof Error ? error.message : String(error)}`)
  })
  // Said once, at start, on the operator's stderr: the remedy is a flag of the process, which the service cannot set.
  if (contextOnAsyncHooks()) process.emitWarning(ASYNC_HOOKS_WARNING, { code: 'PETSTORE_TRACING_ASYNC_HOOKS' })
  await acknowledged()
  enableSpans(trace.getTracer('petstore-inventory', VERSION), sampling, async () => {
    try {
      await sdk.shutdown()
    } finally {
      // The SDK shuts its exporter down only after a final flush that succeeded: the thread ends either way.
      await exporter.shutdown()
    }
  })
}
