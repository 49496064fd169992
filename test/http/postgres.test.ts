/**
 * The API on the real PostgreSQL: the same answers as on SQLite, and 503 (not 500, not a hang) while the
 * database is unreachable, with recovery on its own once it is back.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { PostgresStore } from '../../src/store/postgres/index.js'
import { auth, newKey, pet } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { KillableProxy } from '../helpers/proxy.js'

if (await requirePostgres('API tests on PostgreSQL')) {
  describe('the API on PostgreSQL', () => {
    test('when PostgreSQL goes away and comes back, then requests get 503 with Retry-After meanwhile and 200 after', async (t) => {
      const target = new URL(POSTGRES_URL)
      const proxy = new KillableProxy({ host: target.hostname, port: Number(target.port || 5432) })
      await proxy.start()
      t.after(() => proxy.kill())
      const viaProxy = new URL(POSTGRES_URL)
      viaProxy.port = String(proxy.port)
      const schema = await tempSchema(t)
      const store = new PostgresStore(viaProxy.toString(), { schema, connectTimeoutMs: 500, statementTimeoutMs: 1000 })
      t.after(() => store.close())
      await store.migrate()
      await store.importData({ pets: [pet(9007199254740993n, { quantity: 4 })], orders: [] })
      const key = await newKey(store)
      const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })
      t.after(() => app.close())
      const inventory = () => app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })

      const before = await inventory()
      assert.equal(before.statusCode, 200)
      assert.equal(before.body, '[{"petId":9007199254740993,"quantity":4,"status":"available"}]')

      await proxy.kill()
      const started = Date.now()
      const during = await inventory()
      assert.equal(during.statusCode, 503)
      assert.equal(during.headers['retry-after'], '5')
      assert.deepEqual(during.json(), { code: 'service_unavailable', message: 'The service is temporarily unavailable.', status: 503 })
      assert.ok(Date.now() - started < 3000, 'answered without hanging')
      assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503)
      assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process is still alive')

      await proxy.start()
      const deadline = Date.now() + 10_000
      let after = await inventory()
      while (after.statusCode !== 200 && Date.now() < deadline) {
        await sleep(100)
        after = await inventory()
      }
      assert.equal(after.statusCode, 200)
      assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
    })
  })
}
