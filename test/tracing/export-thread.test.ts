/**
 * Spans exported from a thread of their own (src/tracing/export-thread.ts): what crosses to the thread is the span as
 * the SDK's serializers read it, and what a collector receives from the thread is scrubbed as before. The spans are
 * the SDK's own, made by a TracerProvider in this test.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { context, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes } from '@opentelemetry/api'
import { ExportResultCode, TraceState, type ExportResult } from '@opentelemetry/core'
import { JsonTraceSerializer, ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace'
import { ThreadSpanExporter } from '../../src/tracing/export-thread.js'
import { SpanDecoder, SpanEncoder } from '../../src/tracing/span-records.js'
import { freePort } from '../helpers/net.js'
import { otlpReceiver } from '../helpers/otlp.js'

const KEY = 'psk_live_AbCdEfGhIjKlMnOpQrStUvWx12'

/** Finished spans of every shape the service makes: a remote parent, attributes, a link with a trace state, events, statuses. */
function finishedSpans (): ReadableSpan[] {
  const memory = new InMemorySpanExporter()
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'petstore-under-test', 'service.version': '1.0.0' }),
    spanProcessors: [new SimpleSpanProcessor({ exporter: memory })]
  })
  const tracer = provider.getTracer('petstore-inventory', '1.0.0')
  const other = provider.getTracer('@opentelemetry/instrumentation-pg', '0.77.0')
  const caller = trace.setSpanContext(context.active(), {
    traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true
  })
  const server = tracer.startSpan('PATCH /v1/inventory/:petId', {
    kind: SpanKind.SERVER,
    attributes: { 'http.request.method': 'PATCH', 'url.path': '/v1/inventory/1', 'petstore.ratelimit.remaining': 41, retried: false, ids: [1, 2, 3] }
  }, caller)
  const query = other.startSpan('UPDATE', { kind: SpanKind.CLIENT, attributes: { 'db.query.text': `UPDATE x SET note = '${KEY}'` } }, trace.setSpan(caller, server))
  query.addEvent('rows', { count: 1 })
  query.end()
  const commit = tracer.startSpan('sqlite commit', {
    kind: SpanKind.CLIENT,
    attributes: { 'petstore.sqlite.writes': 2 },
    links: [{
      context: { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.SAMPLED, traceState: new TraceState('vendor=value') },
      attributes: { why: 'joined' }
    }]
  }, trace.setSpan(caller, server))
  commit.setStatus({ code: SpanStatusCode.ERROR, message: 'SqliteError: disk I/O error' })
  commit.recordException(new Error('disk I/O error'))
  commit.end()
  server.setAttribute('http.response.status_code', 200)
  server.end()
  return memory.getFinishedSpans()
}

/** A batch as the thread receives it: encoded, then copied by the structured clone, as postMessage copies it. */
function crossed (encoder: SpanEncoder, decoder: SpanDecoder, spans: readonly ReadableSpan[]): ReadableSpan[] {
  return decoder.decode(structuredClone(encoder.encode(spans)))
}

describe('spans crossing to the export thread', () => {
  test('when a batch crosses, then OTLP protobuf and JSON serialize it to the same bytes as the spans the SDK made', () => {
    const spans = finishedSpans()
    assert.equal(spans.length, 3)
    const received = crossed(new SpanEncoder(), new SpanDecoder(), spans)
    assert.deepEqual(Buffer.from(ProtobufTraceSerializer.serializeRequest(received) ?? []), Buffer.from(ProtobufTraceSerializer.serializeRequest(spans) ?? []))
    assert.deepEqual(Buffer.from(JsonTraceSerializer.serializeRequest(received) ?? []), Buffer.from(JsonTraceSerializer.serializeRequest(spans) ?? []))
    // What the scrubbing exporter and the collector read, field by field.
    const server = received.find((span) => span.kind === SpanKind.SERVER)
    assert.equal(server?.parentSpanContext?.isRemote, true)
    assert.deepEqual(server?.attributes['ids'], [1, 2, 3])
    const commit = received.find((span) => span.name === 'sqlite commit')
    assert.equal(commit?.links[0]?.context.traceState?.get('vendor'), 'value')
    assert.deepEqual(commit?.status, { code: SpanStatusCode.ERROR, message: 'SqliteError: disk I/O error' })
    assert.equal(commit?.events[0]?.name, 'exception')
  })

  test('when later batches cross, then the resource and scopes already sent are not sent again, and still resolve', () => {
    const encoder = new SpanEncoder()
    const decoder = new SpanDecoder()
    const spans = finishedSpans()
    const first = encoder.encode(spans.slice(0, 1))
    assert.equal(first.resources.length, 3)
    assert.equal(first.scopes.length, 4)
    decoder.decode(structuredClone(first))
    const second = encoder.encode(spans)
    assert.equal(second.resources.length, 0)
    // Only the scope the first batch did not have.
    assert.equal(second.scopes.length, 4)
    const received = decoder.decode(structuredClone(second))
    const scope = ({ instrumentationScope: { name, version, schemaUrl } }: ReadableSpan): unknown[] => [name, version, schemaUrl]
    assert.deepEqual(received.map(scope), spans.map(scope))
    assert.deepEqual(received.map((span) => span.resource.attributes), spans.map((span) => span.resource.attributes))
  })

  test('when a span names a table entry the receiver never had, then decoding fails instead of sending a wrong resource', () => {
    const encoder = new SpanEncoder()
    const spans = finishedSpans()
    encoder.encode(spans)
    // A receiver that missed the first batch (another thread) gets one that names the entries it sent.
    assert.throws(() => new SpanDecoder().decode(structuredClone(encoder.encode(spans))), /never sent/)
  })
})

