/**
 * The service's own spans (docs/observability.md, "Tracing"), written against the OpenTelemetry API alone. Whether
 * there are any is decided once, at start: src/tracing/start.ts calls enableSpans before the app is built. In a
 * process that does not trace, tracingOn() stays false and every caller asks it before doing anything else, so the
 * request path makes no span, no closure and no context switch, and the app registers no hook for tracing.
 *
 * In a process that traces, whether a request is traced is decided once, as it arrives (startServerSpan): a request
 * the sampler leaves out gets no span object and no context of its own, so everything below it (the gate, the
 * handler, the store calls, the pg and ioredis instrumentations, which need a parent span) finds no active span and
 * makes none (docs/adr/0044-tracing-costs-what-it-samples.md).
 */
import {
  context, isSpanContextValid, propagation, ROOT_CONTEXT, SamplingDecision, SpanKind, SpanStatusCode, trace,
  type Attributes, type Context, type Link, type Sampler, type Span, type Tracer
} from '@opentelemetry/api'
import type { IncomingHttpHeaders } from 'node:http'
import { loggedUrl, redactSecrets } from '../redact.js'

/** How requests are sampled: the sampler the SDK uses too, and the ids that let a decision and its span agree. */
export interface Sampling {
  sampler: Sampler
  /**
   * A new trace id for a request that brings no caller's context, or null when the sampler leaves such a request out:
   * the sampler's own rule, applied without asking it (RequestTraceIds.root). Absent: the sampler is asked.
   */
  root?: () => string | null
  traceIds: {
    /** A new trace id, for a request that brings none. */
    fresh: () => string
    /** Hands `traceId` to the SDK as the next span's trace id (undefined takes it back). */
    next: (traceId: string | undefined) => void
  }
}

let tracer: Tracer | null = null
let sampling: Sampling | null = null
/**
 * The headers that carry a caller's context to the propagators this project knows (W3C trace context and baggage, B3
 * in either format, each of which reads both). A request with none of them brings none; which of them the configured
 * propagators read does not matter. Other propagators read other headers: then every request is extracted.
 */
const CALLER_HEADERS = [
  'traceparent', 'tracestate', 'baggage', 'b3', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-sampled', 'x-b3-flags', 'x-b3-parentspanid'
]
/** Whether the configured propagators read only CALLER_HEADERS (decided as spans are enabled, after the SDK set them). */
let knownPropagators = false
let shutdown: (() => Promise<void>) | null = null
/** Each traced request's server span (startServerSpan), for the attributes the gate learns later. */
const serverSpans = new WeakMap<object, Span>()
/** Traced requests whose failure is already on their server span (recordFailure), with its message. */
const failedRequests = new WeakSet<object>()
const NO_ATTRIBUTES: Attributes = Object.freeze({})
const NO_LINKS: Link[] = []

/**
 * Turns the service's own spans on, made by `use`, requests sampled as `requests` says; `stop` flushes and ends
 * tracing (stopTracing). Called once.
 */
export function enableSpans (use: Tracer, requests: Sampling, stop: () => Promise<void>): void {
  tracer = use
  sampling = requests
  shutdown = stop
  knownPropagators = propagation.fields().every((field) => CALLER_HEADERS.includes(field.toLowerCase()))
}

/** Whether a request brings no caller's context for the configured propagators to read: none of their headers. */
function bringsNoContext (headers: IncomingHttpHeaders): boolean {
  if (!knownPropagators) return false
  for (const name of CALLER_HEADERS) if (headers[name] !== undefined) return false
  return true
}

/** Whether this process traces (decided at start, before the app is built). */
export function tracingOn (): boolean {
  return tracer !== null
}

/** What startServerSpan reads of a request (a FastifyRequest). */
export interface ArrivingRequest {
  id: string
  method: string
  url: string
  headers: IncomingHttpHeaders
  routeOptions: { url?: string | undefined, schema?: { operationId?: string | undefined } | undefined }
}

/**
 * Decides whether a request is traced, once, as it arrives: the caller's context (W3C traceparent, as
 * OTEL_PROPAGATORS says) and the sampler, as the SDK would ask it. A request left out gets nothing: null, no span,
 * no context. A traced one gets its server span, named after the method and the route (the method alone when no
 * route matched), with the attributes known now; the context to run the rest of the request in is returned.
 */
