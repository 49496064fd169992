import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { RedisLimiter } from '../../src/ratelimit/redis.js'
import { StoreUnavailableError } from '../../src/errors.js'
import { auth, newKey, pet, tempStore, testApp } from '../helpers/app.js'
import { requireRedis, tempRedis } from '../ratelimit/redis-env.js'
import { importData } from '../../src/domain/import.js'

// testApp's clock starts at 2026-11-22T12:00:00Z: the start of a UTC minute, 12 hours into the UTC day.
const T0 = Date.parse('2026-11-22T12:00:00Z') / 1000
const NEXT_MINUTE = T0 + 60
const NEXT_DAY = Date.parse('2026-11-23T00:00:00Z') / 1000

const get = (key?: string, url = '/v1/inventory') => ({ method: 'GET' as const, url, headers: key === undefined ? {} : auth(key) })

function limitHeaders (headers: Record<string, unknown>) {
  return {
    limit: headers['x-ratelimit-limit'],
    remaining: headers['x-ratelimit-remaining'],
    reset: headers['x-ratelimit-reset']
  }
}

describe('rate-limit headers', () => {
  test('when a request passes, then it carries the binding window and both IETF fields', async (t) => {
    const { request, key, clock } = await testApp(t)
    clock.now += 19_000 // 12:00:19
    const res = await request(get(key))
    assert.equal(res.statusCode, 200)
    assert.deepEqual(limitHeaders(res.headers), { limit: '60', remaining: '59', reset: String(NEXT_MINUTE) })
    assert.equal(res.headers['ratelimit-policy'], '"minute";q=60;w=60, "day";q=1000;w=86400')
    assert.equal(res.headers.ratelimit, `"minute";r=59;t=41, "day";r=999;t=${NEXT_DAY - T0 - 19}`)
    assert.equal(res.headers['retry-after'], undefined)
  })

  test('when keys of different limits take turns, then each answer states its own key\'s policy', async (t) => {
    const { request, key, store } = await testApp(t)
    const other = await newKey(store, 'enterprise', { perMinute: 7, perDay: 70 })
    const policies: string[] = []
    for (const k of [key, other, other, key, other]) policies.push(String((await request(get(k))).headers['ratelimit-policy']))
    const free = '"minute";q=60;w=60, "day";q=1000;w=86400'
    const mine = '"minute";q=7;w=60, "day";q=70;w=86400'
    assert.deepEqual(policies, [free, mine, mine, free, mine])
  })

  test('when the day has fewer requests left than the minute, then the headers describe the day', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '5/6' })
    for (let i = 0; i < 3; i++) await request(get(key))
    const res = await request(get(key))
    // minute: 1 left; day: 2 left -> the minute binds.
    assert.deepEqual(limitHeaders(res.headers), { limit: '5', remaining: '1', reset: String(NEXT_MINUTE) })
  })

  test('when both windows have the same remaining, then the headers describe the one that resets later', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '5/5' })
    const res = await request(get(key))
    assert.deepEqual(limitHeaders(res.headers), { limit: '5', remaining: '4', reset: String(NEXT_DAY) })
  })

  const statuses: Array<[string, number, (app: Awaited<ReturnType<typeof testApp>>) => Promise<{ statusCode: number, headers: Record<string, unknown> }>]> = [
    ['400', 400, ({ request, key }) => request(get(key, '/v1/store/orders?limit=0'))],
    ['401', 401, ({ request }) => request(get())],
    ['404 (unknown /v1 path)', 404, ({ request, key }) => request(get(key, '/v1/nope'))],
    ['404 (no entry)', 404, ({ request, key }) => request({ method: 'PATCH', url: '/v1/inventory/99', headers: { ...auth(key), 'content-type': 'application/json' }, payload: '{"quantity":1}' })],
    ['405', 405, ({ request, key }) => request({ method: 'DELETE', url: '/v1/inventory', headers: auth(key) })],
    ['410', 410, async ({ request, key, clock }) => { clock.now = Date.parse('2030-01-01T00:00:00Z'); return request(get(key, '/v1/pets/1')) }],
    ['413', 413, ({ request, key }) => request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload: 'x'.repeat(20_000) })],
    ['415', 415, ({ request, key }) => request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'text/plain' }, payload: 'x' })],
    ['500', 500, async ({ request, key, store }) => { store.stock.inventoryPages = async function * () { yield * []; throw new Error('boom') }; return request(get(key)) }],
    ['503', 503, async ({ request, key, store }) => { store.stock.inventoryPages = async function * () { yield * []; throw new StoreUnavailableError('down') }; return request(get(key)) }],
    ['503 (store down while authenticating)', 503, async ({ request, key, store }) => { store.keys.findApiKeyByHash = async () => { throw new StoreUnavailableError('down') }; return request(get(key)) }]
  ]
  for (const [name, status, send] of statuses) {
    test(`when the answer is ${name}, then it carries the rate-limit headers`, async (t) => {
      const app = await testApp(t, {}, { pets: [pet(1)] })
      const res = await send(app)
      assert.equal(res.statusCode, status)
      assert.match(String(res.headers['x-ratelimit-limit']), /^\d+$/)
      assert.match(String(res.headers['x-ratelimit-remaining']), /^\d+$/)
      assert.match(String(res.headers['x-ratelimit-reset']), /^\d{10}$/)
      assert.match(String(res.headers['ratelimit-policy']), /^"minute";q=\d+;w=60, "day";q=\d+;w=86400$/)
      assert.match(String(res.headers.ratelimit), /^"minute";r=\d+;t=\d+, "day";r=\d+;t=\d+$/)
    })
  }

  test('when the API document or the health endpoints are called, then they are not limited', async (t) => {
    const { request } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '1/1' })
    for (const url of ['/v1/openapi.json', '/healthz', '/readyz', '/v1/openapi.json', '/healthz']) {
      const res = await request({ method: 'GET', url })
      assert.equal(res.statusCode, 200, url)
      assert.equal(res.headers['x-ratelimit-limit'], undefined)
    }
  })
})

