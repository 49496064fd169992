/**
 * GET /metrics (Prometheus text format): what the counters and histograms show after real requests, what
 * they never show (key ids, keys, paths), the token guard, and the limiter and store gauges on real backends.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { describe, test, type TestContext } from 'node:test'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { AggregatorRegistry } from 'prom-client'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { Metrics } from '../../src/metrics/index.js'
import { createRedisClient, RedisLimiter } from '../../src/ratelimit/redis.js'
import { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { auth, newKey, pet, tempStore, testApp, type TestApp } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { KillableProxy } from '../helpers/proxy.js'
import { waitFor } from '../helpers/wait.js'
import { REDIS_URL, redisKeyPrefix, requireRedis, waitReady } from '../ratelimit/redis-env.js'

const TOKEN = 'metrics-token-for-tests-0123'

type Labels = Record<string, string>

interface Sample { name: string, labels: Labels, value: number }

/** Parses the text format's sample lines (comments skipped). */
function parse (text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    assert.ok(match !== null, `not a sample line: ${line}`)
    const labels: Labels = {}
    for (const [, name, value] of (match[2] ?? '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[name as string] = value as string
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) })
  }
  return samples
}

/** The sum of the samples named `name` whose labels include `labels`; undefined when there is none. */
function value (text: string, name: string, labels: Labels = {}): number | undefined {
  const matching = parse(text).filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  return matching.length === 0 ? undefined : matching.reduce((sum, s) => sum + s.value, 0)
}

async function scrape (request: TestApp['request'], headers: Record<string, string> = {}): Promise<string> {
  const res = await request({ method: 'GET', url: '/metrics', headers })
  assert.equal(res.statusCode, 200, res.body)
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/)
  return res.body
}

const get = (url: string, key?: string) => ({ method: 'GET' as const, url, headers: key === undefined ? {} : auth(key) })
const patch = (url: string, key: string, payload: string) =>
  ({ method: 'PATCH' as const, url, headers: { ...auth(key), 'content-type': 'application/json' }, payload })

