/**
 * The last step before spans leave the process (src/tracing/redact.ts): whatever an instrumentation or our own code
 * put in a span, a secret does not reach the exporter, and a server span answered below 500 is not an error. Spans
 * are made with the SDK's own tracer and handed to the scrubbing exporter, which passes them on to one that keeps
 * them in memory: what a collector would receive.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api'
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace'
import { newKey } from '../../src/access/keys.js'
import { ScrubbingSpanExporter } from '../../src/tracing/redact.js'

const KEY = newKey('production')
const STAGING_KEY = newKey('staging')
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw+/Tx5aQ7Jk0='
const SIGNATURE = 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='
const TOKEN = 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'
/** What must not be exported: each secret without its marker. */
const NEEDLES = [KEY.slice(9), STAGING_KEY.slice(9), SECRET.slice(6), SIGNATURE.slice(3), TOKEN]

/** Spans made by `make` with a real tracer, as the collector gets them through the scrubbing exporter. */
function exported (make: (start: (name: string, kind?: SpanKind) => Span) => void): ReadableSpan[] {
  const memory = new InMemorySpanExporter()
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: new ScrubbingSpanExporter(memory) })] })
  const tracer = provider.getTracer('test')
  make((name, kind = SpanKind.INTERNAL) => tracer.startSpan(name, { kind }))
  return memory.getFinishedSpans()
}

function leaks (spans: readonly ReadableSpan[]): string[] {
  const text = JSON.stringify(spans.map((span) => ({ name: span.name, attributes: span.attributes, status: span.status, events: span.events, links: span.links })))
  return NEEDLES.filter((needle) => text.includes(needle))
}