describe('429 rate_limited', () => {
  test('when N+k requests arrive at once, then exactly N pass and the rest get 429 with Retry-After', async (t) => {
    const { request, key, clock } = await testApp(t, { RATE_LIMIT_FREE: '5/100', BAN_SECONDS: '0' })
    clock.now += 45_500 // 12:00:45.5 -> the minute resets in 14.5 s
    const responses = await Promise.all(Array.from({ length: 12 }, () => request(get(key))))
    assert.equal(responses.filter((r) => r.statusCode === 200).length, 5)
    const refused = responses.filter((r) => r.statusCode === 429)
    assert.equal(refused.length, 7)
    for (const res of refused) {
      assert.deepEqual(res.json(), { code: 'rate_limited', message: 'Rate limit of 5 requests per minute exceeded; retry in 15 s.', status: 429 })
      assert.equal(res.headers['retry-after'], '15')
      assert.deepEqual(limitHeaders(res.headers), { limit: '5', remaining: '0', reset: String(NEXT_MINUTE) })
      assert.equal(res.headers.ratelimit, `"minute";r=0;t=15, "day";r=95;t=${NEXT_DAY - T0 - 45}`)
    }
  })

  test('when requests were refused, then they consumed nothing: the next minute admits N again and the day counted only successes', async (t) => {
    const { request, key, clock } = await testApp(t, { RATE_LIMIT_FREE: '3/100', BAN_SECONDS: '0' })
    for (let i = 0; i < 10; i++) await request(get(key))
    clock.now += 60_000
    const statuses = []
    for (let i = 0; i < 4; i++) statuses.push((await request(get(key))).statusCode)
    assert.deepEqual(statuses, [200, 200, 200, 429])
    const res = await request(get(key))
    assert.match(String(res.headers.ratelimit), /"day";r=94;/)
  })

  test('when the day quota is used up, then 429 describes the day window and Retry-After runs to UTC midnight', async (t) => {
    const { request, key, clock } = await testApp(t, { RATE_LIMIT_FREE: '5/7' })
    for (let i = 0; i < 5; i++) assert.equal((await request(get(key))).statusCode, 200)
    clock.now += 60_000
    for (let i = 0; i < 2; i++) assert.equal((await request(get(key))).statusCode, 200)
    const res = await request(get(key))
    assert.equal(res.statusCode, 429)
    assert.deepEqual(limitHeaders(res.headers), { limit: '7', remaining: '0', reset: String(NEXT_DAY) })
    assert.equal(res.headers['retry-after'], String(NEXT_DAY - T0 - 60))
    assert.match(res.json().message, /7 requests per day/)
    clock.now = NEXT_DAY * 1000
    assert.equal((await request(get(key))).statusCode, 200)
  })

  test('when both windows are exhausted, then the 429 describes the one that resets later', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '3/3' })
    for (let i = 0; i < 3; i++) await request(get(key))
    const res = await request(get(key))
    assert.deepEqual(limitHeaders(res.headers), { limit: '3', remaining: '0', reset: String(NEXT_DAY) })
  })

  test('when an enterprise key is used, then its own limits apply', async (t) => {
    const { request, store } = await testApp(t)
    const key = await newKey(store, 'enterprise')
    const res = await request(get(key))
    assert.deepEqual(limitHeaders(res.headers), { limit: '100000', remaining: '99999', reset: String(NEXT_MINUTE) })
  })

  test('when two keys are used, then each has its own windows', async (t) => {
    const { request, store, key } = await testApp(t, { RATE_LIMIT_FREE: '2/100' })
    const other = await newKey(store)
    for (let i = 0; i < 3; i++) await request(get(key))
    assert.equal((await request(get(other))).statusCode, 200)
  })
})

