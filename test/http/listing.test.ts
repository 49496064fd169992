/**
 * GET /v1/inventory served from the listing cache, through the API: no store round trip while nothing changed
 * (the store counters of /metrics prove it), writes seen by the next GET as docs/scaling.md promises per deployment,
 * large listings byte-exact, and pages with limit and cursor.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import type { ChangeSignal } from '../../src/changes/types.js'
import { createRedisClient } from '../../src/ratelimit/redis.js'
import type { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, pet, testApp } from '../helpers/app.js'
import { nextPath } from '../helpers/links.js'
import { resilientRedis } from '../helpers/shared-redis.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { REDIS_URL, redisKeyPrefix, requireRedis, waitReady } from '../ratelimit/redis-env.js'

const get = (key: string, url = '/v1/inventory', headers: Record<string, string> = {}) => ({ method: 'GET' as const, url, headers: { ...auth(key), ...headers } })
const patch = (key: string, petId: number | bigint, quantity: number) => ({
  method: 'PATCH' as const, url: `/v1/inventory/${petId}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: JSON.stringify({ quantity })
})
/** The key lookup stays cached through a test, so the only store calls left are the listing's own. */
const WARM_KEYS = { AUTH_CACHE_TTL_MS: '60000' }

/** Store calls by operation, from the app's own /metrics. */
async function storeCalls (app: FastifyInstance): Promise<Record<string, number>> {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  const calls: Record<string, number> = {}
  for (const match of text.matchAll(/^petstore_store_operation_duration_seconds_count\{operation="(\w+)"\} (\d+)$/gm)) {
    calls[match[1] as string] = Number(match[2])
  }
  return calls
}

/** The listing as the store holds it, in the wire form. */
async function wire (store: Store): Promise<string> {
  return JSON.stringify((await store.stock.listInventory()).map((item) => ({ ...item, petId: Number(item.petId) })))
}

describe('GET /v1/inventory from the listing cache', () => {
  test('when nothing changed, then GETs cost no store call at all', async (t) => {
    const { app, key } = await testApp(t, WARM_KEYS, { pets: [pet(1), pet(2)] })
    assert.equal((await app.inject(get(key))).statusCode, 200)
    const before = await storeCalls(app)
    for (let i = 0; i < 25; i++) assert.equal((await app.inject(get(key))).statusCode, 200)
    assert.deepEqual(await storeCalls(app), before)
  })

  test('when this instance changes the stock, then the next GET shows it, patched in place without asking the store', async (t) => {
    const { app, key, store } = await testApp(t, WARM_KEYS, { pets: [pet(1), pet(2), pet(3)] })
    const first = await app.inject(get(key))
    assert.equal((await app.inject(patch(key, 2, 40))).statusCode, 200)
    const before = await storeCalls(app)
    const after = await app.inject(get(key))
    assert.equal(after.body, await wire(store))
    assert.equal(after.json()[1].quantity, 40)
    assert.notEqual(after.headers.etag, first.headers.etag)
    assert.equal(after.headers.etag, `"inv-${await store.stock.inventoryVersion()}"`, 'the tag names the store version of these bytes')
    assert.deepEqual(await storeCalls(app), before)
  })

  test('when the listing is large, then its bytes and Content-Length are exact, before and after changes', async (t) => {
    const pets = Array.from({ length: 6000 }, (_, i) => pet(i * 2 + 1, { quantity: i % 1000, status: (['available', 'pending', 'sold'] as const)[i % 3] }))
    const { app, key, store } = await testApp(t, WARM_KEYS, { pets })
    const first = await app.inject(get(key))
    assert.equal(first.body, await wire(store))
    assert.equal(Number(first.headers['content-length']), Buffer.byteLength(first.body))
    for (const petId of [1, 4095, 4097, 11_999]) assert.equal((await app.inject(patch(key, petId, 1_000_000_000))).statusCode, 200)
    const after = await app.inject(get(key))
    assert.equal(after.body, await wire(store))
    assert.equal(Number(after.headers['content-length']), Buffer.byteLength(after.body))
    assert.equal((await app.inject({ ...get(key), method: 'HEAD' })).headers['content-length'], after.headers['content-length'])
  })

  test('when a client pages with limit, then following rel="next" yields every entry once, in order, and pages carry no ETag', async (t) => {
    const { app, key, store } = await testApp(t, WARM_KEYS, { pets: Array.from({ length: 23 }, (_, i) => pet(i + 1)) })
    const seen: unknown[] = []
    let url: string | null = '/v1/inventory?limit=5'
    let pages = 0
    while (url !== null) {
      const res: Awaited<ReturnType<FastifyInstance['inject']>> = await app.inject(get(key, url))
      assert.equal(res.statusCode, 200)
      assert.equal(res.headers.etag, undefined)
      seen.push(...res.json())
      pages++
      url = nextPath(res.headers.link, url)
      if (url !== null) assert.match(url, /^\/v1\/inventory\?limit=5&cursor=[\w-]+$/)
    }
    assert.equal(pages, 5)
    assert.equal(JSON.stringify(seen), await wire(store))
  })

  test('when a page is asked with If-None-Match of the whole listing, then it is answered and counted (no 304 for pages)', async (t) => {
    const { app, key } = await testApp(t, WARM_KEYS, { pets: [pet(1), pet(2)] })
    const whole = await app.inject(get(key))
    const res = await app.inject(get(key, '/v1/inventory?limit=1', { 'if-none-match': String(whole.headers.etag) }))
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, '[{"petId":1,"quantity":1,"status":"available"}]')
    assert.equal(Number(res.headers['x-ratelimit-remaining']), Number(whole.headers['x-ratelimit-remaining']) - 1)
  })

  test('when limit or cursor is not valid, then 400 with the Error body and nothing else is answered', async (t) => {
    const { app, key } = await testApp(t, WARM_KEYS, { pets: [pet(1)] })
    const orderCursor = Buffer.from('o1:1').toString('base64url')
    for (const query of ['limit=0', 'limit=1001', 'limit=x', 'limit=1.5', 'cursor=', 'cursor=abc', `cursor=${orderCursor}`, `cursor=${'a'.repeat(65)}`]) {
      const res = await app.inject(get(key, `/v1/inventory?${query}`))
      assert.equal(res.statusCode, 400, query)
      assert.equal(res.json().code, 'invalid_request', query)
      assert.equal(res.json().status, 400, query)
    }
  })

  test('when only a cursor is given, then pages have the default size of 100', async (t) => {
    const { app, key } = await testApp(t, WARM_KEYS, { pets: Array.from({ length: 150 }, (_, i) => pet(i + 1)) })
    const cursor = Buffer.from('i1:10').toString('base64url')
    const res = await app.inject(get(key, `/v1/inventory?cursor=${cursor}`))
    assert.equal(res.json().length, 100)
    assert.equal(res.json()[0].petId, 11)
    assert.match(String(res.headers.link), /limit=100&cursor=/)
  })
})