export function startServerSpan (request: ArrivingRequest): Context | null {
  if (tracer === null || sampling === null) return null
  let parent = ROOT_CONTEXT
  let root = true
  let traceId: string
  if (sampling.root !== undefined && bringsNoContext(request.headers)) {
    // Most requests: no caller, and the sampler's rule for a new trace decides without an id, an extraction or a
    // question.
    const drawn = sampling.root()
    if (drawn === null) return null
    traceId = drawn
  } else {
    parent = propagation.extract(ROOT_CONTEXT, request.headers)
    const caller = trace.getSpanContext(parent)
    root = caller === undefined || !isSpanContextValid(caller)
    traceId = caller === undefined || root ? sampling.traceIds.fresh() : caller.traceId
    // The samplers OTEL_TRACES_SAMPLER names (./sampling.ts) read the parent, the trace id and nothing else: the question
    // is asked with the method for a name and no attributes, and the route is looked up only for a request it keeps.
    const decision = sampling.sampler.shouldSample(parent, traceId, request.method, SpanKind.SERVER, NO_ATTRIBUTES, NO_LINKS).decision
    if (decision === SamplingDecision.NOT_RECORD) return null
  }
  // Fastify builds routeOptions anew on each read: read once.
  const { url: route, schema } = request.routeOptions
  const name = route === undefined ? request.method : `${request.method} ${route}`
  const operationId = schema?.operationId
  const mark = request.url.search(/[?#]/)
  const attributes: Attributes = {
    'http.request.method': request.method,
    // The path without the query, as the access log writes it: a key a client put in it is redacted.
    'url.path': loggedUrl(mark === -1 ? request.url : request.url.slice(0, mark)),
    'petstore.request.id': request.id
  }
  if (route !== undefined) attributes['http.route'] = route
  if (operationId !== undefined) attributes['petstore.operation.id'] = operationId
  // The SDK asks the sampler again (the same answer: the same parent and, through `next`, the same trace id).
  if (root) sampling.traceIds.next(traceId)
  let span: Span
  try {
    span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent)
  } finally {
    if (root) sampling.traceIds.next(undefined)
  }
  serverSpans.set(request, span)
  return trace.setSpan(parent, span)
}

/**
 * Ends a request's server span, when it is traced, as its answer is handed to Node: the status code, and the error
 * status for a 5xx (only: a 4xx is the client's, OpenTelemetry's HTTP conventions for server spans).
 */
export function endServerSpan (request: object, statusCode: number): void {
  const span = serverSpans.get(request)
  if (span === undefined) return
  serverSpans.delete(request)
  span.setAttribute('http.response.status_code', statusCode)
  if (statusCode >= 500 && !failedRequests.has(request)) span.setStatus({ code: SpanStatusCode.ERROR })
  span.end()
}

/** The server span of a request, when it is traced. */
export function serverSpanOf (request: object): Span | undefined {
  return serverSpans.get(request)
}

/**
 * A span of ours under the active one (or the span active in `under`); null when tracing is off, or when nothing is
 * traced there: work no request started (timers, polls) makes no traces of its own, and a request the sampler left out
 * gets none.
 */
export function startSpan (name: string, kind: SpanKind, attributes?: Attributes, links?: Link[], under?: Context): Span | null {
  if (tracer === null) return null
  const parent = under ?? context.active()
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
 * Ends a span; as failed when `error` is given, the status naming the error.
 */
export function endSpan (span: Span, error?: unknown): void {
  if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: described(error) })
  span.end()
}

/** An error as a span's status names it: its name and message, secrets redacted (a message may quote a client). */
function described (error: unknown): string {
  return redactSecrets(error instanceof Error ? `${error.name}: ${error.message}` : String(error))
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

/**
 * Records an unexpected failure (answered 5xx) on the request's server span, when the request is traced: the
 * exception event, and the error status naming it.
 */
export function recordFailure (request: object, error: unknown): void {
  if (tracer === null) return
  const span = serverSpans.get(request)
  if (span === undefined) return
  recordException(span, error)
  span.setStatus({ code: SpanStatusCode.ERROR, message: described(error) })
  failedRequests.add(request)
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
