/**
 * The last step before spans leave the process: every span passes through here on its way to the exporter, whoever
 * made it (our own code, the pg and ioredis instrumentations). Two rules:
 *
 * - No secret leaves. The span's name, its attributes, its status message, its events (names and attributes: an
 *   exception's message and stack trace) and its links' attributes go through the filter the logs go through
 *   (src/redact.ts: keys, webhook secrets and signatures, credentials), decoding percent-escapes where that shows one;
 *   attributes that hold a URL lose their query values, as the access log's `url` does; attributes that hold a
 *   credential header (`http.request.header.authorization`, ...) lose their value whole. The sources try not to put a
 *   secret in a span at all (messages do not quote what a client sent); this catches whatever still does.
 * - A 4xx is not a failure of the service: a server span answered below 500 leaves with its status unset and without
 *   exception events (OpenTelemetry's HTTP conventions for server spans), whatever the instrumentation recorded.
 *
 * The resource (the operator's OTEL_RESOURCE_ATTRIBUTES) is left as it is. This runs in the export thread
 * (./export-thread.ts; the console exporter's on the exporter's schedule), never on the request path, and not at all
 * in a process that does not trace.
 */
import { SpanKind, SpanStatusCode, type Attributes, type AttributeValue, type Link, type SpanStatus } from '@opentelemetry/api'
import type { ReadableSpan, SpanExporter, TimedEvent } from '@opentelemetry/sdk-trace'
import { decoded, loggedUrl, mentionsSecret, redactSecrets } from '../redact.js'

/** Attributes of the HTTP conventions that hold a URL or a path, maybe with a query: shown as the access log shows one. */
const URL_ATTRIBUTES: ReadonlySet<string> = new Set(['url.full', 'url.path', 'http.url', 'http.target'])
/** Headers an instrumentation may be configured to capture (`http.request.header.<name>`) whose value is a credential. */
const CREDENTIAL_HEADER = /^http\.(?:request|response)\.header\.(?:authorization|proxy-authorization|cookie|set-cookie|x-api-key|webhook-signature)$/

/** Text with its secrets redacted, also one that percent-escapes hide (`%70sk_live_...`), which is then shown decoded. */
export function scrubText (text: string): string {
  if (text.includes('%')) {
    const plain = decoded(text)
    if (plain !== text && mentionsSecret(plain)) return redactSecrets(plain)
  }
  return redactSecrets(text)
}

function scrubValue (name: string, value: AttributeValue | undefined): AttributeValue | undefined {
  if (CREDENTIAL_HEADER.test(name)) return '[redacted]'
  if (typeof value === 'string') {
    // A URL's query values go whatever they are; without a query or an escape, the text filter is all it needs.
    if (URL_ATTRIBUTES.has(name) && (value.includes('?') || value.includes('%'))) return scrubText(loggedUrl(value))
    if (name === 'url.query') return scrubText(loggedUrl(`?${value}`).slice(1))
    return scrubText(value)
  }
  return scrubNested(value) as AttributeValue | undefined
}

/**
 * A value inside an attribute: the SDK also takes arrays of arrays and maps (OpenTelemetry's AnyValue), whose strings
 * are scrubbed at any depth. The same value when nothing in it changes; bytes and other objects are left as they are.
 */
function scrubNested (value: unknown): unknown {
  if (typeof value === 'string') return scrubText(value)
  if (Array.isArray(value)) {
    const scrubbed = value.map(scrubNested)
    return scrubbed.every((item, i) => item === value[i]) ? value : scrubbed
  }
  if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    let copy: Record<string, unknown> | null = null
    for (const [key, item] of Object.entries(value)) {
      const scrubbed = scrubNested(item)
      if (scrubbed === item) continue
      copy ??= { ...value }
      copy[key] = scrubbed
    }
    return copy ?? value
  }
  return value
}

/** The attributes with every value scrubbed; the same object when none changed (most spans hold nothing to scrub). */
export function scrubAttributes (attributes: Attributes): Attributes {
  let copy: Attributes | null = null
  for (const name in attributes) {
    const value = attributes[name]
    const scrubbed = scrubValue(name, value)
    if (scrubbed === value) continue
    copy ??= { ...attributes }
    copy[name] = scrubbed
  }
  return copy ?? attributes
}

/** A server span answered with a status below 500: the client's error (or no error), not the service's. */
function answeredBelow500 (span: ReadableSpan): boolean {
  const status = span.attributes['http.response.status_code']
  return span.kind === SpanKind.SERVER && typeof status === 'number' && status < 500
}

// Each of these returns what it was given when nothing in it changes, so that a span with nothing to scrub (most of
// them) costs the checks and no copy.

function scrubStatus (status: SpanStatus, clientError: boolean): SpanStatus {
  if (clientError) return status.code === SpanStatusCode.UNSET && status.message === undefined ? status : { code: SpanStatusCode.UNSET }
  if (status.message === undefined) return status
  const message = scrubText(status.message)
  return message === status.message ? status : { ...status, message }
}

function scrubEvent (event: TimedEvent): TimedEvent {
  const name = scrubText(event.name)
  const attributes = event.attributes === undefined ? undefined : scrubAttributes(event.attributes)
  if (name === event.name && attributes === event.attributes) return event
  return { ...event, name, ...(attributes === undefined ? {} : { attributes }) }
}

function scrubEvents (events: TimedEvent[], clientError: boolean): TimedEvent[] {
  if (events.length === 0) return events
  const kept = clientError && events.some((event) => event.name === 'exception') ? events.filter((event) => event.name !== 'exception') : events
  const scrubbed = kept.map(scrubEvent)
  return kept === events && scrubbed.every((event, i) => event === events[i]) ? events : scrubbed
}

function scrubLink (link: Link): Link {
  if (link.attributes === undefined) return link
  const attributes = scrubAttributes(link.attributes)
  return attributes === link.attributes ? link : { ...link, attributes }
}

function scrubLinks (links: Link[]): Link[] {
  if (links.length === 0) return links
  const scrubbed = links.map(scrubLink)
  return scrubbed.every((link, i) => link === links[i]) ? links : scrubbed
}

/**
 * The span as it may leave the process: the span itself when nothing in it is to be scrubbed, else a copy (the span
 * the SDK made is left as it is).
 */
export function scrubSpan (span: ReadableSpan): ReadableSpan {
  const clientError = answeredBelow500(span)
  const name = scrubText(span.name)
  const status = scrubStatus(span.status, clientError)
  const attributes = scrubAttributes(span.attributes)
  const links = scrubLinks(span.links)
  const events = scrubEvents(span.events, clientError)
  if (name === span.name && status === span.status && attributes === span.attributes && links === span.links && events === span.events) return span
  return {
    name,
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    duration: span.duration,
    ended: span.ended,
    status,
    attributes,
    links,
    events,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount
  }
}

/** An exporter that hands on every span scrubbed (scrubSpan): what the collector, or the console, receives. */
export class ScrubbingSpanExporter implements SpanExporter {
  readonly #exporter: SpanExporter

  constructor (exporter: SpanExporter) {
    this.#exporter = exporter
  }

  export (spans: ReadableSpan[], resultCallback: Parameters<SpanExporter['export']>[1]): void {
    this.#exporter.export(spans.map(scrubSpan), resultCallback)
  }

  shutdown (): Promise<void> {
    return this.#exporter.shutdown()
  }

  async forceFlush (): Promise<void> {
    await this.#exporter.forceFlush?.()
  }
}
