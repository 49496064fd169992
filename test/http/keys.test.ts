/**
 * Keys as API users meet them: scopes (403 insufficient_scope), expiry (401), rotation with overlap sharing one
 * quota, last use, and GET /v1/rate_limit, through HTTP on both stores and both limiters.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test, type TestContext } from 'node:test'
import { isDeepStrictEqual } from 'node:util'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createKey, hashKey, rotateKey } from '../../src/access/keys.js'
import { createRedisClient, RedisLimiter } from '../../src/ratelimit/redis.js'
import type { RateLimiter } from '../../src/ratelimit/types.js'
import type { Store } from '../../src/store/store.js'
import { importData } from '../../src/domain/import.js'
import type { KeyScope } from '../../src/model.js'
import { auth, pet, tempStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { waitFor } from '../helpers/wait.js'
import { REDIS_URL, redisKeyPrefix, requireRedis, waitReady } from '../ratelimit/redis-env.js'

const T0 = Date.parse('2026-11-23T12:00:00Z')

interface Instance { app: FastifyInstance, clock: { now: number } }

/** An instance on `store`, with the given limiter (default: in process) and environment. */
async function instance (t: TestContext, store: Store, env: Record<string, string> = {}, limiter?: RateLimiter, clock = { now: T0 }): Promise<Instance> {
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0', ...env }),
    { store, logger: false, clock: () => clock.now, ...(limiter === undefined ? {} : { limiter }) })
  t.after(() => app.close())
  return { app, clock }
}

async function redisLimiter (t: TestContext): Promise<RateLimiter> {
  const prefix = redisKeyPrefix(t)
  const client = createRedisClient(REDIS_URL)
  t.after(() => client.disconnect())
  await waitReady(client)
  return new RedisLimiter({ client, prefix })
}

async function key (store: Store, scope: KeyScope, options: { expiresAt?: Date, plan?: 'free' | 'pro' } = {}): Promise<{ id: string, key: string }> {
  const { record, key } = await createKey(store, 'production', { plan: options.plan ?? 'free', name: 'test', perMinute: null, perDay: null, scope, expiresAt: options.expiresAt ?? null }, new Date(T0 - 1000))
  return { id: record.id, key }
}

const json = { 'content-type': 'application/json' }
const writes = [
  { method: 'PATCH' as const, url: '/v1/inventory/1', payload: { quantity: 7 } },
  { method: 'POST' as const, url: '/v1/inventory/1/adjustments', payload: { delta: 2 } },
  { method: 'POST' as const, url: '/v1/inventory/batch', payload: { changes: [{ petId: 1, quantity: 9 }] } }
]

/** Where the limiter lives: in process, or Redis (skipped without Redis outside CI, failing in CI). */
const limiters: Array<['in-process' | 'redis', (t: TestContext) => Promise<RateLimiter | undefined>]> = [
  ['in-process', async () => undefined],
  ['redis', async (t) => await redisLimiter(t)]
]
const redisUp = await requireRedis('keys over HTTP with the Redis limiter')

