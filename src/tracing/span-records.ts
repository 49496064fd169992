/**
 * Finished spans as they cross to the export thread (./export-thread.ts), and back into the ReadableSpans the SDK's
 * exporters read there. A batch is one flat array of plain values (strings, numbers, the attribute objects), which the
 * structured clone copies in about a third of the time it takes for the spans' own objects; each span's resource and
 * instrumentation scope, the same for thousands of spans, cross once as entries of a table that both sides keep.
 *
 * Only what a ReadableSpan holds crosses: the name, kind, ids, times, status, attributes, links, events, dropped counts,
 * resource and scope (what the OTLP serializers and the scrubbing exporter read).
 */
import type { Attributes, HrTime, Link, SpanContext, SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { TraceState, type InstrumentationScope } from '@opentelemetry/core'
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace'

/** A batch: the table entries first seen in it, and its spans, SPAN_FIELDS values each. */
export interface SpanBatch {
  /** Resources: [index, attributes, schemaUrl or '']; scopes: [index, name, version or '', schemaUrl or '']. */
  resources: unknown[]
  scopes: unknown[]
  spans: unknown[]
}

/** Values per span in SpanBatch.spans, in the order encode writes them. */
const SPAN_FIELDS = 26

type LinkRecord = [traceId: string, spanId: string, traceFlags: number, isRemote: boolean, traceState: string, attributes: Attributes, dropped: number]
type EventRecord = [name: string, seconds: number, nanos: number, attributes: Attributes | null, dropped: number]

/** The sending side: numbers the resources and scopes it has sent (start afresh with a new receiver). */
export class SpanEncoder {
  readonly #resources = new Map<Resource, number>()
  readonly #scopes = new Map<string, number>()

  encode (spans: readonly ReadableSpan[]): SpanBatch {
    const batch: SpanBatch = { resources: [], scopes: [], spans: [] }
    const out = batch.spans
    for (const span of spans) {
      const context = span.spanContext()
      const parent = span.parentSpanContext
      const status = span.status
      out.push(
        span.name, span.kind, context.traceId, context.spanId, context.traceFlags, context.traceState?.serialize() ?? '',
        parent?.traceId ?? '', parent?.spanId ?? '', parent?.traceFlags ?? 0, parent?.isRemote === true,
        span.startTime[0], span.startTime[1], span.endTime[0], span.endTime[1], span.duration[0], span.duration[1],
        status.code, status.message ?? null, span.attributes,
        span.links.length === 0 ? null : span.links.map(linkRecord),
        span.events.length === 0 ? null : span.events.map(eventRecord),
        span.droppedAttributesCount, span.droppedEventsCount, span.droppedLinksCount,
        this.#resource(span.resource, batch), this.#scope(span.instrumentationScope, batch)
      )
    }
    return batch
  }

  #resource (resource: Resource, batch: SpanBatch): number {
    let index = this.#resources.get(resource)
    if (index === undefined) {
      index = this.#resources.size
      this.#resources.set(resource, index)
      batch.resources.push(index, resource.attributes, resource.schemaUrl ?? '')
    }
    return index
  }

  #scope (scope: InstrumentationScope, batch: SpanBatch): number {
    const key = `${scope.name}\n${scope.version ?? ''}\n${scope.schemaUrl ?? ''}`
    let index = this.#scopes.get(key)
    if (index === undefined) {
      index = this.#scopes.size
      this.#scopes.set(key, index)
      batch.scopes.push(index, scope.name, scope.version ?? '', scope.schemaUrl ?? '')
    }
    return index
  }
}

function linkRecord (link: Link): LinkRecord {
  const context = link.context
  return [context.traceId, context.spanId, context.traceFlags, context.isRemote === true, context.traceState?.serialize() ?? '',
    link.attributes ?? {}, link.droppedAttributesCount ?? 0]
}

function eventRecord (event: TimedEvent): EventRecord {
  return [event.name, event.time[0], event.time[1], event.attributes ?? null, event.droppedAttributesCount ?? 0]
}

function spanContext (traceId: string, spanId: string, traceFlags: number, isRemote: boolean, traceState: string): SpanContext {
  return {
    traceId,
    spanId,
    traceFlags,
    ...(isRemote ? { isRemote } : {}),
    ...(traceState === '' ? {} : { traceState: new TraceState(traceState) })
  }
}

/** The receiving side: the resources and scopes the sender has numbered so far. */
export class SpanDecoder {
  readonly #resources: Resource[] = []
  readonly #scopes: InstrumentationScope[] = []

  decode (batch: SpanBatch): ReadableSpan[] {
    const { resources, scopes, spans: values } = batch
    for (let i = 0; i < resources.length; i += 3) {
      const schemaUrl = resources[i + 2] as string
      this.#resources[resources[i] as number] = resourceFromAttributes(resources[i + 1] as Attributes, schemaUrl === '' ? undefined : { schemaUrl })
    }
    for (let i = 0; i < scopes.length; i += 4) {
      const version = scopes[i + 2] as string
      const schemaUrl = scopes[i + 3] as string
      this.#scopes[scopes[i] as number] = {
        name: scopes[i + 1] as string,
        ...(version === '' ? {} : { version }),
        ...(schemaUrl === '' ? {} : { schemaUrl })
      }
    }
    const spans: ReadableSpan[] = []
    for (let i = 0; i < values.length; i += SPAN_FIELDS) spans.push(this.#span(values, i))
    return spans
  }

  #span (v: unknown[], i: number): ReadableSpan {
    const context = spanContext(v[i + 2] as string, v[i + 3] as string, v[i + 4] as number, false, v[i + 5] as string)
    const parentId = v[i + 7] as string
    const message = v[i + 17] as string | null
    const links = v[i + 19] as LinkRecord[] | null
    const events = v[i + 20] as EventRecord[] | null
    const resource = this.#resources[v[i + 24] as number]
    const scope = this.#scopes[v[i + 25] as number]
    if (resource === undefined || scope === undefined) throw new Error('a span names a resource or scope that was never sent')
    return {
      name: v[i] as string,
      kind: v[i + 1] as SpanKind,
      spanContext: () => context,
      ...(parentId === '' ? {} : { parentSpanContext: spanContext(v[i + 6] as string, parentId, v[i + 8] as number, v[i + 9] as boolean, '') }),
      startTime: [v[i + 10], v[i + 11]] as HrTime,
      endTime: [v[i + 12], v[i + 13]] as HrTime,
      duration: [v[i + 14], v[i + 15]] as HrTime,
      ended: true,
      status: message === null ? { code: v[i + 16] as SpanStatusCode } : { code: v[i + 16] as SpanStatusCode, message },
      attributes: v[i + 18] as Attributes,
      links: links === null
        ? []
        : links.map(([traceId, spanId, traceFlags, isRemote, traceState, attributes, dropped]) =>
          ({ context: spanContext(traceId, spanId, traceFlags, isRemote, traceState), attributes, droppedAttributesCount: dropped })),
      events: events === null
        ? []
        : events.map(([name, seconds, nanos, attributes, dropped]) =>
          ({ name, time: [seconds, nanos], ...(attributes === null ? {} : { attributes }), droppedAttributesCount: dropped })),
      droppedAttributesCount: v[i + 21] as number,
      droppedEventsCount: v[i + 22] as number,
      droppedLinksCount: v[i + 23] as number,
      resource,
      instrumentationScope: scope
    }
  }
}