describe('the scrubbing exporter', () => {
  test('when a span holds secrets in its name, attributes, status, exception events and links, then none is exported and the rest is', () => {
    const error = new Error(`No webhook subscription "${KEY}" (sent with Authorization: Bearer ${TOKEN})`)
    const spans = exported((start) => {
      const linked = start('linked')
      linked.end()
      const span = start(`GET /v1/webhooks/${KEY}`)
      span.setAttributes({
        'petstore.request.id': 'req-1',
        'petstore.note': `${SECRET} ${SIGNATURE}`,
        'petstore.tags': [KEY, 'plain', STAGING_KEY],
        'petstore.count': 3,
        'url.full': `https://shop.example/v1/webhooks/${KEY}?token=${TOKEN}&limit=5`,
        'url.query': `token=${TOKEN}`,
        'http.request.header.authorization': [`Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}`],
        'http.request.header.webhook-signature': [SIGNATURE]
      })
      span.addLink({ context: linked.spanContext(), attributes: { why: KEY } })
      span.recordException(error)
      span.addEvent(`retrying ${SECRET}`, { detail: `key ${STAGING_KEY}` })
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.message })
      span.end()
    })
    assert.deepEqual(leaks(spans), [])
    const span = spans.find((s) => s.name.startsWith('GET'))
    assert.ok(span !== undefined)
    assert.equal(span.name, 'GET /v1/webhooks/psk_live_[redacted]')
    assert.deepEqual(span.attributes, {
      'petstore.request.id': 'req-1',
      'petstore.note': 'whsec_[redacted] v1,[redacted]',
      'petstore.tags': ['psk_live_[redacted]', 'plain', 'psk_test_[redacted]'],
      'petstore.count': 3,
      'url.full': 'https://shop.example/v1/webhooks/psk_live_[redacted]?token=[redacted]&limit=[redacted]',
      'url.query': 'token=[redacted]',
      'http.request.header.authorization': '[redacted]',
      'http.request.header.webhook-signature': '[redacted]'
    })
    assert.equal(span.status.message, 'No webhook subscription "psk_live_[redacted]" (sent with Authorization: Bearer [redacted])')
    const exception = span.events.find((event) => event.name === 'exception')
    assert.equal(exception?.attributes?.['exception.message'], span.status.message)
    assert.match(String(exception?.attributes?.['exception.stacktrace']), /^Error: No webhook subscription "psk_live_\[redacted\]"/)
    assert.deepEqual(span.links.map((link) => link.attributes), [{ why: 'psk_live_[redacted]' }])
    // Ids and times are the span's own: the trace still joins up.
    const linked = spans.find((s) => s.name === 'linked')
    assert.equal(span.links[0]?.context.spanId, linked?.spanContext().spanId)
  })

  test('when a secret is percent-encoded, then it is found and redacted all the same', () => {
    const encoded = '%70' + encodeURIComponent(KEY.slice(1)).replace(/_/g, '%5F')
    const spans = exported((start) => {
      const span = start('request')
      span.setAttribute('petstore.path', `/v1/webhooks/${encoded}`)
      span.setAttribute('url.path', `/v1/webhooks/${encodeURIComponent(encodeURIComponent(KEY))}`)
      span.end()
    })
    assert.deepEqual(leaks(spans), [])
    assert.deepEqual(spans[0]?.attributes, { 'petstore.path': '/v1/webhooks/psk_live_[redacted]', 'url.path': '/v1/webhooks/psk_live_[redacted]' })
  })

  test('when a server span answered 4xx was marked failed, then it leaves unset and without exception events; a 5xx stays failed', () => {
    const spans = exported((start) => {
      for (const status of [404, 400, 429, 500, 503]) {
        const span = start(`server ${status}`, SpanKind.SERVER)
        span.setAttribute('http.response.status_code', status)
        span.recordException(new Error(`failed with ${status}`))
        span.setStatus({ code: SpanStatusCode.ERROR, message: `failed with ${status}` })
        span.end()
      }
      // An internal span is the instrumentation's to judge: left as it is.
      const internal = start('internal 404')
      internal.setAttribute('http.response.status_code', 404)
      internal.setStatus({ code: SpanStatusCode.ERROR, message: 'kept' })
      internal.end()
    })
    const outcome = Object.fromEntries(spans.map((span) => [span.name, [span.status.code, span.events.length]]))
    assert.deepEqual(outcome, {
      'server 404': [SpanStatusCode.UNSET, 0],
      'server 400': [SpanStatusCode.UNSET, 0],
      'server 429': [SpanStatusCode.UNSET, 0],
      'server 500': [SpanStatusCode.ERROR, 1],
      'server 503': [SpanStatusCode.ERROR, 1],
      'internal 404': [SpanStatusCode.ERROR, 0]
    })
  })

  test('when a secret is nested in an attribute (an array of arrays, a map), then it is redacted at any depth', () => {
    const bytes = new Uint8Array([1, 2, 3])
    const spans = exported((start) => {
      const span = start('call')
      // OpenTelemetry's AnyValue: the SDK keeps maps and nested arrays as they are given.
      const nested: unknown = { auth: `Bearer ${TOKEN}`, hops: [[KEY], [{ secret: SECRET }]], count: 2, raw: bytes }
      span.setAttribute('petstore.request', nested as string)
      span.setAttribute('petstore.lists', [[SIGNATURE, 'plain']] as unknown as string[])
      span.end()
    })
    assert.deepEqual(leaks(spans), [])
    const request = spans[0]?.attributes['petstore.request'] as unknown as { auth: string, hops: unknown[][], count: number, raw: Uint8Array }
    assert.equal(request.auth, 'Bearer [redacted]')
    assert.equal(request.count, 2)
    assert.equal(request.raw, bytes)
    assert.deepEqual(spans[0]?.attributes['petstore.lists'], [['v1,[redacted]', 'plain']])
  })

  test('when a span holds nothing secret, then its attributes are handed on as they are', () => {
    const attributes = { 'http.route': '/v1/inventory/:petId', 'petstore.key.id': 'key_fdcfa9a99fe82688', 'db.system.name': 'sqlite', 'petstore.sqlite.writes': 2 }
    const spans = exported((start) => {
      const span = start('PATCH /v1/inventory/:petId', SpanKind.SERVER)
      span.setAttributes(attributes)
      span.end()
    })
    assert.deepEqual(spans[0]?.attributes, attributes)
    assert.equal(spans[0]?.name, 'PATCH /v1/inventory/:petId')
  })

  test('when a span holds nothing to scrub, then the span the SDK made is handed on itself, and only one that changes is copied', () => {
    const memory = new InMemorySpanExporter()
    const tracer = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] }).getTracer('test')
    const clean = tracer.startSpan('GET /v1/inventory', { kind: SpanKind.SERVER, attributes: { 'url.path': '/v1/inventory', 'http.response.status_code': 200 } })
    clean.addEvent('cache hit', { 'petstore.entries': 10 })
    clean.end()
    const linked = tracer.startSpan('sqlite commit', { links: [{ context: clean.spanContext(), attributes: { 'petstore.sqlite.writes': 2 } }] })
    linked.setStatus({ code: SpanStatusCode.ERROR, message: 'SqliteError: disk I/O error' })
    linked.end()
    const secret = tracer.startSpan(`store ${KEY}`)
    secret.end()
    const clientError = tracer.startSpan('PATCH /v1/inventory/:petId', { kind: SpanKind.SERVER, attributes: { 'http.response.status_code': 404 } })
    clientError.setStatus({ code: SpanStatusCode.ERROR, message: 'not found' })
    clientError.end()
    const made = memory.getFinishedSpans()
    const handed: ReadableSpan[] = []
    new ScrubbingSpanExporter({ export: (spans, done) => { handed.push(...spans); done({ code: 0 }) }, shutdown: async () => {} }).export(made, () => {})
    assert.equal(handed.length, 4)
    assert.equal(handed[0], made[0], 'a clean server span with an event')
    assert.equal(handed[1], made[1], 'a clean failed span with a link')
    assert.notEqual(handed[2], made[2])
    assert.deepEqual(leaks(handed), [])
    assert.match(handed[2]?.name ?? '', /^store \S+\[redacted\]$/)
    assert.notEqual(handed[3], made[3])
    assert.equal(handed[3]?.status.code, SpanStatusCode.UNSET)
    // The SDK's spans are left as they were made.
    assert.equal(made[2]?.name, `store ${KEY}`)
    assert.equal(made[3]?.status.code, SpanStatusCode.ERROR)
  })
})
