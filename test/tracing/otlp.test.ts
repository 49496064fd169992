/**
 * Traces as a collector receives them: the built server (bin/petstore.js serve, a child process, so that the
 * instrumentations hook pg and ioredis as a real start does) sends OTLP/HTTP to a receiver in the test. One PATCH
 * makes one trace, continuing the caller's traceparent: the server span, and under it the store's calls (the SQLite
 * store's own spans; pg's on PostgreSQL) and the Redis commands; the gate's decision is on the server span.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { describe, test, type TestContext } from 'node:test'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli } from '../cli/run.js'
import { descendsFrom, otlpReceiver, SPAN_KIND, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { REDIS_URL, redisKeyPrefix, requireRedis } from '../ratelimit/redis-env.js'

const DEMO = fileURLToPath(new URL('../../data/demo.json', import.meta.url))

/** The variables an operator sets, plus the JSON encoding the receiver reads. */
function tracingEnv (receiver: OtlpReceiver, env: Record<string, string> = {}): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'petstore-under-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
    ...env
  }
}

/** A store with the demo data and a key; returns the key and its id. */
async function prepared (cli: Cli): Promise<{ key: string, keyId: string }> {
  assert.equal((await cli.run(['migrate'])).code, 0)
  assert.equal((await cli.run(['import', DEMO])).code, 0)
  const created = await cli.run(['keys', 'create', '--plan', 'pro', '--json'])
  assert.equal(created.code, 0, created.stderr)
  const { key, id } = JSON.parse(created.stdout) as { key: string, id: string }
  return { key, keyId: id }
}

interface Patched { traceId: string, callerSpanId: string, requestId: string, remaining: number }

/** One PATCH, as a traced caller sends it (W3C traceparent). */
async function tracedPatch (base: string, key: string): Promise<Patched> {
  const traceId = randomBytes(16).toString('hex')
  const callerSpanId = randomBytes(8).toString('hex')
  const res = await fetch(`${base}/v1/inventory/1`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', traceparent: `00-${traceId}-${callerSpanId}-01` },
    body: JSON.stringify({ quantity: 42 })
  })
  assert.equal(res.status, 200, await res.text())
  return { traceId, callerSpanId, requestId: res.headers.get('x-request-id') ?? '', remaining: Number(res.headers.get('x-ratelimit-remaining')) }
}

const isServerSpanOf = (patched: Patched) => (span: ReceivedSpan): boolean =>
  span.traceId === patched.traceId && span.kind === SPAN_KIND.SERVER

/**
 * What every store shows for the PATCH: the server span continues the caller's trace and carries the operation, the
 * key id, the request id and the gate's decision; no span for the gate or the handler; the store write is under the
 * server span; the key's text is nowhere. Returns the trace's spans, its server span and the write's.
 */
