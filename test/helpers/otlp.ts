/**
 * A small OTLP/HTTP trace receiver for tests: what a collector would get from a server started with
 * OTEL_EXPORTER_OTLP_ENDPOINT pointing here and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json. It keeps every span it
 * is sent, flattened (attributes as plain values), and closes after the test.
 */
import { createServer } from 'node:http'
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
  /** The request bodies received so far, as sent (to look for text anywhere in them). */
  bodies: () => string[]
  /** Waits until the spans received satisfy `ready`; fails after `timeoutMs`. */
  waitFor: (ready: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number) => Promise<ReceivedSpan[]>
}

export async function otlpReceiver (t: TestContext): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = []
  const bodies: string[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8').on('data', (chunk: string) => { body += chunk })
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(404).end()
        return
      }
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
