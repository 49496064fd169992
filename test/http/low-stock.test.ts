/**
 * Low stock through the API, on both stores: a pet's reorder point (PUT, GET, DELETE
 * /v1/inventory/{petId}/reorder-point) with its scopes and refusals, the low flag a crossing sets and a rise clears,
 * and the listing filter GET /v1/inventory?lowStock=true beside the unchanged default listing.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { createKey } from '../../src/access/keys.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, pet, tempStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'

const json = { 'content-type': 'application/json' }

async function serve (t: TestContext, makeStore: (t: TestContext) => Promise<Store>) {
  const store = await makeStore(t)
  await importData(store, {
    pets: [pet(1, { quantity: 10 }), pet(2, { quantity: 2 }), pet(3, { quantity: 7, status: 'pending' }), pet(4, { quantity: undefined })],
    orders: []
  })
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })
  t.after(() => app.close())
  const key = await newKey(store, 'enterprise')
  const { key: reader } = await createKey(store, 'production', { plan: 'enterprise', name: 'reader', scope: 'read', perMinute: 10_000, perDay: 100_000 })
  const call = (method: 'GET' | 'PUT' | 'DELETE' | 'PATCH', url: string, payload?: object, as = key) =>
    app.inject({ method, url, headers: { ...auth(as), ...(payload === undefined ? {} : json) }, ...(payload === undefined ? {} : { payload }) })
  return { store, call, reader }
}

function suite (name: string, makeStore: (t: TestContext) => Promise<Store>): void {
  describe(`${name}: reorder points and the low-stock listing`, () => {
    test('when a point is set above the quantity, then it is not low; when stock falls to it, then it is low, and rising above clears it', async (t) => {
      const { call } = await serve(t, makeStore)
      const put = await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 5 })
      assert.equal(put.statusCode, 200, put.body)
      assert.deepEqual(put.json(), { petId: 1, reorderPoint: 5, low: false })
      assert.equal((await call('PATCH', '/v1/inventory/1', { quantity: 5, reason: 'sale' })).statusCode, 200)
      assert.deepEqual((await call('GET', '/v1/inventory/1/reorder-point')).json(), { petId: 1, reorderPoint: 5, low: true })
      assert.equal((await call('PATCH', '/v1/inventory/1', { quantity: 6, reason: 'arrival' })).statusCode, 200)
      assert.deepEqual((await call('GET', '/v1/inventory/1/reorder-point')).json(), { petId: 1, reorderPoint: 5, low: false })
    })

    test('when a point is set at or above the quantity, then the answer says low at once', async (t) => {
      const { call } = await serve(t, makeStore)
      assert.deepEqual((await call('PUT', '/v1/inventory/2/reorder-point', { reorderPoint: 2 })).json(), { petId: 2, reorderPoint: 2, low: true })
      assert.deepEqual((await call('PUT', '/v1/inventory/2/reorder-point', { reorderPoint: 1 })).json(), { petId: 2, reorderPoint: 1, low: false })
    })

    test('when a point is set or removed, then the entry\'s ETag and the listing\'s ETag stay as they were', async (t) => {
      const { call } = await serve(t, makeStore)
      const before = [(await call('GET', '/v1/inventory/1')).headers.etag, (await call('GET', '/v1/inventory')).headers.etag]
      assert.equal((await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 50 })).statusCode, 200)
      assert.equal((await call('DELETE', '/v1/inventory/1/reorder-point')).statusCode, 204)
      assert.deepEqual([(await call('GET', '/v1/inventory/1')).headers.etag, (await call('GET', '/v1/inventory')).headers.etag], before)
    })

    test('when a point is removed, then GET answers 404 and removing it again still answers 204', async (t) => {
      const { call } = await serve(t, makeStore)
      await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 3 })
      const removed = await call('DELETE', '/v1/inventory/1/reorder-point')
      assert.equal(removed.statusCode, 204)
      assert.equal(removed.body, '')
      const missing = await call('GET', '/v1/inventory/1/reorder-point')
      assert.equal(missing.statusCode, 404)
      assert.equal(missing.json<{ code: string }>().code, 'not_found')
      assert.equal((await call('DELETE', '/v1/inventory/1/reorder-point')).statusCode, 204)
    })

    test('when the pet has no stock entry, then PUT, GET and DELETE answer 404 not_found', async (t) => {
      const { call } = await serve(t, makeStore)
      for (const petId of [4, 99]) {
        for (const [method, payload] of [['PUT', { reorderPoint: 1 }], ['GET', undefined], ['DELETE', undefined]] as const) {
          const res = await call(method, `/v1/inventory/${petId}/reorder-point`, payload)
          assert.equal(res.statusCode, 404, `${method} ${petId}`)
          const message = method === 'GET' ? `Pet ${petId} has no stock entry or no reorder point.` : `No inventory entry exists for pet ${petId}.`
          assert.deepEqual(res.json(), { code: 'not_found', message, status: 404 })
        }
      }
    })

    test('when the body is not a point from 0 to 1,000,000,000, then PUT answers 400 and sets nothing', async (t) => {
      const { call } = await serve(t, makeStore)
      for (const payload of [{ reorderPoint: -1 }, { reorderPoint: 1_000_000_001 }, { reorderPoint: '5' }, { reorderPoint: 2.5 }, {}, { reorderPoint: 5, extra: 1 }]) {
        const res = await call('PUT', '/v1/inventory/1/reorder-point', payload)
        assert.equal(res.statusCode, 400, JSON.stringify(payload))
        assert.equal(res.json<{ code: string }>().code, 'invalid_request')
      }
      assert.equal((await call('GET', '/v1/inventory/1/reorder-point')).statusCode, 404)
      assert.deepEqual((await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 1_000_000_000 })).json(), { petId: 1, reorderPoint: 1_000_000_000, low: true })
      assert.deepEqual((await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 0 })).json(), { petId: 1, reorderPoint: 0, low: false })
    })

    test('when a read-only key sets or removes a point, then it is 403 insufficient_scope; it may read it', async (t) => {
      const { call, reader } = await serve(t, makeStore)
      await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 3 })
      assert.equal((await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 4 }, reader)).statusCode, 403)
      assert.equal((await call('DELETE', '/v1/inventory/1/reorder-point', undefined, reader)).statusCode, 403)
      const read = await call('GET', '/v1/inventory/1/reorder-point', undefined, reader)
      assert.equal(read.statusCode, 200)
      assert.deepEqual(read.json(), { petId: 1, reorderPoint: 3, low: false })
    })

    test('when stock crosses its point, then the change feed serves the stock change and not the event row as a change', async (t) => {
      const { call } = await serve(t, makeStore)
      await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 5 })
      await call('PATCH', '/v1/inventory/1', { quantity: 3, reason: 'sale' })
      await call('PATCH', '/v1/inventory/1', { quantity: 9, reason: 'arrival' })
      const feed = await call('GET', '/v1/inventory/changes?limit=100')
      assert.equal(feed.statusCode, 200, feed.body)
      assert.deepEqual(feed.json<Array<{ petId: number, reason: string, quantity: number }>>().filter((change) => change.petId === 1)
        .map((change) => [change.reason, change.quantity]), [['import', 10], ['sale', 3], ['arrival', 9]])
    })

    test('when listed with lowStock=true, then only the entries at or below their point are answered, in the v1 shape', async (t) => {
      const { call } = await serve(t, makeStore)
      await call('PUT', '/v1/inventory/1/reorder-point', { reorderPoint: 5 })
      await call('PUT', '/v1/inventory/2/reorder-point', { reorderPoint: 2 })
      await call('PUT', '/v1/inventory/3/reorder-point', { reorderPoint: 7 })
      const low = await call('GET', '/v1/inventory?lowStock=true')
      assert.equal(low.statusCode, 200, low.body)
      assert.deepEqual(low.json(), [{ petId: 2, quantity: 2, status: 'available' }, { petId: 3, quantity: 7, status: 'pending' }])
      assert.equal(low.headers.etag, undefined)
      await call('PATCH', '/v1/inventory/1', { quantity: 4 })
      await call('PATCH', '/v1/inventory/3', { quantity: 8 })
      assert.deepEqual((await call('GET', '/v1/inventory?lowStock=true')).json<Array<{ petId: number }>>().map((item) => item.petId), [1, 2])
    })

    test('when the filtered listing is paged, then each page links to the next with the filter kept', async (t) => {
      const { call } = await serve(t, makeStore)
      for (const petId of [1, 2, 3]) await call('PUT', `/v1/inventory/${petId}/reorder-point`, { reorderPoint: 10 })
      const first = await call('GET', '/v1/inventory?lowStock=true&limit=2')
      assert.deepEqual(first.json<Array<{ petId: number }>>().map((item) => item.petId), [1, 2])
      const link = /^<\?([^>]+)>; rel="next"$/.exec(String(first.headers.link))
      assert.ok(link !== null, String(first.headers.link))
      assert.equal(new URLSearchParams(link[1]).get('lowStock'), 'true')
      const second = await call('GET', `/v1/inventory?${link[1]}`)
      assert.deepEqual(second.json<Array<{ petId: number }>>().map((item) => item.petId), [3])
      assert.equal(second.headers.link, undefined)
    })

    test('when listed without the filter or with lowStock=false, then the whole listing is answered with its ETag, as before', async (t) => {
      const { call } = await serve(t, makeStore)
      await call('PUT', '/v1/inventory/2/reorder-point', { reorderPoint: 5 })
      const whole = [{ petId: 1, quantity: 10, status: 'available' }, { petId: 2, quantity: 2, status: 'available' }, { petId: 3, quantity: 7, status: 'pending' }]
      for (const url of ['/v1/inventory', '/v1/inventory?lowStock=false']) {
        const res = await call('GET', url)
        assert.deepEqual(res.json(), whole, url)
        assert.match(String(res.headers.etag), /^"/, url)
      }
      const bad = await call('GET', '/v1/inventory?lowStock=yes')
      assert.equal(bad.statusCode, 400)
    })
  })
}

suite('SQLite', tempStore)
if (await requirePostgres('PostgreSQL low-stock HTTP tests')) suite('PostgreSQL', (t) => tempPostgresStore(t))

describe('the API document', () => {
  test('when read, then it describes the reorder-point operations as beta and the listing\'s lowStock filter', async (t) => {
    const store = await tempStore(t)
    const app = await buildApp(loadConfig({}), { store, logger: false })
    t.after(() => app.close())
    const doc = (await app.inject({ method: 'GET', url: '/v1/openapi.json' })).json<{
      paths: Record<string, Record<string, { operationId: string, 'x-stability'?: string, parameters?: Array<{ name: string, schema: { enum?: string[] } }> }>>
    }>()
    const path = doc.paths['/inventory/{petId}/reorder-point'] ?? {}
    assert.deepEqual(['put', 'get', 'delete'].map((method) => [path[method]?.operationId, path[method]?.['x-stability']]),
      [['setReorderPoint', 'beta'], ['getReorderPoint', 'beta'], ['clearReorderPoint', 'beta']])
    const filter = doc.paths['/inventory']?.get?.parameters?.find((parameter) => parameter.name === 'lowStock')
    assert.deepEqual(filter?.schema.enum, ['true', 'false'])
  })
})