function assertPatchTrace (received: ReceivedSpan[], patched: Patched, key: { key: string, keyId: string }) {
  const spans = received.filter((span) => span.traceId === patched.traceId)
  const server = spans.find(isServerSpanOf(patched))
  assert.ok(server !== undefined, `a server span in the caller's trace; got ${spans.map((s) => s.name).join(', ')}`)
  assert.equal(server.parentSpanId, patched.callerSpanId, 'the caller\'s span is the parent')
  assert.equal(server.name, 'PATCH /v1/inventory/:petId')
  assert.deepEqual({
    operation: server.attributes['petstore.operation.id'],
    admission: server.attributes['petstore.admission'],
    keyId: server.attributes['petstore.key.id'],
    requestId: server.attributes['petstore.request.id'],
    decision: server.attributes['petstore.ratelimit.decision'],
    remaining: server.attributes['petstore.ratelimit.remaining'],
    status: server.attributes['http.response.status_code'],
    route: server.attributes['http.route'],
    path: server.attributes['url.path']
  }, {
    operation: 'updateInventory', admission: 'admitted', keyId: key.keyId, requestId: patched.requestId, decision: 'allowed', remaining: patched.remaining,
    status: 200, route: '/v1/inventory/:petId', path: '/v1/inventory/1'
  })
  assert.equal(server.resource['service.name'], 'petstore-under-test', 'OTEL_SERVICE_NAME')
  assert.equal(server.resource['deployment.environment.name'], 'test', 'OTEL_RESOURCE_ATTRIBUTES')
  assert.equal(typeof server.resource['service.version'], 'string')

  // docs/adr/0050-one-span-per-request-and-its-io.md: the gate and the handler are no spans of their own.
  assert.deepEqual(spans.filter((span) => span.name === 'gate' || span.name.startsWith('handler ')).map((span) => span.name), [])
  const write = spans.find((span) => span.name === 'store setQuantity')
  assert.ok(write !== undefined && write.parentSpanId === server.spanId, 'the store write under the server span')

  // The key's text in no attribute, event, status or link of anything the collector received.
  const secret = key.key.slice('psk_live_'.length)
  assert.ok(received.length > 0)
  for (const span of received) assert.ok(!JSON.stringify(span).includes(secret), `the key in ${span.name}`)
  assert.ok(!received.some((span) => span.attributes['url.path'] === '/healthz'), 'probes make no traces')
  return { spans, server, write }
}