for (const [limiterName, makeLimiter] of limiters) {
  if (limiterName === 'redis' && !redisUp) continue
  describe(`keys over HTTP (${limiterName} limiter)`, () => {
    test('when a read-only key calls each write, then it gets 403 insufficient_scope with the RFC 6750 challenge, is counted, and nothing changes', async (t) => {
      const store = await tempStore(t)
      await importData(store, { pets: [pet(1, { quantity: 5 })], orders: [] })
      const { app } = await instance(t, store, { RATE_LIMIT_FREE: '10/100' }, await makeLimiter(t))
      const reader = await key(store, 'read')
      let remaining = 10
      for (const write of writes) {
        const res = await app.inject({ ...write, headers: { ...auth(reader.key), ...json } })
        assert.equal(res.statusCode, 403, write.url)
        assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore", error="insufficient_scope", scope="inventory:write"')
        assert.deepEqual(res.json(), {
          code: 'insufficient_scope', message: 'This operation needs an API key with the inventory:write scope; this key has inventory:read.', status: 403
        })
        assert.equal(res.headers['x-ratelimit-remaining'], String(--remaining), 'counted like any request')
      }
      const read = await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(reader.key) })
      assert.equal(read.statusCode, 200)
      assert.equal(read.body, '[{"petId":1,"quantity":5,"status":"available"}]', 'no write applied')
      assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((e) => e.reason), ['import'])
    })

    test('when a write key calls a write, then it applies', async (t) => {
      const store = await tempStore(t)
      await importData(store, { pets: [pet(1, { quantity: 5 })], orders: [] })
      const { app } = await instance(t, store, {}, await makeLimiter(t))
      const writer = await key(store, 'write')
      const res = await app.inject({ ...writes[0] as typeof writes[number], headers: { ...auth(writer.key), ...json } })
      assert.equal(res.statusCode, 200)
    })

    test('when a key has expired, then it gets 401 invalid_token saying it expired, counted against the address', async (t) => {
      const store = await tempStore(t)
      const { app, clock } = await instance(t, store, { RATE_LIMIT_ANONYMOUS: '5/50' }, await makeLimiter(t))
      const expiring = await key(store, 'write', { expiresAt: new Date(T0 + 60_000) })
      assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(expiring.key) })).statusCode, 200)
      clock.now = T0 + 60_000
      const res = await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(expiring.key) })
      assert.equal(res.statusCode, 401)
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore", error="invalid_token", error_description="The API key has expired."')
      assert.deepEqual(res.json(), { code: 'unauthorized', message: 'The API key has expired.', status: 401 })
      assert.equal(res.headers['x-ratelimit-limit'], '5', 'the client address\'s window')
    })

    test('when a key is rotated, then both work during the overlap sharing one quota, and only the new one after', async (t) => {
      const store = await tempStore(t)
      const { app, clock } = await instance(t, store, { RATE_LIMIT_FREE: '4/100' }, await makeLimiter(t))
      const old = await key(store, 'read')
      const get = async (token: string) => await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(token) })
      assert.equal((await get(old.key)).headers['x-ratelimit-remaining'], '3')
      const rotated = await rotateKey(store, 'production', old.id, { overlapMs: 30_000 }, new Date(clock.now))
      assert.equal(rotated.record.scope, 'read')
      const fresh = await get(rotated.key)
      assert.equal(fresh.statusCode, 200)
      assert.equal(fresh.headers['x-ratelimit-remaining'], '2', 'the new key continues the old key\'s window')
      assert.equal((await get(old.key)).headers['x-ratelimit-remaining'], '1')
      assert.equal((await get(rotated.key)).headers['x-ratelimit-remaining'], '0')
      assert.equal((await get(old.key)).statusCode, 429, 'rotating never doubles the quota')
      clock.now = T0 + 61_000
      assert.equal((await get(old.key)).statusCode, 401, 'the overlap is over')
      const after = await get(rotated.key)
      // The in-process windows follow the app's clock (a new minute); Redis keeps its own time, where the window is still spent.
      if (limiterName === 'in-process') assert.equal(after.statusCode, 200)
      else assert.equal(after.json().code, 'rate_limited')
    })

    test('when a write is retried with the key that replaced its key, then it is replayed, not applied again', async (t) => {
      const store = await tempStore(t)
      await importData(store, { pets: [pet(1, { quantity: 5 })], orders: [] })
      const { app, clock } = await instance(t, store, {}, await makeLimiter(t))
      const old = await key(store, 'write')
      const adjust = async (token: string) => await app.inject({
        method: 'POST', url: '/v1/inventory/1/adjustments', headers: { ...auth(token), ...json, 'idempotency-key': 'retry-123' }, payload: { delta: 10 }
      })
      assert.equal((await adjust(old.key)).json().quantity, 15)
      const rotated = await rotateKey(store, 'production', old.id, { overlapMs: 3_600_000 }, new Date(clock.now))
      const retry = await adjust(rotated.key)
      assert.equal(retry.statusCode, 200)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
      assert.equal(retry.json().quantity, 15)
      assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((e) => e.quantity), [5, 15], 'applied once')
      // Another caller with the same idempotency key is another request.
      const stranger = await key(store, 'write')
      assert.equal((await adjust(stranger.key)).json().quantity, 25)
    })

    test('when GET /v1/rate_limit is called, then it reports the key without spending its quota, and its own budget bounds it', async (t) => {
      const store = await tempStore(t)
      const { app } = await instance(t, store, { RATE_LIMIT_FREE: '10/100', RATE_LIMIT_STATUS: '3/30' }, await makeLimiter(t))
      const reader = await key(store, 'read', { expiresAt: new Date(T0 + 86_400_000) })
      assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(reader.key) })).statusCode, 200)
      for (let i = 0; i < 3; i++) {
        const res = await app.inject({ method: 'GET', url: '/v1/rate_limit', headers: auth(reader.key) })
        assert.equal(res.statusCode, 200)
        const body = res.json()
        // In process the windows follow the app's clock; Redis keeps its own, so there only the alignment is known.
        const [minuteReset, dayReset] = limiterName === 'in-process' ? [T0 / 1000 + 60, T0 / 1000 + 43_200] : [body.minute.reset, body.day.reset]
        assert.equal(minuteReset % 60, 0)
        assert.equal(dayReset % 86_400, 0)
        assert.deepEqual(body, {
          plan: 'free',
          scopes: ['inventory:read'],
          minute: { limit: 10, remaining: 9, reset: minuteReset, used: 1 },
          day: { limit: 100, remaining: 99, reset: dayReset, used: 1 },
          bannedUntil: null,
          expiresAt: '2026-11-24T12:00:00.000Z'
        })
        assert.equal(res.headers['x-ratelimit-remaining'], '9', 'the key\'s own quota, unspent')
        assert.equal(res.headers['x-ratelimit-reset'], String(minuteReset))
      }
      const over = await app.inject({ method: 'GET', url: '/v1/rate_limit', headers: auth(reader.key) })
      assert.equal(over.statusCode, 429)
      assert.equal(over.json().code, 'rate_limited')
      assert.match(over.json().message, /GET \/v1\/rate_limit may be called 3 times per minute per key/)
      assert.equal(over.headers['x-ratelimit-limit'], '3', 'as every 429: the fields describe the window that refused, the status budget')
      assert.equal(over.headers['x-ratelimit-remaining'], '0')
      const wait = Number(over.headers['retry-after'])
      assert.ok(limiterName === 'in-process' ? wait === 60 : wait >= 1 && wait <= 60, String(wait))
      const after = await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(reader.key) })
      assert.equal(after.headers['x-ratelimit-remaining'], '8', 'four status calls spent none of the key\'s quota')
    })

    test('when a banned key asks GET /v1/rate_limit, then it is answered 200 with the ban, while other calls get 429', async (t) => {
      const store = await tempStore(t)
      const { app } = await instance(t, store, {}, await makeLimiter(t))
      const writer = await key(store, 'write', { plan: 'pro' })
      const until = new Date(T0 + 600_000)
      await store.keys.banApiKey(writer.id, { since: new Date(T0), until, seconds: 900 })
      assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(writer.key) })).json().code, 'key_banned')
      const res = await app.inject({ method: 'GET', url: '/v1/rate_limit', headers: auth(writer.key) })
      assert.equal(res.statusCode, 200)
      const body = res.json()
      assert.equal(body.bannedUntil, until.toISOString())
      assert.deepEqual(body.scopes, ['inventory:read', 'inventory:sell', 'inventory:write'])
      assert.equal(body.plan, 'pro')
      assert.equal(body.minute.remaining, 0)
      assert.equal(body.minute.reset, until.getTime() / 1000)
      assert.equal(body.minute.used, 0, 'the refusals during the ban counted nothing')
    })
  })
}

