/**
 * Orders placed through the API, as a storefront meets them, on both stores: an order holds its units when placed,
 * delivery sells them (the listing shows it at once, the ledger records a sale with the order's reference),
 * cancelling releases them, every wrong move is 409 order_state_conflict, retries are answered once, imported orders
 * are readable and never moved, and the classic listing keeps its shape and leaves cancelled orders out.
 * docs/adr/0037-orders-hold-their-stock.md
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, test, type TestContext } from 'node:test'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { createKey } from '../../src/access/keys.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import type { KeyScope, Order, PetImport } from '../../src/model.js'
import type { Store } from '../../src/store/store.js'
import { auth, order, pet, tempStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'

const json = { 'content-type': 'application/json' }
const T0 = Date.parse('2026-11-27T12:00:00Z')

interface Shop {
  app: FastifyInstance
  store: Store
  /** A storefront key, and a read key. */
  seller: string
  reader: string
  request: (options: InjectOptions) => Promise<LightMyRequestResponse>
  /** A selling write with the seller's key and a new Idempotency-Key unless one is given. */
  sell: (url: string, payload?: object, key?: string) => Promise<LightMyRequestResponse>
  get: (url: string) => Promise<LightMyRequestResponse>
}

async function keyOf (store: Store, scope: KeyScope): Promise<string> {
  const { key } = await createKey(store, 'production', { plan: 'enterprise', name: scope, perMinute: 100_000, perDay: 1_000_000, scope, expiresAt: null })
  return key
}

async function shopOn (t: TestContext, store: Store, data: { pets?: PetImport[], orders?: Order[] } = {}, env: Record<string, string> = {}): Promise<Shop> {
  await importData(store, { pets: data.pets ?? [pet(1, { quantity: 5 }), pet(2, { quantity: 2 })], orders: data.orders ?? [] })
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0', ...env }), { store, logger: false, clock: () => T0 })
  t.after(() => app.close())
  const seller = await keyOf(store, 'storefront')
  const reader = await keyOf(store, 'read')
  const request = (options: InjectOptions) => app.inject(options)
  const sell = (url: string, payload?: object, key: string = randomUUID()) =>
    app.inject({ method: 'POST', url, headers: { ...auth(seller), ...(payload === undefined ? {} : json), 'idempotency-key': key }, ...(payload === undefined ? {} : { payload }) })
  const get = (url: string) => app.inject({ method: 'GET', url, headers: auth(seller) })
  return { app, store, seller, reader, request, sell, get }
}

/** A pet's entry with availability, as a storefront reads it. */
async function onHand (shop: Shop, petId: number): Promise<number> {
  const res = await shop.get(`/v1/inventory/${petId}`)
  assert.equal(res.statusCode, 200, res.body)
  return res.json<{ quantity: number }>().quantity
}

/** The quantity of a pet in the whole listing (the cached one a GET /v1/inventory answers). */
async function listed (shop: Shop, petId: number): Promise<number | undefined> {
  const res = await shop.get('/v1/inventory')
  return res.json<Array<{ petId: number, quantity: number }>>().find((item) => item.petId === petId)?.quantity
}