describe('requests without a valid key', () => {
  test('when no key is sent, then the 401 carries the per-IP limits', async (t) => {
    const { request } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '4/50' })
    const res = await request(get())
    assert.equal(res.statusCode, 401)
    assert.deepEqual(limitHeaders(res.headers), { limit: '4', remaining: '3', reset: String(NEXT_MINUTE) })
  })

  test('when an IP exceeds its limit without a valid key, then it gets 429 instead of 401', async (t) => {
    const { request } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '2/50' })
    const statuses = []
    for (const header of [undefined, 'psk_live_unknown', undefined]) statuses.push((await request(get(header))).statusCode)
    assert.deepEqual(statuses, [401, 401, 429])
  })

  test('when unauthenticated requests are refused, then no key is charged for them', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '2/50' })
    for (let i = 0; i < 5; i++) await request(get())
    const res = await request(get(key))
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['x-ratelimit-remaining'], '59')
  })

  test('when TRUST_PROXY is off, then X-Forwarded-For does not choose the bucket', async (t) => {
    const { request } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '1/50' })
    const first = await request({ ...get(), headers: { 'x-forwarded-for': '203.0.113.1' } })
    const second = await request({ ...get(), headers: { 'x-forwarded-for': '203.0.113.2' } })
    assert.deepEqual([first.statusCode, second.statusCode], [401, 429])
  })

  test('when a flood of keyless requests from distinct addresses fills the limiter, then a key keeps its spent windows and its strikes', async (t) => {
    const { request, key, store } = await testApp(t, { TRUST_PROXY: 'true', RATE_LIMIT_MAX_SUBJECTS: '1000', RATE_LIMIT_FREE: '60/1000' })
    for (let i = 0; i < 60; i++) assert.equal((await request(get(key))).statusCode, 200)
    assert.equal((await request(get(key))).json().code, 'rate_limited')
    assert.equal((await request(get(key))).json().code, 'rate_limited', 'strike 1')
    for (let i = 0; i < 1500; i++) {
      await request({ ...get(), headers: { 'x-forwarded-for': `198.51.${(i >> 8) & 255}.${i & 255}` } })
    }
    const after = await request(get(key))
    assert.equal(after.statusCode, 429, 'the key still has no requests left this minute')
    assert.equal(after.headers['x-ratelimit-remaining'], '0')
    for (let i = 0; i < 58; i++) await request(get(key))
    assert.equal((await request(get(key))).json().code, 'key_banned', 'the strikes before the flood still count')
    const [record] = await store.keys.listApiKeys()
    assert.ok(record?.ban !== null)
  })

  test('when keyless requests come from many addresses of one IPv6 network, then they share the network\'s limit', async (t) => {
    const { request } = await testApp(t, { TRUST_PROXY: 'true', RATE_LIMIT_ANONYMOUS: '3/100' })
    const statuses = []
    for (let i = 1; i <= 5; i++) statuses.push((await request({ ...get(), headers: { 'x-forwarded-for': `2001:db8:0:${i.toString(16)}::${i}` } })).statusCode)
    assert.deepEqual(statuses, [401, 401, 401, 429, 429])
    const otherNetwork = await request({ ...get(), headers: { 'x-forwarded-for': '2001:db8:1::1' } })
    assert.equal(otherNetwork.statusCode, 401)
  })

  test('when TRUST_PROXY is on, then each forwarded client IP has its own bucket', async (t) => {
    const { request } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '1/50', TRUST_PROXY: 'true' })
    const statuses = []
    for (const ip of ['203.0.113.1', '203.0.113.2', '203.0.113.1']) {
      statuses.push((await request({ ...get(), headers: { 'x-forwarded-for': ip } })).statusCode)
    }
    assert.deepEqual(statuses, [401, 401, 429])
  })
})