if (await requirePostgres('the listing cache on PostgreSQL')) {
  /** Two instances on one PostgreSQL schema, each with the given limiter and change signal (or the in-process limiter). */
  async function twoInstances (t: TestContext, limiter: () => { limiter: ResilientLimiter, changes: ChangeSignal } | undefined) {
    const schema = await tempSchema(t)
    const stores = [new PostgresStore(POSTGRES_URL, { schema }), new PostgresStore(POSTGRES_URL, { schema })] as const
    t.after(() => Promise.all(stores.map((store) => store.close())))
    await stores[0].schema.migrate()
    await importData(stores[0], { pets: [pet(1), pet(2)], orders: [] })
    const key = await newKey(stores[0])
    const apps = await Promise.all(stores.map(async (store) => {
      const shared = limiter()
      const app = await buildApp(loadConfig(WARM_KEYS), { store, logger: false, ...shared })
      t.after(() => app.close())
      return app
    }))
    return { one: apps[0] as FastifyInstance, two: apps[1] as FastifyInstance, store: stores[0], key }
  }

  describe('GET /v1/inventory on PostgreSQL without Redis', () => {
    test('when another instance changes the stock, then the next GET here shows it (the version is read on every GET)', async (t) => {
      const { one, two, key } = await twoInstances(t, () => undefined)
      assert.equal((await one.inject(get(key))).json()[0].quantity, 1)
      for (let i = 2; i < 6; i++) {
        assert.equal((await two.inject(patch(key, 1, i))).statusCode, 200)
        assert.equal((await one.inject(get(key))).json()[0].quantity, i)
      }
      const before = await storeCalls(one)
      await one.inject(get(key))
      const after = await storeCalls(one)
      assert.equal((after.inventoryVersion ?? 0) - (before.inventoryVersion ?? 0), 1, 'one version read per GET')
      assert.equal(after.inventoryPages, before.inventoryPages, 'no rebuild while unchanged')
    })
  })

  if (await requireRedis('the listing cache with the Redis change signal')) {
    describe('GET /v1/inventory on PostgreSQL with Redis', () => {
      const clients: Array<ReturnType<typeof createRedisClient>> = []
      function redisLimiter (t: TestContext, prefix: string): { limiter: ResilientLimiter, changes: ChangeSignal } {
        const client = createRedisClient(REDIS_URL)
        clients.push(client)
        t.after(() => client.disconnect())
        const shared = resilientRedis(client, prefix, { logger: { warn: () => {}, info: () => {} } })
        t.after(() => shared.limiter.close())
        return shared
      }

      test('when a write is acknowledged by one instance, then every GET that starts after it, on any instance, shows it; unchanged GETs cost no PostgreSQL call', async (t) => {
        const prefix = redisKeyPrefix(t)
        const { one, two, key, store } = await twoInstances(t, () => redisLimiter(t, prefix))
        await Promise.all(clients.map(waitReady))
        for (const app of [one, two]) await app.inject(get(key))

        for (let i = 10; i < 16; i++) {
          const [writer, reader] = i % 2 === 0 ? [one, two] : [two, one]
          assert.equal((await writer.inject(patch(key, 2, i))).statusCode, 200)
          const seen = await reader.inject(get(key))
          assert.equal(seen.json()[1].quantity, i)
          assert.equal(seen.headers.etag, `"inv-${await store.stock.inventoryVersion()}"`)
        }

        // The last writer's own listing catches up once (on PostgreSQL a write does not report its version).
        for (const app of [one, two]) await app.inject(get(key))
        const before = await Promise.all([storeCalls(one), storeCalls(two)])
        for (let i = 0; i < 20; i++) {
          assert.equal((await one.inject(get(key))).statusCode, 200)
          assert.equal((await two.inject(get(key))).statusCode, 200)
        }
        assert.deepEqual(await Promise.all([storeCalls(one), storeCalls(two)]), before, 'no store call while nothing changed')
      })
    })
  }
}
