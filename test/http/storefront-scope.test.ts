/**
 * The storefront scope as a web shop's server meets it: a key of scope storefront reads, and places and moves holds and
 * orders, but is refused every stock write and webhooks with 403 insufficient_scope naming inventory:write; a read key
 * is refused the selling writes naming inventory:sell. docs/adr/0039-storefront-scope.md
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, test, type TestContext } from 'node:test'
import { createKey, rotateKey } from '../../src/access/keys.js'
import type { KeyScope } from '../../src/model.js'
import type { Store } from '../../src/store/store.js'
import { auth, order, pet, testApp } from '../helpers/app.js'

const json = { 'content-type': 'application/json' }

async function keyOf (store: Store, scope: KeyScope): Promise<{ id: string, key: string }> {
  const { record, key } = await createKey(store, 'production', { plan: 'pro', name: scope, perMinute: null, perDay: null, scope, expiresAt: null })
  return { id: record.id, key }
}

async function shop (t: TestContext) {
  const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 3 })], orders: [order(10, { petId: 1n })] })
  return { ...app, storefront: await keyOf(app.store, 'storefront'), reader: await keyOf(app.store, 'read') }
}

const stockWrites = [
  { method: 'PATCH' as const, url: '/v1/inventory/1', payload: { quantity: 7 } },
  { method: 'POST' as const, url: '/v1/inventory/1/adjustments', payload: { delta: 2 } },
  { method: 'POST' as const, url: '/v1/inventory/batch', payload: { changes: [{ petId: 1, quantity: 9 }] } },
  { method: 'POST' as const, url: '/v1/webhooks', payload: { url: 'https://hooks.example.com/stock', events: ['inventory.changed'] } },
  { method: 'GET' as const, url: '/v1/webhooks' }
]

describe('the storefront scope', () => {
  test('when a storefront key reads the inventory, an entry, the orders and its quota, then it is answered 200', async (t) => {
    const { request, storefront } = await shop(t)
    for (const url of ['/v1/inventory', '/v1/inventory/1', '/v1/store/orders', '/v1/rate_limit']) {
      const res = await request({ method: 'GET', url, headers: auth(storefront.key) })
      assert.equal(res.statusCode, 200, url)
    }
    const quota = await request({ method: 'GET', url: '/v1/rate_limit', headers: auth(storefront.key) })
    assert.deepEqual(quota.json().scopes, ['inventory:read', 'inventory:sell'])
  })

  test('when a storefront key places holds and orders and reads them, then it is answered; a read key reads them but is refused the writes naming inventory:sell', async (t) => {
    const { request, storefront, reader } = await shop(t)
    const sell = (key: string, url: string, payload?: object) => request({
      method: 'POST', url, headers: { ...auth(key), ...(payload === undefined ? {} : json), 'idempotency-key': randomUUID() }, ...(payload === undefined ? {} : { payload })
    })
    const hold = await sell(storefront.key, '/v1/holds', { lines: [{ petId: 1, quantity: 1 }] })
    assert.equal(hold.statusCode, 201, hold.body)
    const order = await sell(storefront.key, '/v1/store/orders', { petId: 2, quantity: 1 })
    assert.equal(order.statusCode, 201, order.body)
    const holdId = hold.json<{ id: string }>().id
    const orderId = order.json<{ id: number }>().id
    for (const url of ['/v1/holds?petId=1', `/v1/holds/${holdId}`, `/v1/store/orders/${orderId}`, '/v1/inventory?include=availability']) {
      for (const key of [storefront.key, reader.key]) assert.equal((await request({ method: 'GET', url, headers: auth(key) })).statusCode, 200, url)
    }
    const writes: Array<[string, object | undefined]> = [
      ['/v1/holds', { lines: [{ petId: 1, quantity: 1 }] }], [`/v1/holds/${holdId}/extend`, { expiresIn: 60 }], [`/v1/holds/${holdId}/confirm`, undefined],
      [`/v1/holds/${holdId}/release`, undefined], ['/v1/store/orders', { petId: 1, quantity: 1 }], [`/v1/store/orders/${orderId}/approve`, undefined],
      [`/v1/store/orders/${orderId}/deliver`, undefined], [`/v1/store/orders/${orderId}/cancel`, undefined]
    ]
    for (const [url, payload] of writes) {
      const res = await sell(reader.key, url, payload)
      assert.equal(res.statusCode, 403, url)
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore", error="insufficient_scope", scope="inventory:sell"', url)
    }
    assert.equal((await sell(storefront.key, `/v1/holds/${holdId}/confirm`, {})).statusCode, 200, 'the storefront key sells')
    assert.equal((await sell(storefront.key, `/v1/store/orders/${orderId}/cancel`)).statusCode, 200)
  })

  test('when a storefront key sets, adjusts or batches stock or manages webhooks, then it gets 403 naming inventory:write and nothing changes', async (t) => {
    const { request, storefront } = await shop(t)
    for (const write of stockWrites) {
      const res = await request({ ...write, headers: { ...auth(storefront.key), ...('payload' in write ? json : {}), 'idempotency-key': 'k-1' } })
      assert.equal(res.statusCode, 403, write.url)
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore", error="insufficient_scope", scope="inventory:write"', write.url)
      assert.deepEqual(res.json(), {
        code: 'insufficient_scope', message: 'This operation needs an API key with the inventory:write scope; this key has inventory:sell.', status: 403
      })
    }
    const entry = await request({ method: 'GET', url: '/v1/inventory/1', headers: auth(storefront.key) })
    assert.equal(entry.json().quantity, 5)
  })

  test('when a storefront key is rotated, then the new key keeps the scope: it reads and is still refused stock writes', async (t) => {
    const { store, request, storefront } = await shop(t)
    const rotated = await rotateKey(store, 'production', storefront.id, { overlapMs: 0 })
    assert.equal(rotated.record.scope, 'storefront')
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers: auth(rotated.key) })).statusCode, 200)
    const res = await request({ method: 'PATCH', url: '/v1/inventory/1', payload: { quantity: 1 }, headers: { ...auth(rotated.key), ...json } })
    assert.equal(res.statusCode, 403)
    assert.equal(res.json().code, 'insufficient_scope')
  })

  test('when the OpenAPI document is read, then the stock writes need inventory:write and say so in their 403', async (t) => {
    const { request, key } = await shop(t)
    const document = (await request({ method: 'GET', url: '/v1/openapi.json', headers: auth(key) })).json()
    const patch = document.paths['/inventory/{petId}'].patch
    assert.deepEqual(patch.security, [{ bearerAuth: ['inventory:write'] }])
    const challenge = patch.responses['403'].headers['WWW-Authenticate'].description as string
    assert.match(challenge, /scope="inventory:write"/)
    assert.match(document.components.securitySchemes.bearerAuth.description as string, /inventory:sell/)
  })
})
