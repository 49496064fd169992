/**
 * The API on the real PostgreSQL: the same answers as on SQLite, and 503 (not 500, not a hang) while the
 * database is unreachable, with recovery on its own once it is back.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { auth, newKey, pet } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempPostgresStore, tempSchema } from '../helpers/postgres.js'
import { KillableProxy } from '../helpers/proxy.js'
import { importData } from '../../src/domain/import.js'

if (await requirePostgres('API tests on PostgreSQL')) {
  describe('the API on PostgreSQL', () => {
    test('when two PATCHes race with the same If-Match, then one applies, the other gets 412, and the ledger records the one', async (t) => {
      const store = await tempPostgresStore(t)
      await importData(store, { pets: [pet(9007199254740993n, { quantity: 10 })], orders: [] })
      const key = await newKey(store)
      const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })
      t.after(() => app.close())
      const url = '/v1/inventory/9007199254740993'
      const entry = await app.inject({ method: 'GET', url, headers: auth(key) })
      assert.equal(entry.body, '{"petId":9007199254740993,"quantity":10,"status":"available"}')
      const etag = String(entry.headers.etag)
      const patch = (quantity: number) => app.inject({
        method: 'PATCH', url, headers: { ...auth(key), 'content-type': 'application/json', 'if-match': etag }, payload: { quantity, reason: 'return' }
      })
      const answers = await Promise.all([patch(11), patch(12)])
      assert.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 412])
      const winner = answers.find((a) => a.statusCode === 200)
      const history = await store.stock.stockHistory(9007199254740993n, 10)
      assert.deepEqual(history.map((e) => [e.reason, e.previousQuantity, e.quantity]), [['import', null, 10], ['return', 10, winner?.json().quantity]])
      assert.equal(history[1]?.keyId, (await store.keys.listApiKeys())[0]?.id)
      assert.equal(history[1]?.requestId, winner?.headers['x-request-id'])
    })

    test('when instances get the same Idempotency-Key at once, then the write applies once and every instance answers it', async (t) => {
      const schema = await tempSchema(t)
      const stores = Array.from({ length: 3 }, () => new PostgresStore(POSTGRES_URL, { schema, poolSize: 4 }))
      t.after(() => Promise.all(stores.map((s) => s.close())))
      await stores[0]!.schema.migrate()
      await importData(stores[0]!, { pets: [pet(1, { quantity: 0 }), pet(2, { quantity: 0 })], orders: [] })
      const key = await newKey(stores[0]!, 'enterprise')
      const apps = await Promise.all(stores.map((store) => buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })))
      t.after(() => Promise.all(apps.map((app) => app.close())))
      for (let round = 0; round < 10; round++) {
        const answers = await Promise.all(apps.flatMap((app) => [1, 2].map(() => app.inject({
          method: 'POST',
          url: `/v1/inventory/${round % 2 + 1}/adjustments`,
          headers: { ...auth(key), 'content-type': 'application/json', 'idempotency-key': `round-${round}` },
          payload: { delta: 1 }
        }))))
        // Within an instance the second request meets the first in flight (409); across instances the later one
        // waits for the first one's commit and replays it.
        const applied = answers.filter((a) => a.statusCode === 200 && a.headers['idempotent-replayed'] === undefined)
        assert.equal(applied.length, 1, `round ${round}: ${answers.map((a) => `${a.statusCode}${a.headers['idempotent-replayed'] === 'true' ? 'r' : ''}`).join(' ')}`)
        assert.ok(answers.every((a) => a.statusCode === 200 || a.json().code === 'idempotency_key_in_flight'))
        assert.ok(answers.filter((a) => a.statusCode === 200).every((a) => a.body === applied[0]?.body && a.headers.etag === applied[0]?.headers.etag))
      }
      assert.deepEqual(await Promise.all([1n, 2n].map(async (id) => (await stores[0]!.stock.getStockEntry(id))?.quantity)), [5, 5])
      assert.equal((await stores[0]!.stock.stockHistory(1n, 100)).length + (await stores[0]!.stock.stockHistory(2n, 100)).length, 12)
    })

    test('when If-Match names a revision beyond int64, then PATCH and adjustments answer 412, not a database error', async (t) => {
      const store = await tempPostgresStore(t)
      await importData(store, { pets: [pet(1, { quantity: 10 })], orders: [] })
      const key = await newKey(store)
      const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })
      t.after(() => app.close())
      const headers = { ...auth(key), 'content-type': 'application/json', 'if-match': '"r12345", "r9999999999999999999"' }
      for (const [method, url, payload] of [['PATCH', '/v1/inventory/1', { quantity: 3 }], ['POST', '/v1/inventory/1/adjustments', { delta: 3 }]] as const) {
        const res = await app.inject({ method, url, headers, payload })
        assert.equal(res.statusCode, 412, `${method} ${url}: ${res.body}`)
        assert.equal(res.json().code, 'precondition_failed')
      }
      assert.equal((await store.stock.getStockEntry(1n))?.quantity, 10)
    })

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
      await store.schema.migrate()
      await importData(store, { pets: [pet(9007199254740993n, { quantity: 4 })], orders: [] })
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