describe('GET /metrics: requests', () => {
  test('when requests end in 200, 401, 404, 429 and a PATCH 400, then requests_total counts each by operation, method and status', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '4/1000', BAN_SECONDS: '0' }, { pets: [pet(1)] })
    assert.equal((await request(get('/v1/inventory', key))).statusCode, 200)
    assert.equal((await request(get('/v1/inventory'))).statusCode, 401)
    assert.equal((await request(get('/v1/no/such/thing', key))).statusCode, 404)
    assert.equal((await request(patch('/v1/inventory/1', key, '{"quantity":-1}'))).statusCode, 400)
    assert.equal((await request(get('/v1/inventory', key))).statusCode, 200)
    assert.equal((await request(get('/v1/inventory', key))).statusCode, 429)

    const text = await scrape(request)
    const requests = (labels: Labels) => value(text, 'petstore_http_requests_total', labels)
    assert.equal(requests({ operation: 'listInventory', method: 'GET', status: '200' }), 2)
    assert.equal(requests({ operation: 'listInventory', method: 'GET', status: '401' }), 1)
    assert.equal(requests({ operation: 'listInventory', method: 'GET', status: '429' }), 1)
    assert.equal(requests({ operation: 'updateInventory', method: 'PATCH', status: '400' }), 1)
    assert.equal(requests({ operation: 'unknown', method: 'GET', status: '404' }), 1)
  })

  test('when random paths are requested, then they are all labelled unknown and no path becomes a label', async (t) => {
    const { request, key } = await testApp(t)
    const paths = ['/wp-login.php', '/v1/inventory/x/y/z', '/v1/.env', `/${randomUUID()}`]
    for (const path of paths) assert.equal((await request(get(path, key))).statusCode, 404)

    const text = await scrape(request)
    assert.equal(value(text, 'petstore_http_requests_total', { operation: 'unknown', status: '404' }), paths.length)
    for (const path of paths) assert.ok(!text.includes(path), `${path} appears in the scrape`)
  })

  test('when a method is not allowed, then the 405 is labelled method_not_allowed; health, document and metrics have fixed names', async (t) => {
    const { request, key } = await testApp(t)
    assert.equal((await request({ method: 'DELETE', url: '/v1/inventory', headers: auth(key) })).statusCode, 405)
    assert.equal((await request(get('/healthz'))).statusCode, 200)
    assert.equal((await request(get('/readyz'))).statusCode, 200)
    assert.equal((await request(get('/v1/openapi.json'))).statusCode, 200)
    await scrape(request)

    const text = await scrape(request)
    const requests = (labels: Labels) => value(text, 'petstore_http_requests_total', labels)
    assert.equal(requests({ operation: 'method_not_allowed', method: 'DELETE', status: '405' }), 1)
    assert.equal(requests({ operation: 'healthz', status: '200' }), 1)
    assert.equal(requests({ operation: 'readyz', status: '200' }), 1)
    assert.equal(requests({ operation: 'openapi', status: '200' }), 1)
    assert.equal(requests({ operation: 'metrics', status: '200' }), 1, 'the previous scrape')
  })

  test('when requests were answered, then the latency histogram has their observations in cumulative buckets', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    for (let i = 0; i < 3; i++) await request(get('/v1/inventory', key))

    const text = await scrape(request)
    const labels = { operation: 'listInventory', method: 'GET' }
    assert.equal(value(text, 'petstore_http_request_duration_seconds_count', labels), 3)
    assert.ok((value(text, 'petstore_http_request_duration_seconds_sum', labels) ?? 0) > 0)
    assert.equal(value(text, 'petstore_http_request_duration_seconds_bucket', { ...labels, le: '+Inf' }), 3)
    const buckets = parse(text).filter((s) => s.name === 'petstore_http_request_duration_seconds_bucket' && s.labels.operation === 'listInventory')
    assert.ok(buckets.length > 5, 'several buckets')
    buckets.reduce((previous, s) => { assert.ok(s.value >= previous, 'buckets are cumulative'); return s.value }, 0)
  })
})