describe('keys over HTTP: last use and the document', () => {
  test('when a key is used, then keys show its last use, and its last deprecated call apart, recorded at most once a minute', async (t) => {
    const store = await tempStore(t)
    await importData(store, { pets: [pet(1)], orders: [] })
    const { app, clock } = await instance(t, store)
    const user = await key(store, 'read')
    const read = async () => {
      const found = (await store.keys.listApiKeys()).find((k) => k.id === user.id)
      return [found?.lastUsedAt?.getTime() ?? null, found?.lastDeprecatedUseAt?.getTime() ?? null]
    }
    const lastUse = async (expected: Array<number | null>) => {
      // The record is written off the request path: a write that should not happen gets a short window to show, and
      // one that should is waited for (a loaded machine may take longer than the window).
      await new Promise((resolve) => setTimeout(resolve, 50))
      await waitFor('the last use recorded', async () => isDeepStrictEqual(await read(), expected), { detail: () => JSON.stringify(expected) })
      return await read()
    }
    assert.deepEqual(await lastUse([null, null]), [null, null])
    await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(user.key) })
    assert.deepEqual(await lastUse([T0, null]), [T0, null])
    clock.now = T0 + 30_000
    await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(user.key) })
    assert.deepEqual(await lastUse([T0, null]), [T0, null], 'within the minute: not written again')
    const pet1 = await app.inject({ method: 'GET', url: '/v1/pets/1', headers: auth(user.key) })
    assert.equal(pet1.statusCode, 200)
    // The first deprecated call is recorded at once, and the write it makes carries the use's time too.
    assert.deepEqual(await lastUse([T0 + 30_000, T0 + 30_000]), [T0 + 30_000, T0 + 30_000])
    clock.now = T0 + 61_000
    await app.inject({ method: 'GET', url: '/v1/store/orders', headers: auth(user.key) })
    assert.deepEqual(await lastUse([T0 + 61_000, T0 + 30_000]), [T0 + 61_000, T0 + 30_000])
  })

  test('when a key issued before checksums is used, then it still works; a checksummed key with one character changed is 401', async (t) => {
    const store = await tempStore(t)
    const { app } = await instance(t, store)
    // The old format: 32 random bytes in base64url after the prefix, as keys were issued until migration 8's release.
    const legacy = 'psk_live_' + randomBytes(32).toString('base64url')
    await store.keys.createApiKey({ id: 'key_legacy', keyHash: hashKey(legacy), name: 'old', plan: 'free', perMinute: null, perDay: null, createdAt: new Date(T0 - 1000) })
    assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(legacy) })).statusCode, 200)
    const current = await key(store, 'write')
    const body = current.key.slice('psk_live_'.length)
    const typo = 'psk_live_' + (body[0] === 'A' ? 'B' : 'A') + body.slice(1)
    const res = await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(typo) })
    assert.equal(res.statusCode, 401)
    assert.equal(res.json().message, 'The API key is unknown or revoked.')
  })

  test('when the OpenAPI document is read, then every operation declares its scope, and the writes their 403', async (t) => {
    const store = await tempStore(t)
    const { app } = await instance(t, store)
    const document = (await app.inject({ method: 'GET', url: '/v1/openapi.json' })).json()
    const scopes: Record<string, string[]> = {}
    const forbidden: string[] = []
    for (const operations of Object.values(document.paths as Record<string, Record<string, { operationId: string, security: Array<{ bearerAuth: string[] }>, responses: Record<string, unknown> }>>)) {
      for (const operation of Object.values(operations)) {
        scopes[operation.operationId] = operation.security.flatMap((requirement) => requirement.bearerAuth)
        if ('403' in operation.responses) forbidden.push(operation.operationId)
      }
    }
    assert.deepEqual(scopes, {
      listInventory: ['inventory:read'],
      getInventoryItem: ['inventory:read'],
      updateInventory: ['inventory:write'],
      adjustInventory: ['inventory:write'],
      batchUpdateInventory: ['inventory:write'],
      getReorderPoint: ['inventory:read'],
      setReorderPoint: ['inventory:write'],
      clearReorderPoint: ['inventory:write'],
      listInventoryChanges: ['inventory:read'],
      streamInventoryChanges: ['inventory:read'],
      listOrders: ['inventory:read'],
      placeOrder: ['inventory:sell'],
      getOrderById: ['inventory:read'],
      approveOrder: ['inventory:sell'],
      deliverOrder: ['inventory:sell'],
      cancelOrder: ['inventory:sell'],
      placeHold: ['inventory:sell'],
      listHolds: ['inventory:read'],
      getHold: ['inventory:read'],
      extendHold: ['inventory:sell'],
      confirmHold: ['inventory:sell'],
      releaseHold: ['inventory:sell'],
      getRateLimit: ['inventory:read'],
      getPetById: ['inventory:read'],
      createWebhook: ['inventory:write'],
      listWebhooks: ['inventory:write'],
      getWebhook: ['inventory:write'],
      updateWebhook: ['inventory:write'],
      deleteWebhook: ['inventory:write'],
      rotateWebhookSecret: ['inventory:write'],
      listWebhookDeliveries: ['inventory:write'],
      retryWebhookDelivery: ['inventory:write']
    })
    assert.deepEqual(forbidden.sort(), ['adjustInventory', 'approveOrder', 'batchUpdateInventory', 'cancelOrder', 'clearReorderPoint', 'confirmHold', 'createWebhook',
      'deleteWebhook', 'deliverOrder', 'extendHold', 'getWebhook', 'listWebhookDeliveries', 'listWebhooks', 'placeHold', 'placeOrder', 'releaseHold',
      'retryWebhookDelivery', 'rotateWebhookSecret', 'setReorderPoint', 'updateInventory', 'updateWebhook'])
  })
})