describe('tracing with the embedded SQLite store', () => {
  test('when a traced caller PATCHes, then one trace shows the server span and the SQLite store\'s own spans under it; a graceful stop sends them', async (t) => {
    const receiver = await otlpReceiver(t)
    const cli = cliFor(t)
    const key = await prepared(cli)
    // Nothing is exported on a timer in this test: only the stop's flush sends the spans.
    const { base, server: serve } = await startServe(cli, [], tracingEnv(receiver, { OTEL_BSP_SCHEDULE_DELAY: '600000' }))
    const patched = await tracedPatch(base, key.key)
    // A key at its limit: the refusal's trace names the key and the decision.
    const created = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '1', '--per-day', '10', '--json'])
    const tight = JSON.parse(created.stdout) as { key: string, id: string }
    await tracedPatch(base, tight.key)
    const refusedTrace = randomBytes(16).toString('hex')
    const refused = await fetch(`${base}/v1/inventory/1`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${tight.key}`, 'content-type': 'application/json', traceparent: `00-${refusedTrace}-${randomBytes(8).toString('hex')}-01` },
      body: JSON.stringify({ quantity: 43 })
    })
    assert.equal(refused.status, 429)
    serve.child.kill('SIGTERM')
    assert.equal((await within(EXIT_TIMEOUT_MS, serve.exited, 'the server to stop')).code, 0)

    const { spans, server, write } = assertPatchTrace(await receiver.waitFor((spans) => spans.some(isServerSpanOf(patched))), patched, key)
    assert.equal(write.kind, SPAN_KIND.CLIENT)
    assert.equal(write.attributes['db.system.name'], 'sqlite')
    const commit = spans.find((span) => span.name === 'sqlite commit')
    assert.ok(commit !== undefined && commit.parentSpanId === write.spanId, 'the group commit under the write it serves')
    assert.equal(commit.attributes['petstore.sqlite.writes'], 1)
    const lookup = spans.find((span) => span.name === 'store findApiKeyByHash')
    assert.ok(lookup !== undefined && lookup.parentSpanId === server.spanId, 'the gate\'s key lookup under the server span')

    const limited = receiver.spans().find((span) => span.traceId === refusedTrace && span.kind === SPAN_KIND.SERVER)
    assert.deepEqual([limited?.attributes['petstore.key.id'], limited?.attributes['petstore.ratelimit.decision'], limited?.attributes['petstore.ratelimit.remaining'],
      limited?.attributes['http.response.status_code']], [tight.id, 'limited', 0, 429])
    assert.ok(!receiver.bodies().some((body) => body.includes(tight.key.slice('psk_live_'.length))), 'the key in nothing sent')
  })
})

describe('a collector that refuses or never answers', () => {
  /** A collector at a port of its own: every request answered 500, or left without an answer. */
  async function failingCollector (t: TestContext, how: 'refuses' | 'hangs'): Promise<{ endpoint: string, requests: () => number }> {
    let requests = 0
    const server = createServer((req, res) => {
      requests++
      req.resume()
      if (how === 'refuses') req.on('end', () => { res.writeHead(500).end() })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    t.after(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }))
    return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests }
  }

  for (const how of ['refuses', 'hangs'] as const) {
    test(`when the collector ${how === 'refuses' ? 'answers 500 to' : 'never answers'} the last spans, then a graceful stop still ends the process, within the export timeout, with a warning`, async (t) => {
      const collector = await failingCollector(t, how)
      const cli = cliFor(t)
      const key = await prepared(cli)
      const { base, server } = await startServe(cli, [], {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint, OTEL_EXPORTER_OTLP_TIMEOUT: '1000', OTEL_BSP_SCHEDULE_DELAY: '600000'
      })
      await tracedPatch(base, key.key)
      const stopping = Date.now()
      server.child.kill('SIGTERM')
      // The export timeout (1 s) and the thread's margin bound the stop; the deadline allows a loaded machine.
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'the server to stop'), { code: 0, signal: null })
      assert.ok(Date.now() - stopping < 10_000, `stopped after ${Date.now() - stopping} ms`)
      assert.ok(collector.requests() > 0, 'the last spans were sent')
      assert.match(server.output().stdout, /tracing did not stop cleanly: the last spans may be lost/)
    })
  }
})

describe('a setting the exporter refuses', () => {
  test('when the OTLP endpoint is no URL, then serve stops at start as a configuration error (exit 2), naming the reason, with no stack', { timeout: 60_000 }, async (t) => {
    const cli = cliFor(t)
    assert.equal((await cli.run(['migrate'])).code, 0)
    const started = await cli.run(['serve'], {
      PORT: '0', HOST: '127.0.0.1', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://[collector]:4317', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc'
    })
    assert.equal(started.code, 2, 'a configuration error')
    assert.match(started.stderr, /^petstore: invalid configuration: the OTLP exporter refuses its settings \(OTEL_EXPORTER_OTLP_\*\): Invalid URL\n$/)
  })
})

describe('sampling', () => {
  test('when OTEL_TRACES_SAMPLER follows the caller (parentbased_always_off), then only requests a caller sampled are traced', async (t) => {
    const receiver = await otlpReceiver(t)
    const cli = cliFor(t)
    const key = await prepared(cli)
    const { base } = await startServe(cli, [], tracingEnv(receiver, { OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_TRACES_SAMPLER: 'parentbased_always_off' }))
    const send = async (traceparent?: string) => {
      const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key.key}`, ...(traceparent === undefined ? {} : { traceparent }) } })
      assert.equal(res.status, 200)
    }
    await send()
    await send(`00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-00`)
    const sampled = randomBytes(16).toString('hex')
    await send(`00-${sampled}-${randomBytes(8).toString('hex')}-01`)
    const spans = await receiver.waitFor((spans) => spans.some((span) => span.traceId === sampled && span.kind === SPAN_KIND.SERVER))
    assert.deepEqual([...new Set(spans.map((span) => span.traceId))], [sampled], 'no trace of the requests the caller did not sample')
  })
})

const services = (await requirePostgres('tracing on PostgreSQL and Redis')) && (await requireRedis('tracing on PostgreSQL and Redis'))