describe('GET /metrics: rate limiting', () => {
  test('when keys are allowed, limited and banned and clients without a key pass or are limited, then each decision is counted', async (t) => {
    const { request, key, store } = await testApp(t, { RATE_LIMIT_FREE: '2/1000', RATE_LIMIT_ANONYMOUS: '1/1000' }, { pets: [pet(1)] })
    // 2 allowed, then refusals: the first is no strike, the next two are (sent before the Retry-After passed),
    // and the 2nd strike (N = the per-minute limit) imposes the ban, which the last one meets.
    const statuses = []
    for (let i = 0; i < 6; i++) statuses.push((await request(get('/v1/inventory', key))).statusCode)
    assert.deepEqual(statuses, [200, 200, 429, 429, 429, 429])
    assert.equal((await request(get('/v1/inventory'))).statusCode, 401)
    assert.equal((await request(get('/v1/inventory'))).statusCode, 429)
    const other = await newKey(store)
    const first = await request(get('/v1/inventory', other))
    const revalidated = await request({ ...get('/v1/inventory', other), headers: { ...auth(other), 'if-none-match': String(first.headers.etag) } })
    assert.equal(revalidated.statusCode, 304)

    const text = await scrape(request)
    const decisions = (subject: string, decision: string) => value(text, 'petstore_ratelimit_decisions_total', { subject, decision })
    assert.equal(decisions('key', 'allowed'), 3)
    assert.equal(decisions('key', 'limited'), 2)
    assert.equal(decisions('key', 'banned'), 2, 'the refusal that imposed the ban and the one after it')
    assert.equal(decisions('key', 'not_modified'), 1)
    assert.equal(decisions('ip', 'allowed'), 1)
    assert.equal(decisions('ip', 'limited'), 1)
    assert.equal(value(text, 'petstore_ratelimit_bans_total'), 1)
  })

  test('when keys, key ids and client IPs were seen, then none of them appears in the scrape', async (t) => {
    const { request, key, store } = await testApp(t, { RATE_LIMIT_FREE: '1/1000', TRUST_PROXY: 'true' })
    const headers = { ...auth(key), 'x-forwarded-for': '203.0.113.77' }
    for (let i = 0; i < 3; i++) await request({ method: 'GET', url: '/v1/inventory', headers })
    await request({ method: 'GET', url: '/v1/inventory', headers: { 'x-forwarded-for': '198.51.100.9' } })
    const [record] = await store.keys.listApiKeys()

    const text = await scrape(request)
    assert.equal(value(text, 'petstore_ratelimit_bans_total'), 1)
    for (const secret of [key, record!.id, 'key_', 'psk_', '203.0.113.77', '198.51.100.9', '127.0.0.1']) {
      assert.ok(!text.includes(secret), `${secret} appears in the scrape`)
    }
  })

  test('when /metrics is scraped 200 times with the anonymous limit at 1/1, then every scrape answers 200 without rate-limit headers', async (t) => {
    const { request } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '1/1' })
    for (let i = 0; i < 200; i++) {
      const res = await request(get('/metrics'))
      assert.equal(res.statusCode, 200)
      assert.equal(res.headers['x-ratelimit-limit'], undefined)
      assert.equal(res.headers.ratelimit, undefined)
    }
    // The limit is in force for the API all along.
    assert.equal((await request(get('/v1/inventory'))).statusCode, 401)
    assert.equal((await request(get('/v1/inventory'))).statusCode, 429)
  })

  test('when the limiter is in process, then the backend gauge shows memory and no fallback', async (t) => {
    const { request } = await testApp(t)
    const text = await scrape(request)
    assert.equal(value(text, 'petstore_ratelimit_backend', { backend: 'memory' }), 1)
    assert.equal(value(text, 'petstore_ratelimit_backend', { backend: 'redis' }), 0)
    assert.equal(value(text, 'petstore_ratelimit_fallbacks_total'), 0)
  })
})