describe('bans', () => {
  test('when a key keeps sending before the Retry-After of its 429 has passed, then the Nth strike bans it for 15 minutes', async (t) => {
    const { request, key, clock } = await testApp(t, { RATE_LIMIT_FREE: '3/1000' })
    const statuses = []
    for (let i = 0; i < 7; i++) statuses.push((await request(get(key))).json().code ?? 200)
    // The first 429 is no strike (the client could not know); the three after it are (N = the per-minute limit).
    assert.deepEqual(statuses, [200, 200, 200, 'rate_limited', 'rate_limited', 'rate_limited', 'key_banned'])
    clock.now += 61_000
    const banned = await request(get(key))
    assert.equal(banned.statusCode, 429)
    assert.equal(banned.json().code, 'key_banned')
    assert.equal(banned.headers['retry-after'], String(900 - 61))
    clock.now += (900 - 61) * 1000
    assert.equal((await request(get(key))).statusCode, 200)
  })

  test('when a banned key is answered, then Remaining is 0 and Reset, RateLimit and Retry-After all name the ban\'s end', async (t) => {
    const { request, key, clock } = await testApp(t, { RATE_LIMIT_FREE: '1/1000' })
    for (let i = 0; i < 3; i++) await request(get(key))
    const banEnd = T0 + 900
    // Also after the minute window has rolled over, and at a fractional second.
    for (const elapsed of [0, 61_500, 600_250]) {
      clock.now = T0 * 1000 + elapsed
      const res = await request(get(key))
      assert.equal(res.json().code, 'key_banned')
      const wait = banEnd - Math.floor(clock.now / 1000)
      assert.deepEqual(limitHeaders(res.headers), { limit: '1', remaining: '0', reset: String(banEnd) }, `after ${elapsed} ms`)
      assert.equal(res.headers['retry-after'], String(wait))
      assert.equal(res.headers.ratelimit, `"minute";r=0;t=${wait}, "day";r=0;t=${wait}`)
      assert.equal(res.headers['ratelimit-policy'], '"minute";q=1;w=60, "day";q=1000;w=86400')
    }
  })

  test('when the strike that triggers the ban is answered, then it already says key_banned', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '1/1000' })
    await request(get(key))
    assert.equal((await request(get(key))).json().code, 'rate_limited')
    const res = await request(get(key))
    assert.equal(res.json().code, 'key_banned')
    assert.equal(res.headers['retry-after'], '900')
  })

  test('when a client waits exactly the Retry-After of every 429, then it is never banned, whatever its limits', async (t) => {
    const { request, store, clock } = await testApp(t)
    const key = await newKey(store, 'enterprise', { perMinute: 2, perDay: 3 })
    const codes: Array<string | number> = []
    for (let i = 0; i < 8; i++) {
      const res = await request(get(key))
      codes.push(res.statusCode === 200 ? 200 : res.json().code)
      if (res.statusCode === 429) clock.now += Number(res.headers['retry-after']) * 1000
    }
    // Minute spent, waited; day spent, waited until midnight; and so on: refused as told, never banned.
    assert.deepEqual(codes, [200, 200, 'rate_limited', 200, 'rate_limited', 200, 200, 'rate_limited'])
    assert.deepEqual((await store.keys.listApiKeys()).map((k) => k.ban), [null, null])
  })

  test('when a key is banned again within 24 hours, then the ban doubles', async (t) => {
    const { request, key, clock, store } = await testApp(t, { RATE_LIMIT_FREE: '1/1000' })
    for (let i = 0; i < 3; i++) await request(get(key)) // banned 900 s
    clock.now += 900_000 + 60_000
    for (let i = 0; i < 2; i++) await request(get(key))
    const second = await request(get(key))
    assert.equal(second.json().code, 'key_banned')
    assert.equal(second.headers['retry-after'], '1800')
    const [record] = await store.keys.listApiKeys()
    assert.equal(record?.ban?.seconds, 1800)
  })

  test('when an operator lifts the ban, then the key is served again', async (t) => {
    const { request, key, clock, store } = await testApp(t, { RATE_LIMIT_FREE: '1/1000' })
    for (let i = 0; i < 3; i++) await request(get(key))
    const [record] = await store.keys.listApiKeys()
    assert.ok(record?.ban !== null, 'banned')
    await store.keys.unbanApiKey(record!.id, new Date(clock.now))
    clock.now += 60_000
    assert.equal((await request(get(key))).statusCode, 200)
  })

  test('when bans are switched off, then refusals stay rate_limited', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '1/1000', BAN_SECONDS: '0' })
    await request(get(key))
    for (let i = 0; i < 5; i++) assert.equal((await request(get(key))).json().code, 'rate_limited')
  })

  test('when requests without a key are refused, then nothing is banned', async (t) => {
    const { request, store } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '1/1000' })
    for (let i = 0; i < 10; i++) await request(get())
    const [record] = await store.keys.listApiKeys()
    assert.equal(record?.ban, null)
  })
})

if (await requireRedis('rate limiting across instances through Redis')) {
  describe('two instances sharing Redis', () => {
    test('when requests are spread over two instances, then exactly N pass in total', async (t) => {
      const { client, prefix } = await tempRedis(t)
      const store = await tempStore(t)
      await importData(store, { pets: [pet(1)], orders: [] })
      const key = await newKey(store)
      const config = loadConfig({ RATE_LIMIT_FREE: '10/1000', AUTH_CACHE_TTL_MS: '0' })
      const apps = await Promise.all([0, 1].map(() => buildApp(config, { store, logger: false, limiter: new RedisLimiter({ client, prefix }) })))
      t.after(() => Promise.all(apps.map((app) => app.close())))
      const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => apps[i % 2]!.inject(get(key))))
      // A minute boundary may fall inside the burst: allow the two windows it touches, never more.
      const passed = responses.filter((r) => r.statusCode === 200).length
      assert.ok(passed === 10 || (passed > 10 && passed <= 20), `passed ${passed}`)
      assert.equal(responses.filter((r) => r.statusCode === 429).length, 30 - passed)
    })
  })
}
