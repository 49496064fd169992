/**
 * A small OTLP/HTTP trace receiver for tests: what a collector would get from a server started with
 * OTEL_EXPORTER_OTLP_ENDPOINT pointing here. With OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json it keeps every span it
 * is sent, flattened (attributes as plain values); with http/protobuf (the default) it keeps the bytes only, to be
 * searched. Every request body is kept as sent (gzip undone), and the receiver closes after the test.
 */
import { createServer } from 'node:http'
import { gunzipSync } from 'node:zlib'
import type { AddressInfo } from 'node:net'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

type AttributeValue = string | number | boolean | null | AttributeValue[]

/** OTLP's span kinds (the JSON encoding's numbers). */
export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const

export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** Empty for a root span. */
  parentSpanId: string
  name: string
  kind: number
  scope: string
  attributes: Record<string, AttributeValue>
  resource: Record<string, AttributeValue>
  status: { code?: number, message?: string }
  events: Array<{ name: string, attributes: Record<string, AttributeValue> }>
  links: Array<{ traceId: string, spanId: string }>
}

interface OtlpAttribute { key: string, value: OtlpValue }
interface OtlpValue {
  stringValue?: string, boolValue?: boolean, intValue?: number | string, doubleValue?: number,
  arrayValue?: { values?: OtlpValue[] }
}
interface OtlpSpan {
  traceId: string, spanId: string, parentSpanId?: string, name: string, kind: number, attributes?: OtlpAttribute[],
  status?: { code?: number, message?: string }, events?: Array<{ name: string, attributes?: OtlpAttribute[] }>,
  links?: Array<{ traceId: string, spanId: string }>
}
interface OtlpRequest {
  resourceSpans?: Array<{ resource?: { attributes?: OtlpAttribute[] }, scopeSpans?: Array<{ scope?: { name?: string }, spans?: OtlpSpan[] }> }>
}

function plain (value: OtlpValue): AttributeValue {
  if (value.stringValue !== undefined) return value.stringValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(plain)
  return null
}

function attributes (list: OtlpAttribute[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, plain(value)]))
}

function flatten (body: OtlpRequest): ReceivedSpan[] {
  return (body.resourceSpans ?? []).flatMap(({ resource, scopeSpans }) => (scopeSpans ?? []).flatMap(({ scope, spans }) => (spans ?? []).map((span) => ({
    traceId: span.traceId,
    spanId: span.spanId,
    parentSpanId: span.parentSpanId ?? '',
    name: span.name,
    kind: span.kind,
    scope: scope?.name ?? '',
    attributes: attributes(span.attributes),
    resource: attributes(resource?.attributes),
    status: span.status ?? {},
    events: (span.events ?? []).map((event) => ({ name: event.name, attributes: attributes(event.attributes) })),
    links: (span.links ?? []).map(({ traceId, spanId }) => ({ traceId, spanId }))
  }))))
}

export interface OtlpReceiver {
  /** What OTEL_EXPORTER_OTLP_ENDPOINT should say (the exporter adds /v1/traces). */
  endpoint: string
  /** Every span received so far. */
  spans: () => ReceivedSpan[]
  /** The JSON request bodies received so far, as sent (to look for text anywhere in them). */
  bodies: () => string[]
  /** Every request body received so far, JSON or protobuf, as bytes (gzip undone). */
  rawBodies: () => Buffer[]
  /** Waits until the spans received satisfy `ready`; fails after `timeoutMs`. */
  waitFor: (ready: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number) => Promise<ReceivedSpan[]>
}

export async function otlpReceiver (t: TestContext): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = []
  const bodies: string[] = []
  const rawBodies: Buffer[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => { chunks.push(chunk) })
    req.on('end', () => {
      const type = String(req.headers['content-type'])
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !(type.startsWith('application/json') || type.startsWith('application/x-protobuf'))) {
        res.writeHead(404).end()
        return
      }
      const sent = Buffer.concat(chunks)
      const raw = req.headers['content-encoding'] === 'gzip' ? gunzipSync(sent) : sent
      rawBodies.push(raw)
      if (type.startsWith('application/x-protobuf')) {
        // An empty ExportTraceServiceResponse: no field set, no bytes.
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
        return
      }
      const body = raw.toString('utf8')
      bodies.push(body)
      received.push(...flatten(JSON.parse(body) as OtlpRequest))
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }))
  const { port } = server.address() as AddressInfo
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans: () => [...received],
    bodies: () => [...bodies],
    rawBodies: () => [...rawBodies],
    waitFor: async (ready, timeoutMs = 10_000) => {
      const deadline = Date.now() + timeoutMs
      while (!ready(received)) {
        if (Date.now() > deadline) throw new Error(`the spans expected did not arrive within ${timeoutMs} ms; received: ${received.map((s) => s.name).join(', ')}`)
        await sleep(25)
      }
      return [...received]
    }
  }
}

/** Whether `span` descends from the span `ancestorId` (through the spans received). */
export function descendsFrom (spans: readonly ReceivedSpan[], span: ReceivedSpan, ancestorId: string): boolean {
  const byId = new Map(spans.map((s) => [s.spanId, s]))
  for (let parent = span.parentSpanId; parent !== ''; parent = byId.get(parent)?.parentSpanId ?? '') {
    if (parent === ancestorId) return true
  }
  return false
}