describe('GET /metrics: METRICS_TOKEN', () => {
  test('when a token is configured, then a scrape without it or with a wrong one gets 401 and the right one 200', async (t) => {
    const { request } = await testApp(t, { METRICS_TOKEN: TOKEN })
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}x` }, { authorization: 'Bearer short' }, { authorization: `Basic ${TOKEN}` }]) {
      const res = await request({ method: 'GET', url: '/metrics', headers })
      assert.equal(res.statusCode, 401, JSON.stringify(headers))
      assert.equal(res.json().code, 'unauthorized')
      assert.equal(res.json().status, 401)
      assert.match(String(res.headers['www-authenticate']), /^Bearer realm="metrics"/)
      assert.ok(!res.body.includes(TOKEN))
    }
    const text = await scrape(request, { authorization: `bearer ${TOKEN}` })
    assert.equal(value(text, 'petstore_http_requests_total', { operation: 'metrics', status: '401' }), 4)
  })

  test('when a token is configured, then an API key is no substitute for it', async (t) => {
    const { request, key } = await testApp(t, { METRICS_TOKEN: TOKEN })
    assert.equal((await request({ method: 'GET', url: '/metrics', headers: auth(key) })).statusCode, 401)
  })
})

describe('GET /metrics: METRICS_PORT', () => {
  test('when METRICS_PORT is set, then the main port has no /metrics and the API document does not list it', async (t) => {
    const { request } = await testApp(t, { METRICS_PORT: '9464' })
    const res = await request(get('/metrics'))
    assert.equal(res.statusCode, 404)
    assert.equal(res.json().code, 'not_found')
    const document = (await request(get('/v1/openapi.json'))).json() as { paths: Record<string, unknown> }
    assert.ok(!Object.keys(document.paths).some((path) => path.includes('metrics')))
  })
})

describe('GET /metrics: store', () => {
  test('when the API reads the store, then the store histogram has samples per store method', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    await request(get('/v1/inventory', key))
    await request(get('/v1/store/orders', key))

    const text = await scrape(request)
    for (const operation of ['inventoryPages', 'findApiKeyByHash', 'listOrders']) {
      assert.ok((value(text, 'petstore_store_operation_duration_seconds_count', { operation }) ?? 0) >= 1, operation)
      assert.equal(value(text, 'petstore_store_errors_total', { operation }), 0)
    }
    assert.ok(!parse(text).some((s) => s.labels.operation === 'poolStats'), 'synchronous members are not timed')
  })

  test('when a store call fails, then it is counted as a store error and still timed', async (t) => {
    const { request, key, store } = await testApp(t, {}, { pets: [pet(1)] })
    store.stock.inventoryPages = async function * () { yield * []; throw new Error('boom') }
    assert.equal((await request(get('/v1/inventory', key))).statusCode, 500)

    const text = await scrape(request)
    assert.equal(value(text, 'petstore_store_errors_total', { operation: 'inventoryPages' }), 1)
    assert.equal(value(text, 'petstore_store_operation_duration_seconds_count', { operation: 'inventoryPages' }), 1)
  })

  test('when the store is SQLite, then there are no pool samples', async (t) => {
    const { request } = await testApp(t)
    assert.equal(value(await scrape(request), 'petstore_store_pool_connections'), undefined)
  })

  test('when two apps run in one process, then each has its own registry', async (t) => {
    const a = await testApp(t, {}, { pets: [pet(1)] })
    const b = await testApp(t)
    await a.request(get('/v1/inventory', a.key))
    assert.equal(value(await scrape(b.request), 'petstore_http_requests_total', { operation: 'listInventory' }), undefined)
    assert.equal(value(await scrape(a.request), 'petstore_http_requests_total', { operation: 'listInventory' }), 1)
  })
})

describe('GET /metrics: build info', () => {
  test('when scraped, then petstore_build_info names the release (package.json\'s version) and the Node.js version, at 1', async (t) => {
    const { request } = await testApp(t)
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    const samples = parse(await scrape(request)).filter((s) => s.name === 'petstore_build_info')
    assert.deepEqual(samples, [{ name: 'petstore_build_info', labels: { version, node: process.version }, value: 1 }])
  })

  test('when the workers of a cluster are added up, then the build info is still 1', async () => {
    const workers = [new Metrics(), new Metrics(), new Metrics()]
    for (const worker of workers) worker.recordBan()
    const text = await AggregatorRegistry.aggregate(await Promise.all(workers.map((worker) => worker.registry.getMetricsAsJSON()))).metrics()
    assert.equal(value(text, 'petstore_build_info'), 1)
    assert.equal(value(text, 'petstore_ratelimit_bans_total'), 3, 'counters are still summed')
  })
})

describe('Metrics with process metrics', () => {
  test('when process metrics are on, then the standard process_ and nodejs_ series are exported', async () => {
    const text = await new Metrics({ processMetrics: true }).exposition()
    assert.ok((value(text, 'process_cpu_seconds_total') ?? -1) >= 0)
    assert.ok((value(text, 'nodejs_heap_size_used_bytes') ?? 0) > 0)
  })

  test('when a major garbage collection has run, then petstore_heap_after_gc_bytes is the heap it left', async () => {
    const metrics = new Metrics({ processMetrics: true })
    const afterGc = async () => value(await metrics.exposition(), 'petstore_heap_after_gc_bytes')
    assert.equal(await afterGc(), 0, 'nothing before a major collection')
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as (options?: { type: 'major' | 'minor' }) => void
    gc({ type: 'major' })
    // The entry reaches the observer shortly after the collection: wait for it.
    let after = 0
    await waitFor('the gauge set by the collection', async () => (after = await afterGc() ?? 0) > 0)
    const heap = process.memoryUsage().heapUsed
    assert.ok(after > 1e6 && after <= heap * 1.5, `${after} bytes after the collection, ${heap} in use now`)
  })
})

if (await requirePostgres('the pool gauges with PostgreSQL')) {
  describe('GET /metrics: PostgreSQL pool', () => {
    test('when the store is PostgreSQL, then the pool gauges show its max, open, idle and waiting connections', async (t) => {
      const store = await tempPostgresStore(t, { poolSize: 4 })
      const key = await newKey(store)
      const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })
      t.after(() => app.close())
      assert.equal((await app.inject(get('/v1/inventory', key))).statusCode, 200)

      // The key's last use is recorded off the request path (a store write that may still hold a connection just
      // after the answer): scrape until the pool is idle, which it must become.
      let res = await app.inject(get('/metrics'))
      const pool = (state: string) => value(res.body, 'petstore_store_pool_connections', { state })
      await waitFor('the pool idle', async () => {
        if (pool('idle') === pool('total')) return true
        res = await app.inject(get('/metrics'))
        return pool('idle') === pool('total')
      }, { intervalMs: 50 })
      assert.equal(pool('max'), 4)
      assert.ok((pool('total') ?? 0) >= 1 && (pool('total') ?? 0) <= 4)
      assert.equal(pool('idle'), pool('total'), 'no request in flight')
      assert.equal(pool('waiting'), 0)
      assert.ok((value(res.body, 'petstore_store_operation_duration_seconds_count', { operation: 'inventoryPages' }) ?? 0) >= 1)
    })
  })
}

if (await requireRedis('the limiter backend gauge with Redis')) {
  describe('GET /metrics: Redis limiter', () => {
    async function redisApp (t: TestContext, redisUrl: string) {
      const prefix = redisKeyPrefix(t)
      const client = createRedisClient(redisUrl)
      t.after(() => client.disconnect())
      await waitReady(client)
      const limiter = new ResilientLimiter({ redis: new RedisLimiter({ client, prefix }), logger: { warn: () => {}, info: () => {} }, retryAfterMs: 60_000 })
      t.after(() => limiter.close())
      const store = await tempStore(t)
      const key = await newKey(store)
      const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, limiter, logger: false })
      t.after(() => app.close())
      const scrapeApp = async () => (await app.inject(get('/metrics'))).body
      return { app, key, limiter, scrape: scrapeApp }
    }

    test('when Redis answers, then the backend gauge shows redis', async (t) => {
      const { app, key, scrape: scrapeApp } = await redisApp(t, REDIS_URL)
      assert.equal((await app.inject(get('/v1/inventory', key))).statusCode, 200)
      const text = await scrapeApp()
      assert.equal(value(text, 'petstore_ratelimit_backend', { backend: 'redis' }), 1)
      assert.equal(value(text, 'petstore_ratelimit_backend', { backend: 'memory' }), 0)
      assert.equal(value(text, 'petstore_ratelimit_fallbacks_total'), 0)
    })

    test('when Redis goes away, then the gauge shows memory and the fallback is counted', async (t) => {
      const target = new URL(REDIS_URL)
      const proxy = new KillableProxy({ host: target.hostname, port: Number(target.port || 6379) })
      await proxy.start()
      t.after(() => proxy.kill())
      const proxied = new URL(REDIS_URL)
      proxied.hostname = '127.0.0.1'
      proxied.port = String(proxy.port)
      const { app, key, limiter, scrape: scrapeApp } = await redisApp(t, proxied.toString())
      assert.equal(value(await scrapeApp(), 'petstore_ratelimit_backend', { backend: 'redis' }), 1)

      await proxy.kill()
      // The request is answered from memory, whether the client has noticed the closed connection yet or not.
      assert.equal((await app.inject(get('/v1/inventory', key))).statusCode, 200)
      await waitFor('the limiter on its fallback', () => limiter.backend === 'memory-fallback')

      const text = await scrapeApp()
      assert.equal(value(text, 'petstore_ratelimit_backend', { backend: 'memory' }), 1)
      assert.equal(value(text, 'petstore_ratelimit_backend', { backend: 'redis' }), 0)
      assert.equal(value(text, 'petstore_ratelimit_fallbacks_total'), 1)
    })
  })
}
