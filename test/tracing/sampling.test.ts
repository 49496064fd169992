/**
 * Sampling decided once, as a request arrives (src/tracing/spans.ts, startServerSpan): the app, in this process, traced
 * by the SDK with the sampler and trace ids the service makes (src/tracing/sampling.ts), its spans kept in memory. A
 * request the sampler leaves out gets no span and no context; a traced one gets its server span with every attribute
 * docs/observability.md promises, on the very trace id the sampler accepted; a caller's traceparent is followed.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, test } from 'node:test'
import { SamplingDecision, SpanKind, SpanStatusCode, trace, ROOT_CONTEXT, type Attributes, type Context, type Link, type Sampler } from '@opentelemetry/api'
import { NodeSDK } from '@opentelemetry/sdk-node'
import { InMemorySpanExporter, RandomIdGenerator, SimpleSpanProcessor, TraceIdRatioBasedSampler, type ReadableSpan } from '@opentelemetry/sdk-trace'
import { createKey } from '../../src/access/keys.js'
import { RequestTraceIds, samplingFromEnv } from '../../src/tracing/sampling.js'
import { enableSpans, startServerSpan, stopTracing } from '../../src/tracing/spans.js'
import { auth, newKey, pet, testApp } from '../helpers/app.js'
import { waitFor } from '../helpers/wait.js'

const RATIO = 0.5
const memory = new InMemorySpanExporter()
const processor = new SimpleSpanProcessor({ exporter: memory })
/**
 * The spans exported so far. The processor exports an ended span later, and only once the SDK's resource detection has
 * finished, which on a loaded machine may take longer than a test's requests: wait for every pending export first.
 */
async function finishedSpans (): Promise<ReadableSpan[]> {
  await processor.forceFlush()
  return memory.getFinishedSpans()
}
/** Forgets the spans so far, with those of earlier requests still being exported. */
async function forgetSpans (): Promise<void> {
  await processor.forceFlush()
  memory.reset()
}
/** How often the sampler was asked, by the service and by the SDK. */
let questions = 0
const { sampler: configured, root: rootRule } = samplingFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(RATIO) })
const sampler: Sampler = {
  shouldSample: (context: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]) => {
    questions++
    return configured.shouldSample(context, traceId, name, kind, attributes, links)
  },
  toString: () => configured.toString()
}

before(() => {
  const traceIds = new RequestTraceIds()
  // As an operator may set it: B3 beside the defaults (B3 writes one format and reads both).
  process.env.OTEL_PROPAGATORS = 'tracecontext,baggage,b3'
  const sdk = new NodeSDK({ sampler, idGenerator: traceIds, spanProcessors: [processor], instrumentations: [], metricReaders: [], logRecordProcessors: [] })
  sdk.start()
  enableSpans(trace.getTracer('petstore-inventory-test'), { sampler, traceIds, root: () => traceIds.root(rootRule) }, () => sdk.shutdown())
})
after(() => stopTracing())

const servers = (spans: readonly ReadableSpan[]): ReadableSpan[] => spans.filter((span) => span.kind === SpanKind.SERVER)
const traceOf = (span: ReadableSpan): string => span.spanContext().traceId
/** A caller's W3C traceparent in trace `traceId`, sampled, from a span of its own. */
const sampledParent = (traceId: string): string => `00-${traceId}-${randomBytes(8).toString('hex')}-01`

/** The server span of trace `traceId`, once it has ended and been exported. */
async function endedServerSpan (traceId: string): Promise<ReadableSpan> {
  let span: ReadableSpan | undefined
  await waitFor(`the server span of trace ${traceId} to end`, async () => {
    span = servers(await finishedSpans()).find((candidate) => traceOf(candidate) === traceId)
    return span !== undefined
  })
  return span as ReadableSpan
}