function suite (name: string, makeStore: (t: TestContext) => Promise<Store>): void {
  test(`${name}: when an order is placed, approved and delivered, then the units leave the stock as a sale with its reference and the listing shows it at once`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    assert.equal(await listed(shop, 1), 5, 'the listing is cached before the sale')
    const placed = await shop.sell('/v1/store/orders', { petId: 1, quantity: 2, shipDate: '2026-12-01T09:00:00Z', reference: 'web-10482' })
    assert.equal(placed.statusCode, 201, placed.body)
    const order = placed.json()
    assert.equal(placed.headers.location, `orders/${order.id}`)
    assert.equal(new URL(placed.headers.location, 'http://x/v1/store/orders').pathname, `/v1/store/orders/${order.id}`)
    assert.match(order.holdId, /^hold_[A-Za-z0-9_-]{20}$/)
    assert.deepEqual({ ...order, id: 0, holdId: '' }, {
      id: 0, petId: 1, quantity: 2, shipDate: '2026-12-01T09:00:00Z', status: 'placed', complete: false,
      source: 'api', reference: 'web-10482', holdId: '', createdAt: new Date(T0).toISOString(), updatedAt: new Date(T0).toISOString()
    })
    assert.equal(await onHand(shop, 1), 5, 'placing holds the units; it sells nothing')

    const approved = await shop.sell(`/v1/store/orders/${order.id}/approve`)
    assert.equal(approved.statusCode, 200, approved.body)
    assert.equal(approved.json().status, 'approved')
    const delivered = await shop.sell(`/v1/store/orders/${order.id}/deliver`)
    assert.equal(delivered.statusCode, 200, delivered.body)
    assert.deepEqual([delivered.json().status, delivered.json().complete], ['delivered', true])

    assert.equal(await listed(shop, 1), 3, 'GET /v1/inventory shows the sale as soon as the delivery is answered')
    assert.equal(await onHand(shop, 1), 3)
    const sales = (await shop.store.stock.stockHistory(1n, 100)).filter((entry) => entry.reason === 'sale')
    assert.deepEqual(sales.map((entry) => [entry.previousQuantity, entry.quantity, entry.reference]), [[5, 3, 'web-10482']])
    const read = await shop.request({ method: 'GET', url: `/v1/store/orders/${order.id}`, headers: auth(shop.reader) })
    assert.equal(read.statusCode, 200)
    assert.deepEqual(read.json(), delivered.json())
  })

  test(`${name}: when an order holds the units, then another order for more than is left is refused 409 insufficient_stock saying how many are available`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    assert.equal((await shop.sell('/v1/store/orders', { petId: 2, quantity: 2 })).statusCode, 201)
    const refused = await shop.sell('/v1/store/orders', { petId: 2, quantity: 1 })
    assert.equal(refused.statusCode, 409)
    assert.equal(refused.json().code, 'insufficient_stock')
    assert.deepEqual(refused.json().shortages, [{ petId: 2, requested: 1, available: 0 }])
    assert.match(refused.json().message, /pet 2 has 0 units available, 1 was requested/)
    const unknown = await shop.sell('/v1/store/orders', { petId: 99, quantity: 1 })
    assert.equal(unknown.statusCode, 404)
    assert.equal(unknown.json().code, 'not_found')
  })

  test(`${name}: when an order is cancelled, then its units are available again and the stock is unchanged`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    const order = (await shop.sell('/v1/store/orders', { petId: 2, quantity: 2 })).json()
    assert.equal((await shop.sell('/v1/store/orders', { petId: 2, quantity: 1 })).statusCode, 409, 'both units are held')
    const cancelled = await shop.sell(`/v1/store/orders/${order.id}/cancel`)
    assert.equal(cancelled.statusCode, 200, cancelled.body)
    assert.deepEqual([cancelled.json().status, cancelled.json().complete], ['cancelled', false])
    assert.equal(await onHand(shop, 2), 2)
    const again = await shop.sell('/v1/store/orders', { petId: 2, quantity: 2 })
    assert.equal(again.statusCode, 201, 'the released units can be ordered again')
    assert.equal((await shop.store.stock.stockHistory(2n, 100)).filter((entry) => entry.reason === 'sale').length, 0)
  })

  test(`${name}: when a move is not allowed from the order's state, then it is 409 order_state_conflict naming the state and the allowed moves`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    const place = async () => (await shop.sell('/v1/store/orders', { petId: 1, quantity: 1 })).json<{ id: number }>().id
    const approved = await place()
    assert.equal((await shop.sell(`/v1/store/orders/${approved}/approve`)).statusCode, 200)
    const delivered = await place()
    assert.equal((await shop.sell(`/v1/store/orders/${delivered}/deliver`)).statusCode, 200)
    const cancelled = await place()
    assert.equal((await shop.sell(`/v1/store/orders/${cancelled}/cancel`)).statusCode, 200)
    const wrong: Array<[number, string, RegExp]> = [
      [approved, 'approve', /is approved: it can be delivered or cancelled, not approved/],
      [delivered, 'approve', /is delivered: it can no longer move/],
      [delivered, 'deliver', /is delivered: it can no longer move/],
      [delivered, 'cancel', /is delivered: it can no longer move/],
      [cancelled, 'approve', /is cancelled: it can no longer move/],
      [cancelled, 'deliver', /is cancelled: it can no longer move/],
      [cancelled, 'cancel', /is cancelled: it can no longer move/]
    ]
    for (const [id, move, message] of wrong) {
      const res = await shop.sell(`/v1/store/orders/${id}/${move}`)
      assert.equal(res.statusCode, 409, `${move} of order ${id}`)
      assert.equal(res.json().code, 'order_state_conflict')
      assert.match(res.json().message, message)
    }
    assert.equal(await onHand(shop, 1), 4, 'only the one delivery sold')
    const missing = await shop.sell('/v1/store/orders/424242/approve')
    assert.equal(missing.statusCode, 404)
  })

  test(`${name}: when a write is retried with its Idempotency-Key, then it is answered as the first and done once; another request with the key is 422`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    const body = { petId: 1, quantity: 2, reference: 'web-1' }
    const first = await shop.sell('/v1/store/orders', body, 'place-1')
    const retry = await shop.sell('/v1/store/orders', body, 'place-1')
    assert.equal(retry.statusCode, 201)
    assert.equal(retry.headers['idempotent-replayed'], 'true')
    assert.equal(retry.headers.location, first.headers.location)
    assert.deepEqual(retry.json(), first.json())
    const other = await shop.sell('/v1/store/orders', { ...body, quantity: 1 }, 'place-1')
    assert.equal(other.statusCode, 422)
    assert.equal(other.json().code, 'idempotency_key_reused')

    const id = first.json<{ id: number }>().id
    const delivered = await shop.sell(`/v1/store/orders/${id}/deliver`, undefined, 'deliver-1')
    const again = await shop.sell(`/v1/store/orders/${id}/deliver`, undefined, 'deliver-1')
    assert.equal(again.statusCode, 200, 'a retried delivery is answered, not refused as already delivered')
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.deepEqual(again.json(), delivered.json())
    assert.equal(await onHand(shop, 1), 3, 'sold once')

    const keyless = await shop.request({ method: 'POST', url: '/v1/store/orders', headers: { ...auth(shop.seller), ...json }, payload: body })
    assert.equal(keyless.statusCode, 400)
    assert.match(keyless.json().message, /Idempotency-Key is required/)
  })

  test(`${name}: when orders were imported, then they are readable, never moved, and the classic listing shows them as before`, async (t) => {
    const shop = await shopOn(t, await makeStore(t), {
      pets: [pet(1, { quantity: 5 })],
      orders: [order(1, { petId: 1n, status: 'placed' }), order(2, { petId: 1n, status: 'delivered', complete: true })]
    })
    const read = await shop.get('/v1/store/orders/1')
    assert.equal(read.statusCode, 200)
    assert.deepEqual(read.json(), {
      id: 1, petId: 1, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false,
      source: 'import', reference: null, holdId: null, createdAt: null, updatedAt: null
    })
    for (const move of ['approve', 'deliver', 'cancel']) {
      const res = await shop.sell(`/v1/store/orders/1/${move}`)
      assert.equal(res.statusCode, 409, move)
      assert.equal(res.json().code, 'order_state_conflict')
      assert.match(res.json().message, /imported/)
    }
    assert.equal(await onHand(shop, 1), 5)
    const listing = await shop.get('/v1/store/orders')
    assert.deepEqual(listing.json(), [
      { id: 1, petId: 1, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false },
      { id: 2, petId: 1, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'delivered', complete: true }
    ])
  })

  test(`${name}: when API orders are placed, then the classic listing shows them in the classic shape and leaves the cancelled ones out`, async (t) => {
    const shop = await shopOn(t, await makeStore(t), { pets: [pet(1, { quantity: 5 })], orders: [order(1, { petId: 1n })] })
    const kept = (await shop.sell('/v1/store/orders', { petId: 1, quantity: 1, shipDate: '2026-12-01T09:00:00Z' })).json<{ id: number }>().id
    const dropped = (await shop.sell('/v1/store/orders', { petId: 1, quantity: 1 })).json<{ id: number }>().id
    assert.equal((await shop.sell(`/v1/store/orders/${dropped}/cancel`)).statusCode, 200)
    const listing = await shop.get('/v1/store/orders')
    assert.equal(listing.statusCode, 200)
    assert.deepEqual(listing.json(), [
      { id: 1, petId: 1, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false },
      { id: kept, petId: 1, quantity: 1, shipDate: '2026-12-01T09:00:00Z', status: 'placed', complete: false }
    ])
    assert.equal((await shop.get(`/v1/store/orders/${dropped}`)).json().status, 'cancelled', 'a cancelled order stays readable')
  })

  test(`${name}: when an order's hold is confirmed, released or extended through /v1/holds, then it is 409 hold_of_order and the order keeps its units`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    const order = (await shop.sell('/v1/store/orders', { petId: 2, quantity: 2, reference: 'web-5' })).json<{ id: number, holdId: string }>()
    for (const [move, payload] of [['confirm', {}], ['release', {}], ['extend', { expiresIn: 60 }]] as const) {
      const res = await shop.sell(`/v1/holds/${order.holdId}/${move}`, payload)
      assert.equal(res.statusCode, 409, move)
      assert.equal(res.json().code, 'hold_of_order')
    }
    assert.equal((await shop.sell('/v1/store/orders', { petId: 2, quantity: 1 })).statusCode, 409, 'the units are still held')
    assert.equal((await shop.get(`/v1/store/orders/${order.id}`)).json().status, 'placed')
  })

  test(`${name}: when an order holds stock, then its hold reads back with its orderId and no expiry, alone and in the holds listing`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    const order = (await shop.sell('/v1/store/orders', { petId: 2, quantity: 2, reference: 'web-6' })).json<{ id: number, holdId: string }>()
    const checkout = (await shop.sell('/v1/holds', { lines: [{ petId: 1, quantity: 1 }] })).json<{ id: string }>()
    const hold = await shop.get(`/v1/holds/${order.holdId}`)
    assert.equal(hold.statusCode, 200, hold.body)
    assert.deepEqual(hold.json(), {
      id: order.holdId, state: 'active', lines: [{ petId: 2, quantity: 2 }], reference: 'web-6',
      createdAt: new Date(T0).toISOString(), expiresAt: null, endedAt: null, orderId: order.id
    })
    const listing = await shop.get('/v1/holds')
    assert.equal(listing.statusCode, 200, listing.body)
    const holds = listing.json<Array<{ id: string, orderId?: number }>>()
    assert.deepEqual(holds.map((one) => [one.id, one.orderId]).sort(), [[order.holdId, order.id], [checkout.id, undefined]].sort())
    assert.equal('orderId' in (holds.find((one) => one.id === checkout.id) as object), false, 'a checkout\'s hold has no orderId')
  })

  test(`${name}: when a read key places or moves an order, then it is refused 403 naming inventory:sell`, async (t) => {
    const shop = await shopOn(t, await makeStore(t))
    const id = (await shop.sell('/v1/store/orders', { petId: 1, quantity: 1 })).json<{ id: number }>().id
    for (const [url, payload] of [['/v1/store/orders', { petId: 1, quantity: 1 }], [`/v1/store/orders/${id}/approve`, undefined]] as const) {
      const res = await shop.request({ method: 'POST', url, headers: { ...auth(shop.reader), ...json, 'idempotency-key': randomUUID() }, ...(payload === undefined ? {} : { payload }) })
      assert.equal(res.statusCode, 403, url)
      assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore", error="insufficient_scope", scope="inventory:sell"')
    }
    assert.equal((await shop.request({ method: 'GET', url: `/v1/store/orders/${id}`, headers: auth(shop.reader) })).statusCode, 200)
  })
}

describe('orders placed through the API (SQLite)', () => {
  suite('sqlite', tempStore)
})

const postgresUp = await requirePostgres('orders placed through the API on PostgreSQL')
describe('orders placed through the API (PostgreSQL)', { skip: !postgresUp }, () => {
  suite('postgres', (t) => tempPostgresStore(t))
})
