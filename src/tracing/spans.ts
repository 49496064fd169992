/**
 * The service's own spans (docs/observability.md, "Tracing"), written against the OpenTelemetry API alone. Whether
 * there are any is decided once, at start: src/tracing/start.ts calls enableSpans before the app is built. In a
 * process that does not trace, tracingOn() stays false and every caller asks it before doing anything else, so the
 * request path makes no span, no closure and no context switch, and the app registers no hook for tracing.
 */
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span, type Tracer } from '@opentelemetry/api'
import { redactSecrets } from '../redact.js'

let tracer: Tracer | null = null
let shutdown: (() => Promise<void>) | null = null
/** Each traced request's server span (made by @fastify/otel), for the attributes the gate learns later. */
const serverSpans = new WeakMap<object, Span>()

/** Turns the service's own spans on, made by `use`; `stop` flushes and ends tracing (stopTracing). Called once. */
export function enableSpans (use: Tracer, stop: () => Promise<void>): void {
  tracer = use
  shutdown = stop
}

/** Whether this process traces (decided at start, before the app is built). */
export function tracingOn (): boolean {
  return tracer !== null
}

/** Notes the server span of a request, for serverSpanOf. */
export function noteServerSpan (request: object, span: Span): void {
  serverSpans.set(request, span)
}

/** The server span of a request, when it is traced. */
export function serverSpanOf (request: object): Span | undefined {
  return serverSpans.get(request)
}

/**
 * A span of ours under the active one; null when tracing is off, or when nothing is traced here: work no request
 * started (timers, polls) makes no traces of its own, and a request the sampler left out gets none.
 */
export function startSpan (name: string, kind: SpanKind, attributes?: Attributes, links?: Link[]): Span | null {
  if (tracer === null) return null
  const parent = context.active()
  const parentSpan = trace.getSpan(parent)
  if (parentSpan === undefined) return null
  // A request the sampler left out records nothing: spans under it would be dropped, and making them costs. (A span
  // with links, the group commit's, may serve requests that were sampled: it is left to the sampler.)
  if (!parentSpan.isRecording() && links === undefined) return null
  return tracer.startSpan(name, { kind, ...(attributes === undefined ? {} : { attributes }), ...(links === undefined ? {} : { links }) }, parent)
}

/** Runs `work` with `span` active: what it starts (a store call, a Redis command, a pg query) is the span's child. */
export function within<T> (span: Span, work: () => T): T {
  return context.with(trace.setSpan(context.active(), span), work)
}

/**
 * Ends a span; as failed when `error` is given. The status names the error (its name and message, secrets redacted:
 * a message may quote what a client sent).
 */
export function endSpan (span: Span, error?: unknown): void {
  if (error !== undefined) {
    const described = error instanceof Error ? `${error.name}: ${error.message}` : String(error)
    span.setStatus({ code: SpanStatusCode.ERROR, message: redactSecrets(described) })
  }
  span.end()
}

/**
 * Records `error` on `span` as an exception event (OpenTelemetry's `exception.type`, `.message`, `.stacktrace`), its
 * message and stack with secrets redacted. Only for failures of the service: an error the client caused (a 4xx) is
 * an answer, not an exception (docs/observability.md, "Errors in traces").
 */
function recordException (span: Span, error: unknown): void {
  if (!(error instanceof Error)) {
    span.recordException(redactSecrets(String(error)))
    return
  }
  const code = (error as { code?: unknown }).code
  span.recordException({
    name: error.name,
    message: redactSecrets(error.message),
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
    ...(error.stack === undefined ? {} : { stack: redactSecrets(error.stack) })
  })
}

/** Ends a span as failed by a failure of the service: the error status and the exception event. */
export function failSpan (span: Span, error: unknown): void {
  recordException(span, error)
  endSpan(span, error)
}

/** Records an unexpected failure (answered 5xx) on the request's server span, when the request is traced. */
export function recordFailure (request: object, error: unknown): void {
  if (tracer === null) return
  const span = serverSpans.get(request)
  if (span !== undefined) recordException(span, error)
}

/**
 * A span of ours under `parent` (a request's server span, say), whatever context is active; null when the parent is
 * not recorded (a request the sampler left out).
 */
export function startChildSpan (parent: Span, name: string, kind: SpanKind, attributes?: Attributes): Span | null {
  if (tracer === null || !parent.isRecording()) return null
  return tracer.startSpan(name, { kind, ...(attributes === undefined ? {} : { attributes }) }, trace.setSpan(context.active(), parent))
}

/** The active context, to link to from a span that later serves this work together with others; undefined when not tracing. */
export function activeContext (): Context | undefined {
  return tracer === null ? undefined : context.active()
}

/** A link to the span active in `from`, when there is one. */
export function linkTo (from: Context | undefined): Link | null {
  const span = from === undefined ? undefined : trace.getSpan(from)
  return span === undefined ? null : { context: span.spanContext() }
}

/**
 * Flushes the spans not yet exported and ends tracing, at a graceful stop; nothing to do when this process does not
 * trace. The SDK bounds the wait for a collector that does not answer (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s by default).
 */
export async function stopTracing (): Promise<void> {
  const stop = shutdown
  shutdown = null
  await stop?.()
}

export { SpanKind }
