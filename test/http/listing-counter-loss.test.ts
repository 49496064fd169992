/**
 * The listing's change signal when Redis loses or sets back its change counter (a restart without persistence, a
 * Cluster node restarted empty, a failover to a replica that lagged): the first change after the loss still reaches
 * every instance's next GET, also an instance that was idle meanwhile (found by an attacker helper).
 */
import assert from 'node:assert/strict'
import { test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitFor } from '../helpers/wait.js'
import { Redis } from 'ioredis'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import { openRedis } from '../../src/redis/connect.js'
import type { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { auth, newKey, pet } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { requireRedisServer, startRedisServer } from '../helpers/redis-servers.js'
import { resilientRedis } from '../helpers/shared-redis.js'

const get = (key: string) => ({ method: 'GET' as const, url: '/v1/inventory', headers: auth(key) })
const patch = (key: string, petId: number, quantity: number) => ({
  method: 'PATCH' as const, url: `/v1/inventory/${petId}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: JSON.stringify({ quantity })
})

async function twoInstances (t: TestContext, url: string): Promise<{ one: FastifyInstance, two: FastifyInstance, key: string, limiters: ResilientLimiter[] }> {
  const schema = await tempSchema(t)
  const stores = [new PostgresStore(POSTGRES_URL, { schema }), new PostgresStore(POSTGRES_URL, { schema })]
  t.after(() => Promise.all(stores.map((store) => store.close())))
  await stores[0]!.schema.migrate()
  await importData(stores[0]!, { pets: [pet(1), pet(2)], orders: [] })
  const key = await newKey(stores[0]!)
  const limiters: ResilientLimiter[] = []
  const apps = await Promise.all(stores.map(async (store) => {
    const client = openRedis({ mode: 'standalone', url, onDown: 'local', commandTimeoutMs: 500 })
    t.after(() => client.disconnect())
    const { limiter, changes } = resilientRedis(client, 'test:', { logger: { warn: () => {}, info: () => {} } })
    limiters.push(limiter)
    const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '60000' }), { store, logger: false, limiter, changes })
    t.after(() => app.close())
    return app
  }))
  return { one: apps[0]!, two: apps[1]!, key, limiters }
}

if (await requireRedisServer('listing freshness after Redis loses the change counter') && await requirePostgres('listing freshness on PostgreSQL')) {
  test('a write on one instance is seen by the next GET on another, also after Redis restarted empty while that instance was idle', async (t) => {
    const server = await startRedisServer(t.after.bind(t))
    const { one, two, key, limiters } = await twoInstances(t, server.url)
    const until = async (ok: () => boolean): Promise<void> => { await waitFor('both limiters on Redis', ok, { intervalMs: 50 }) }
    await until(() => limiters.every((l) => l.backend === 'redis'))
    for (const app of [one, two]) assert.equal((await app.inject(get(key))).statusCode, 200)
    // Before the restart: the counter climbs to 10, and every write is seen by the other instance.
    for (let i = 1; i <= 10; i++) {
      assert.equal((await one.inject(patch(key, 1, i))).statusCode, 200)
      assert.equal((await two.inject(get(key))).json()[0].quantity, i, 'before the restart')
    }

    // Redis restarts without persistence while nobody sends a request: the change counter is gone.
    await server.kill()
    await server.restart()
    await sleep(300)
    await until(() => limiters.every((l) => l.backend === 'redis'))
    // One GET each after the restart (the counter now reads 0 on both).
    for (const app of [one, two]) assert.equal((await app.inject(get(key))).statusCode, 200)

    const stale: number[] = []
    for (let i = 100; i < 105; i++) {
      assert.equal((await one.inject(patch(key, 1, i))).statusCode, 200)
      const seen = (await two.inject(get(key))).json()[0].quantity
      if (seen !== i) stale.push(seen)
    }
    assert.deepEqual(stale, [], 'GETs on the other instance after acknowledged writes returned stale quantities')
  })
}

/**
 * The same class after the counter-loss fix in the working tree (a lower counter counts as a gap; a lost counter
 * restarts from Redis TIME): a failover to a replica that had not received the last increment leaves the counter one
 * lower, not gone. An instance that read the old primary's value and makes no request during the failover, then
 * reads the counter after exactly that many new writes, sees the very value it saw before and keeps its listing.
 * The lag is modelled by a DECR of the counter (what the promoted replica holds), without a restart.
 */
if (await requireRedisServer('listing freshness after a failover to a lagging replica') && await requirePostgres('listing freshness on PostgreSQL')) {
  test('a write is seen by the next GET on another instance after the counter went back by one (failover to a lagging replica)', async (t) => {
    const server = await startRedisServer(t.after.bind(t))
    const { one, two, key, limiters } = await twoInstances(t, server.url)
    await waitFor('every limiter on Redis', () => limiters.every((l) => l.backend === 'redis'), { intervalMs: 50 })
    for (const app of [one, two]) assert.equal((await app.inject(get(key))).statusCode, 200)
    for (let i = 1; i <= 3; i++) {
      assert.equal((await one.inject(patch(key, 1, i))).statusCode, 200)
      assert.equal((await two.inject(get(key))).json()[0].quantity, i, 'before the failover')
    }
    // The promoted replica lacks the last increment that instance two has already seen.
    const admin = new Redis(server.port, '127.0.0.1')
    t.after(() => admin.disconnect())
    await admin.decr('test:changes')
    // One write after the failover, then a GET on the instance that was idle meanwhile.
    assert.equal((await one.inject(patch(key, 1, 50))).statusCode, 200)
    assert.equal((await two.inject(get(key))).json()[0].quantity, 50, 'the GET after the acknowledged write shows it')
  })
}