/** Exports a batch; the result the SDK's batch processor would get. */
async function exported (exporter: ThreadSpanExporter, spans: ReadableSpan[]): Promise<ExportResult> {
  return await new Promise((resolve) => { exporter.export(spans, resolve) })
}

describe('the export thread', () => {
  test('when a batch is exported, then the collector receives its spans from the thread, scrubbed', async (t) => {
    const receiver = await otlpReceiver(t)
    const exporter = new ThreadSpanExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' })
    t.after(() => exporter.shutdown())
    const result = await exported(exporter, finishedSpans())
    assert.equal(result.code, ExportResultCode.SUCCESS, result.error?.message)
    const spans = receiver.spans()
    assert.deepEqual(spans.map((span) => span.name).sort(), ['PATCH /v1/inventory/:petId', 'UPDATE', 'sqlite commit'])
    const server = spans.find((span) => span.name === 'PATCH /v1/inventory/:petId')
    assert.equal(server?.parentSpanId, 'b7ad6b7169203331')
    assert.equal((server?.attributes as Attributes)['petstore.ratelimit.remaining'], 41)
    assert.ok(receiver.bodies().every((body) => !body.includes(KEY)), 'the key left the process')
    assert.ok(receiver.bodies().some((body) => body.includes('[redacted]')))
  })

  test('when the collector cannot be reached, then the export fails within the exporter\'s timeout', async (t) => {
    const exporter = new ThreadSpanExporter({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
      OTEL_EXPORTER_OTLP_TIMEOUT: '500'
    })
    t.after(() => exporter.shutdown())
    const started = Date.now()
    const result = await exported(exporter, finishedSpans())
    assert.equal(result.code, ExportResultCode.FAILED)
    assert.ok(Date.now() - started < 5_000, `took ${Date.now() - started} ms`)
  })

  test('when the exporter refuses a setting, then the thread says why and a batch fails at once, without a new thread', async (t) => {
    // The gRPC exporter refuses an endpoint that is no URL as it is made.
    const exporter = new ThreadSpanExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://[collector]:4317', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })
    t.after(() => exporter.shutdown())
    await assert.rejects(exporter.ready(), /Invalid URL/)
    const started = Date.now()
    const results = await Promise.all([1, 2, 3].map(async () => await exported(exporter, finishedSpans())))
    assert.deepEqual(results.map((result) => result.code), [ExportResultCode.FAILED, ExportResultCode.FAILED, ExportResultCode.FAILED])
    assert.match(results[0]?.error?.message ?? '', /tried again after a pause/)
    assert.ok(Date.now() - started < 200, `took ${Date.now() - started} ms`)
  })

  test('when a batch cannot be copied to the thread, then it fails and the next batch is exported by a fresh thread', async (t) => {
    const receiver = await otlpReceiver(t)
    const exporter = new ThreadSpanExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' })
    t.after(() => exporter.shutdown())
    await exporter.ready()
    const spans = finishedSpans()
    // An attribute changed after its span ended, to a value the structured clone cannot copy: the batch that first
    // named this resource and these scopes never reaches the thread.
    const attributes = spans[0]?.attributes as Record<string, unknown>
    attributes['later'] = () => 1
    const failed = await exported(exporter, spans)
    assert.equal(failed.code, ExportResultCode.FAILED)
    assert.match(failed.error?.message ?? '', /could not be cloned/)
    delete attributes['later']
    const result = await exported(exporter, spans)
    assert.equal(result.code, ExportResultCode.SUCCESS, result.error?.message)
    assert.equal(receiver.spans().length, 3)
  })

  test('when it is shut down, then it sends what it was given and exports nothing more', async (t) => {
    const receiver = await otlpReceiver(t)
    const exporter = new ThreadSpanExporter({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })
    const sent = exported(exporter, finishedSpans())
    await exporter.shutdown()
    assert.equal((await sent).code, ExportResultCode.SUCCESS)
    assert.equal(receiver.rawBodies().length, 1)
    const after = await exported(exporter, finishedSpans())
    assert.equal(after.code, ExportResultCode.FAILED)
    assert.equal(receiver.rawBodies().length, 1)
  })
})