describe('sampling, decided as a request arrives', () => {
  test('when requests bring no traceparent, then the ratio of them is traced on a trace id the sampler accepts, the others make no span, and only the SDK asks the sampler', async (t) => {
    const { request, store } = await testApp(t, {}, { pets: [pet(1), pet(2)] })
    const key = await newKey(store, 'enterprise')
    await forgetSpans()
    questions = 0
    const sent = 400
    for (let i = 0; i < sent; i++) assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 200)

    const spans = await finishedSpans()
    const traced = servers(spans)
    // Binomial(400, 0.5): 200 expected, standard deviation 10. Deciding twice, on two ids, would trace about 100.
    assert.ok(traced.length > 140 && traced.length < 260, `${traced.length} of ${sent} requests traced at a ratio of ${RATIO}`)
    const ratio = new TraceIdRatioBasedSampler(RATIO)
    for (const span of traced) {
      assert.equal(ratio.shouldSample(ROOT_CONTEXT, traceOf(span)).decision, SamplingDecision.RECORD_AND_SAMPLED,
        'the server span is on a trace id the ratio accepts')
      assert.equal(span.parentSpanContext, undefined, 'a new trace')
    }
    const tracedIds = new Set(traced.map(traceOf))
    assert.deepEqual(spans.filter((span) => !tracedIds.has(traceOf(span))).map((span) => span.name), [], 'no span outside a traced request')
    // A request with no caller is decided by the sampler's rule without asking it; only the spans of traced requests
    // asked (the SDK, as it made them): a request left out made no span, not even one that records nothing.
    assert.equal(questions, spans.length)
  })

  test('when a caller sends a traceparent, then a sampled one is continued and an unsampled one makes no span', async (t) => {
    const { request, store } = await testApp(t, {}, { pets: [pet(1)] })
    const key = await newKey(store, 'enterprise')
    await forgetSpans()
    questions = 0
    const callers = Array.from({ length: 20 }, (_, i) => ({ traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex'), sampled: i % 2 === 0 }))
    for (const caller of callers) {
      const traceparent = `00-${caller.traceId}-${caller.spanId}-${caller.sampled ? '01' : '00'}`
      assert.equal((await request({ method: 'GET', url: '/v1/inventory/1', headers: { ...auth(key), traceparent } })).statusCode, 200)
    }
    const spans = await finishedSpans()
    const traced = servers(spans)
    assert.deepEqual(traced.map((span) => [traceOf(span), span.parentSpanContext?.spanId]).sort(),
      callers.filter(({ sampled }) => sampled).map(({ traceId, spanId }) => [traceId, spanId]).sort(), 'exactly the sampled callers\' traces, under their spans')
    // A request that brings a context is asked about as it arrives; then each span of a traced one, by the SDK.
    assert.equal(questions, callers.length + spans.length)
  })

  test('when a request is traced, then its server span holds every attribute promised, the gate\'s decision included, and a listing from memory makes no span of its own', async (t) => {
    const { request, store } = await testApp(t, {}, { pets: [pet(1)] })
    const { key, record } = await createKey(store, 'production', { plan: 'enterprise', name: 'traced', perMinute: 100_000, perDay: 1_000_000 })
    const keyId = record.id
    await forgetSpans()
    const traceId = randomBytes(16).toString('hex')
    const res = await request({ method: 'GET', url: '/v1/inventory?limit=5', headers: { ...auth(key), traceparent: sampledParent(traceId) } })
    assert.equal(res.statusCode, 200)
    const spans = (await finishedSpans()).filter((span) => traceOf(span) === traceId)
    const [server] = servers(spans)
    assert.ok(server !== undefined, 'a server span')
    assert.equal(server.name, 'GET /v1/inventory')
    assert.deepEqual(server.attributes, {
      'http.request.method': 'GET',
      'url.path': '/v1/inventory',
      'http.route': '/v1/inventory',
      'http.response.status_code': 200,
      'petstore.operation.id': 'listInventory',
      'petstore.request.id': res.headers['x-request-id'],
      'petstore.key.id': keyId,
      'petstore.admission': 'admitted',
      'petstore.ratelimit.decision': 'allowed',
      'petstore.ratelimit.remaining': Number(res.headers['x-ratelimit-remaining'])
    })
    assert.equal(server.status.code, SpanStatusCode.UNSET)
    // No span for the gate or the handler (docs/adr/0050-one-span-per-request-and-its-io.md): what the first request
    // waited on (the key's lookup, the listing's first read) is under the server span directly.
    const children = spans.filter((span) => span !== server)
    assert.ok(children.length > 0 && children.every((span) => span.name.startsWith('store ') && span.parentSpanContext?.spanId === server.spanContext().spanId),
      children.map((span) => span.name).join(', '))
    // The same listing again, its page in memory: no span reads it (the key's lookup is still one: the tests' key cache
    // keeps nothing).
    const again = randomBytes(16).toString('hex')
    await forgetSpans()
    assert.equal((await request({ method: 'GET', url: '/v1/inventory?limit=5', headers: { ...auth(key), traceparent: sampledParent(again) } })).statusCode, 200)
    assert.deepEqual((await finishedSpans()).filter((span) => traceOf(span) === again).map((span) => span.name).sort(), ['GET /v1/inventory', 'store findApiKeyByHash'])
  })

  test('when no route matches, then the traced request\'s span is named after the method alone and a 404 is no error', async (t) => {
    const { request } = await testApp(t)
    await forgetSpans()
    const traceId = randomBytes(16).toString('hex')
    const res = await request({ method: 'GET', url: '/no/such/psk_live_path', headers: { traceparent: sampledParent(traceId) } })
    assert.equal(res.statusCode, 404)
    const [server] = servers((await finishedSpans()).filter((span) => traceOf(span) === traceId))
    assert.deepEqual([server?.name, server?.attributes['http.route'], server?.attributes['http.response.status_code'], server?.status.code],
      ['GET', undefined, 404, SpanStatusCode.UNSET])
  })

  test('when a client resets its connection and its traced request then fails, then the span still shows the 500 and the failure', async (t) => {
    const { app } = await testApp(t)
    let failed = false
    app.get('/slow-failure', async () => {
      await sleep(200)
      failed = true
      throw new Error('failed after the client left')
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    await forgetSpans()
    const traceId = randomBytes(16).toString('hex')
    const arrived = new Promise((resolve) => app.server.once('request', resolve))
    const socket = connect((app.server.address() as AddressInfo).port, '127.0.0.1')
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write(`GET /slow-failure HTTP/1.1\r\nHost: x\r\ntraceparent: ${sampledParent(traceId)}\r\n\r\n`)
    await arrived
    socket.resetAndDestroy()
    await waitFor('the handler to fail', () => failed)
    const span = await endedServerSpan(traceId)
    assert.deepEqual([span.attributes['http.response.status_code'], span.status.code, span.events.map((event) => event.name)],
      [500, SpanStatusCode.ERROR, ['exception']])
  })

  test('when OTEL_PROPAGATORS adds B3, then a caller\'s trace in either B3 format is continued', async (t) => {
    const { request, store } = await testApp(t, {}, { pets: [pet(1)] })
    const key = await newKey(store, 'enterprise')
    await forgetSpans()
    const multi = { traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex') }
    const single = { traceId: randomBytes(16).toString('hex'), spanId: randomBytes(8).toString('hex') }
    const callers = [
      { 'x-b3-traceid': multi.traceId, 'x-b3-spanid': multi.spanId, 'x-b3-sampled': '1' },
      { b3: `${single.traceId}-${single.spanId}-1` }
    ]
    for (const headers of callers) assert.equal((await request({ method: 'GET', url: '/v1/inventory/1', headers: { ...auth(key), ...headers } })).statusCode, 200)
    assert.deepEqual(servers(await finishedSpans()).map((span) => [traceOf(span), span.parentSpanContext?.spanId]).sort(),
      [[multi.traceId, multi.spanId], [single.traceId, single.spanId]].sort())
  })

  test('when a follower opens the change stream, then its span ends as the stream opens, not as it closes', async (t) => {
    const { app, store } = await testApp(t, {}, { pets: [pet(1)] })
    const key = await newKey(store, 'enterprise')
    await app.listen({ port: 0, host: '127.0.0.1' })
    await forgetSpans()
    const traceId = randomBytes(16).toString('hex')
    const { port } = app.server.address() as AddressInfo
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      httpRequest({ port, host: '127.0.0.1', path: '/v1/inventory/changes/stream', agent: false, headers: { ...auth(key), traceparent: sampledParent(traceId) } }, resolve)
        .once('error', reject).end()
    })
    t.after(() => { response.destroy() })
    assert.equal(response.statusCode, 200)
    const span = await endedServerSpan(traceId)
    assert.equal(response.destroyed, false, 'the stream is still open')
    assert.deepEqual([span.name, span.attributes['http.response.status_code']], ['GET /v1/inventory/changes/stream', 200])
  })

  test('when the sampler leaves a request out, then startServerSpan makes nothing: no span, no context', async () => {
    const before = (await finishedSpans()).length
    const unsampled = `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`
    const context = startServerSpan({ id: 'req-1', method: 'GET', url: '/v1/inventory', headers: { traceparent: unsampled }, routeOptions: { url: '/v1/inventory' } })
    assert.equal(context, null)
    assert.equal((await finishedSpans()).length, before)
  })
})

describe('the sampler the environment names', () => {
  test('when OTEL_TRACES_SAMPLER names a sampler, then it is the SDK\'s; unset, unknown or a bad ratio fall back as the SDK does', () => {
    const described = (env: Record<string, string>): string => samplingFromEnv(env).sampler.toString()
    assert.deepEqual({
      unset: described({}),
      on: described({ OTEL_TRACES_SAMPLER: 'always_on' }),
      off: described({ OTEL_TRACES_SAMPLER: 'always_off' }),
      parentOff: described({ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }),
      ratio: described({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }),
      parentRatio: described({ OTEL_TRACES_SAMPLER: ' parentbased_traceidratio ', OTEL_TRACES_SAMPLER_ARG: '0.1' }),
      badRatio: described({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }),
      unknown: described({ OTEL_TRACES_SAMPLER: 'jaeger_remote' })
    }, {
      unset: 'ParentBased{root=AlwaysOnSampler, remoteParentSampled=AlwaysOnSampler, remoteParentNotSampled=AlwaysOffSampler, localParentSampled=AlwaysOnSampler, localParentNotSampled=AlwaysOffSampler}',
      on: 'AlwaysOnSampler',
      off: 'AlwaysOffSampler',
      parentOff: 'ParentBased{root=AlwaysOffSampler, remoteParentSampled=AlwaysOnSampler, remoteParentNotSampled=AlwaysOffSampler, localParentSampled=AlwaysOnSampler, localParentNotSampled=AlwaysOffSampler}',
      ratio: 'TraceIdRatioBased{0.25}',
      parentRatio: 'ParentBased{root=TraceIdRatioBased{0.1}, remoteParentSampled=AlwaysOnSampler, remoteParentNotSampled=AlwaysOffSampler, localParentSampled=AlwaysOnSampler, localParentNotSampled=AlwaysOffSampler}',
      badRatio: 'TraceIdRatioBased{1}',
      unknown: 'ParentBased{root=AlwaysOnSampler, remoteParentSampled=AlwaysOnSampler, remoteParentNotSampled=AlwaysOffSampler, localParentSampled=AlwaysOnSampler, localParentNotSampled=AlwaysOffSampler}'
    })
  })
})

describe('deciding a request that brings no caller\'s context', () => {
  /** Math.random replaced by a fixed sequence, restarted by `rewind`: the same draws for two generators in turn. */
  function fixedRandom (t: { mock: { method: (object: object, name: string, implementation: () => number) => unknown } }, values: readonly number[]): { rewind: () => void } {
    let next = 0
    t.mock.method(Math, 'random', () => values[next++ % values.length] as number)
    return { rewind: () => { next = 0 } }
  }

  test('when the rule is a ratio, then it keeps exactly the ids the SDK\'s generator would draw and its ratio sampler accept, and makes no id for the others', (t) => {
    for (const [ratio, draws] of [[0.1, 3000], [0.5, 1000], [1, 100], [0, 100]] as const) {
      const { root } = samplingFromEnv({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(ratio) })
      const sdkSampler = new TraceIdRatioBasedSampler(ratio)
      let kept = 0
      for (let i = 0; i < draws; i++) {
        const values = Array.from({ length: 4 }, () => Math.random())
        const random = fixedRandom(t, values)
        const ours = new RequestTraceIds().root(root)
        random.rewind()
        const sdkId = new RandomIdGenerator().generateTraceId()
        t.mock.restoreAll()
        const accepted = sdkSampler.shouldSample(ROOT_CONTEXT, sdkId).decision === SamplingDecision.RECORD_AND_SAMPLED
        assert.equal(ours, accepted ? sdkId : null, `ratio ${ratio}, draws ${values.join(', ')}`)
        if (accepted) kept++
      }
      // Binomial: the share kept is the ratio's, within five standard deviations.
      const spread = 5 * Math.sqrt(draws * ratio * (1 - ratio))
      assert.ok(Math.abs(kept - ratio * draws) <= spread, `${kept} of ${draws} kept at ${ratio}`)
    }
  })

  test('when all four words drawn are zero, then the id is the SDK\'s (its last byte 1), not the invalid id of zeros', (t) => {
    const { root } = samplingFromEnv({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1' })
    const random = fixedRandom(t, [0, 0, 0, 0])
    const ours = new RequestTraceIds().root(root)
    random.rewind()
    assert.equal(ours, new RandomIdGenerator().generateTraceId())
    assert.equal(ours, '00000000000000000000000000000001')
  })

  test('when the sampler names always or never, then the rule follows it: a new random id for every request, or none', () => {
    const rule = (sampler: string): string => JSON.stringify(samplingFromEnv({ OTEL_TRACES_SAMPLER: sampler }).root)
    assert.deepEqual(
      ['always_on', 'parentbased_always_on', 'always_off', 'parentbased_always_off', 'jaeger_remote'].map(rule),
      ['"always"', '"always"', '"never"', '"never"', '"always"'])
    assert.equal(samplingFromEnv({}).root, 'always')
    const ids = new RequestTraceIds()
    const drawn = Array.from({ length: 50 }, () => ids.root('always'))
    assert.ok(drawn.every((id) => id !== null && /^[0-9a-f]{32}$/.test(id)), 'valid trace ids')
    assert.equal(new Set(drawn).size, drawn.length, 'each new')
    assert.equal(ids.root('never'), null)
  })
})