if (services) {
  describe('tracing with PostgreSQL and the Redis limiter', () => {
    async function setup (t: TestContext): Promise<Cli> {
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      return cliFor(t, { DATABASE_URL: await tempPostgresDatabase(t), REDIS_URL, REDIS_KEY_PREFIX })
    }

    test('when a traced caller PATCHes, then one trace shows the server span, the limiter\'s Redis commands and the store with its pg queries under it', async (t) => {
      const receiver = await otlpReceiver(t)
      const cli = await setup(t)
      const key = await prepared(cli)
      const { base } = await startServe(cli, [], tracingEnv(receiver, { OTEL_BSP_SCHEDULE_DELAY: '50' }))
      const patched = await tracedPatch(base, key.key)

      const received = await receiver.waitFor((spans) => {
        const trace = spans.filter((span) => span.traceId === patched.traceId)
        return trace.some((span) => span.kind === SPAN_KIND.SERVER) && trace.some((span) => span.scope.includes('ioredis')) &&
          trace.some((span) => span.scope.includes('instrumentation-pg'))
      })
      const { spans, server, write } = assertPatchTrace(received, patched, key)
      assert.equal(write.kind, SPAN_KIND.INTERNAL, 'on PostgreSQL the client spans are pg\'s')

      const redis = spans.filter((span) => span.scope.includes('ioredis'))
      // The limiter's decisions, and the write's announcement to the other instances' listing caches.
      assert.ok(redis.some((span) => span.parentSpanId === server.spanId && /evalsha|eval/i.test(span.name)), `the limiter's Redis commands under the server span; got ${redis.map((s) => s.name).join(', ')}`)
      assert.ok(redis.every((span) => descendsFrom(spans, span, server.spanId)), 'every Redis command in the request\'s trace')
      assert.ok(redis.every((span) => span.kind === SPAN_KIND.CLIENT && span.attributes['db.system.name'] === 'redis'))
      // The command name only: a Redis key holds a key id or a client's address.
      for (const span of redis) assert.ok(!String(span.attributes['db.query.text'] ?? '').includes(':'), String(span.attributes['db.query.text']))

      const queries = spans.filter((span) => span.scope.includes('instrumentation-pg') && span.kind === SPAN_KIND.CLIENT)
      assert.ok(queries.some((span) => descendsFrom(spans, span, write.spanId) && /UPDATE/i.test(String(span.attributes['db.query.text']))),
        `an UPDATE under the store write; got ${queries.map((s) => `${s.name} ${String(s.attributes['db.query.text'])}`).join(' | ')}`)
      assert.ok(queries.every((span) => span.attributes['db.system.name'] === 'postgresql'))
    })
  })
}

/** The names of a process's threads (Linux; Node 24 and later name a worker thread after its `name`). */
function threadNames (pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim())
}

if (await requireRedis('tracing with serve --workers')) {
  describe('tracing with serve --workers', () => {
    test('when a cluster traces, then its workers export the spans and the primary, which serves nothing, holds no export thread', async (t) => {
      const receiver = await otlpReceiver(t)
      const cli = cliFor(t, { REDIS_URL, REDIS_KEY_PREFIX: redisKeyPrefix(t) })
      const key = await prepared(cli)
      const { base, server } = await startServe(cli, ['--workers', '2'], tracingEnv(receiver, { OTEL_BSP_SCHEDULE_DELAY: '50' }))
      const patched = await tracedPatch(base, key.key)
      const received = await receiver.waitFor((spans) => spans.some(isServerSpanOf(patched)))
      assertPatchTrace(received, patched, key)

      // Node 22 leaves every thread named after the process: which one exports cannot be told apart there.
      if (process.platform !== 'linux' || Number(process.versions.node.split('.')[0]) < 24) return
      const primary = server.child.pid as number
      const workers = readFileSync(`/proc/${primary}/task/${primary}/children`, 'utf8').trim().split(/\s+/).map(Number)
      assert.equal(workers.length, 2, 'two workers')
      assert.ok(!threadNames(primary).includes('span-export'), `the primary's threads: ${threadNames(primary).join(', ')}`)
      // The worker that answered has exported through its thread.
      assert.ok(workers.some((pid) => threadNames(pid).includes('span-export')), workers.map((pid) => threadNames(pid).join(', ')).join(' | '))
    })
  })
}
