/**
 * The SQL layer takes parameters only: injection strings through every input are inert. They are rejected by
 * validation where the input is typed, and stored and returned literally where it is free text.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { createKey } from '../../src/access/keys.js'
import { auth, pet, testApp } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import type { Store } from '../../src/store/store.js'
import { importData } from '../../src/domain/import.js'

const PAYLOADS = [
  "1; DROP TABLE pets; --",
  "1' OR '1'='1",
  "Robert'); DROP TABLE inventory;--",
  '1 UNION SELECT key_hash FROM api_keys',
  "'; UPDATE inventory SET quantity = 0; --",
  '\\x00\'"`;--'
]

async function assertIntact (store: Store): Promise<void> {
  assert.deepEqual((await store.stock.listInventory()).map((item) => [item.petId, item.quantity]), [[1n, 7]])
  assert.equal((await store.keys.listApiKeys()).length >= 1, true)
}

async function throughTheApi (store: Store, request: Awaited<ReturnType<typeof testApp>>['request'], key: string): Promise<void> {
  for (const payload of PAYLOADS) {
    const encoded = encodeURIComponent(payload)
    const answers = await Promise.all([
      request({ method: 'GET', url: `/v1/pets/${encoded}`, headers: auth(key) }),
      request({ method: 'PATCH', url: `/v1/inventory/${encoded}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: '{"quantity":0}' }),
      request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload: JSON.stringify({ quantity: payload }) }),
      request({ method: 'GET', url: `/v1/store/orders?status=${encoded}`, headers: auth(key) }),
      request({ method: 'GET', url: `/v1/store/orders?cursor=${encoded}`, headers: auth(key) }),
      request({ method: 'GET', url: '/v1/inventory', headers: { authorization: `Bearer ${payload}` } }),
      request({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), 'x-request-id': payload } })
    ])
    for (const res of answers) assert.ok(res.statusCode < 500, `${res.statusCode} for ${payload}`)
  }
  await assertIntact(store)
}

async function freeText (store: Store): Promise<void> {
  for (const payload of PAYLOADS) {
    await importData(store, { pets: [pet(2, { name: payload, tags: [{ id: 1n, name: payload }], photoUrls: [payload], quantity: undefined })], orders: [] })
    assert.deepEqual(await store.catalog.getPet(2n), { id: 2n, name: payload, status: 'available', tags: [{ id: 1n, name: payload }], photoUrls: [payload] })
    const { record } = await createKey(store, 'production', { plan: 'free', name: payload, perMinute: null, perDay: null })
    assert.equal((await store.keys.listApiKeys()).find((k) => k.id === record.id)?.name, payload)
    assert.equal(await store.keys.revokeApiKey(payload, new Date()), false)
  }
  await assertIntact(store)
}

describe('SQL injection', () => {
  test('when injection strings go through every API input on SQLite, then nothing changes and nothing fails', async (t) => {
    const { request, key, store } = await testApp(t, { RATE_LIMIT_FREE: '1000/10000', RATE_LIMIT_ANONYMOUS: '1000/10000' }, { pets: [pet(1, { quantity: 7 })] })
    await throughTheApi(store, request, key)
  })

  test('when injection strings are free text on SQLite, then they are stored and returned literally', async (t) => {
    const { store } = await testApp(t, {}, { pets: [pet(1, { quantity: 7 })] })
    await freeText(store)
  })
})

if (await requirePostgres('SQL injection tests on PostgreSQL')) {
  describe('SQL injection on PostgreSQL', () => {
    test('when injection strings are free text on PostgreSQL, then they are stored and returned literally', async (t) => {
      const store = await tempPostgresStore(t)
      await importData(store, { pets: [pet(1, { quantity: 7 })], orders: [] })
      await createKey(store, 'production', { plan: 'free', name: 'seed', perMinute: null, perDay: null })
      await freeText(store)
    })
  })
}