if (await requirePostgres('keys across two instances on PostgreSQL and Redis')) {
  describe('keys across instances (PostgreSQL + Redis)', () => {
    test('when a key is rotated, then the old key on one instance and the new one on another share one quota', { skip: !redisUp }, async (t) => {
      const store = await tempPostgresStore(t)
      const prefix = redisKeyPrefix(t)
      const limiterOn = async () => {
        const client = createRedisClient(REDIS_URL)
        t.after(() => client.disconnect())
        await waitReady(client)
        return new RedisLimiter({ client, prefix })
      }
      const clock = { now: T0 }
      const a = await instance(t, store, { RATE_LIMIT_FREE: '3/100' }, await limiterOn(), clock)
      const b = await instance(t, store, { RATE_LIMIT_FREE: '3/100' }, await limiterOn(), clock)
      const old = await key(store, 'write')
      const rotated = await rotateKey(store, 'production', old.id, { overlapMs: 3_600_000 }, new Date(T0))
      const get = async (on: Instance, token: string) => await on.app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(token) })
      // Redis's clock decides the windows here: only the count matters.
      const answers = [await get(a, old.key), await get(b, rotated.key), await get(a, rotated.key), await get(b, old.key)]
      assert.deepEqual(answers.map((res) => res.statusCode), [200, 200, 200, 429])
      assert.deepEqual(answers.slice(0, 3).map((res) => res.headers['x-ratelimit-remaining']), ['2', '1', '0'])
    })

    test('when a read-only key writes on PostgreSQL, then it gets 403 and nothing is written', async (t) => {
      const store = await tempPostgresStore(t)
      await importData(store, { pets: [pet(1, { quantity: 5 })], orders: [] })
      const { app } = await instance(t, store)
      const reader = await key(store, 'read')
      for (const write of writes) {
        assert.equal((await app.inject({ ...write, headers: { ...auth(reader.key), ...json } })).statusCode, 403)
      }
      assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((e) => e.reason), ['import'])
      // Written off the request path: waited for.
      await waitFor('last use recorded on PostgreSQL', async () => (await store.keys.listApiKeys()).find((k) => k.id === reader.id)?.lastUsedAt !== null)
    })
  })
}
