/**
 * A client may send a complete request and then close its sending side (a TCP half-close, as `curl` does with
 * some options and as simple scripts do with `socket.end(request)`). Its answer must still arrive, also when
 * producing it takes asynchronous round trips (PostgreSQL, Redis): a request that has been counted is answered.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { RedisLimiter } from '../../src/ratelimit/redis.js'
import type { RateLimiter } from '../../src/ratelimit/types.js'
import { wrapStore } from '../../src/store/observe.js'
import type { Store } from '../../src/store/store.js'
import { newKey, pet, tempStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { parseResponse, raw } from '../helpers/raw-http.js'
import { requireRedis, tempRedis } from '../ratelimit/redis-env.js'
import { importData } from '../../src/domain/import.js'

async function serve (t: TestContext, store: Store, limiter?: RateLimiter) {
  await importData(store, { pets: [pet(1, { quantity: 5 })], orders: [] })
  const key = await newKey(store)
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false, ...(limiter === undefined ? {} : { limiter }) })
  t.after(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { key, port: (app.server.address() as { port: number }).port }
}

async function halfClosed (port: number, key: string) {
  const body = '{"quantity":9}'
  const patch = parseResponse((await raw(port, `PATCH /v1/inventory/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, { halfClose: true })).text)
  const get = parseResponse((await raw(port, `GET /v1/inventory HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`, { halfClose: true })).text)
  return { patch, get }
}

function assertAnswered ({ patch, get }: Awaited<ReturnType<typeof halfClosed>>): void {
  assert.equal(patch.status, 200, 'the PATCH is answered')
  assert.deepEqual(JSON.parse(patch.body), { petId: 1, quantity: 9, status: 'available' })
  assert.equal(get.status, 200, 'the GET is answered')
  assert.deepEqual(JSON.parse(get.body), [{ petId: 1, quantity: 9, status: 'available' }])
  assert.equal(get.headers['x-ratelimit-remaining'], '58')
}

describe('half-closed connections', () => {
  test('when the answer needs asynchronous steps and the client half-closes after its request, then it still gets the answer', async (t) => {
    const store = await tempStore(t)
    // Every store call takes a few milliseconds, as a database round trip does.
    const slow = wrapStore(store, (_operation, call) => (...args) => {
      const result = call(args)
      return result instanceof Promise ? sleep(20).then(async () => await result) : result
    })
    const { key, port } = await serve(t, slow)
    assertAnswered(await halfClosed(port, key))
  })
})

if (await requirePostgres('half-closed connections on PostgreSQL and Redis') && await requireRedis('half-closed connections on PostgreSQL and Redis')) {
  describe('half-closed connections on PostgreSQL and Redis', () => {
    test('when a client half-closes after its request, then PostgreSQL + Redis still answer it', async (t) => {
      const { client, prefix } = await tempRedis(t)
      const store = await tempPostgresStore(t)
      const { key, port } = await serve(t, store, new RedisLimiter({ client, prefix }))
      assertAnswered(await halfClosed(port, key))
    })
  })
}
