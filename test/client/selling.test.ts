/**
 * The typed client's holds and orders against the real server (an app on a loopback port, real fetch): each write
 * carries an Idempotency-Key, made by the client unless given and sent again on the client's own retries, so a write
 * whose answer was lost holds or sells once; a shortage is a typed error with its shortages; ids stay exact.
 */
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { describe, test, type TestContext } from 'node:test'
import { inspect } from 'node:util'
import { createClient, InsufficientScopeError, InsufficientStockError, PetstoreError, type ClientOptions } from '../../client/index.js'
import { createKey } from '../../src/access/keys.js'
import type { KeyScope, PetImport } from '../../src/model.js'
import { pet, testApp } from '../helpers/app.js'

const BIG = 9007199254740993n // 2^53 + 1: JSON.parse would read 9007199254740992
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** An app on a temp store with these pets, listening on a free loopback port, and a key of `scope`. */
async function served (t: TestContext, pets: PetImport[], scope: KeyScope = 'storefront') {
  const ctx = await testApp(t, {}, { pets })
  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = ctx.app.server.address() as AddressInfo
  const { key } = await createKey(ctx.store, 'production', { plan: 'pro', name: scope, perMinute: null, perDay: null, scope, expiresAt: null })
  return { ...ctx, baseUrl: `http://127.0.0.1:${port}`, seller: key }
}

/** A client whose requests are recorded (method, URL, Idempotency-Key) and whose sleeps return at once. */
function clientFor (baseUrl: string, key: string, options: Partial<ClientOptions> = {}) {
  const requests: Array<{ call: string, key: string | null }> = []
  const recording: typeof fetch = async (input, init) => {
    requests.push({ call: `${init?.method ?? 'GET'} ${String(input)}`, key: new Headers(init?.headers).get('idempotency-key') })
    return await (options.fetch ?? fetch)(input, init)
  }
  const client = createClient({ baseUrl, apiKey: key, sleep: async () => {}, random: () => 0.5, ...options, fetch: recording })
  return { client, requests }
}

async function rejection (promise: Promise<unknown>): Promise<PetstoreError> {
  try {
    await promise
  } catch (error) {
    assert.ok(error instanceof PetstoreError, `expected a PetstoreError, got ${inspect(error)}`)
    return error
  }
  assert.fail('expected the call to throw')
}

/** A fetch that lets every request reach the service and loses the answer of the first `lost` of them. */
function losing (lost: number): typeof fetch {
  let tries = 0
  return async (input, init) => {
    const response = await fetch(input, init)
    if (++tries <= lost) {
      await response.arrayBuffer()
      throw new TypeError('fetch failed: socket hang up')
    }
    return response
  }
}

describe('client: orders', () => {
  test('when an order is placed, approved and delivered, then each call answers the order, sends a key of its own, and the sale leaves the stock', async (t) => {
    const { baseUrl, seller, store } = await served(t, [pet(BIG, { quantity: 3 })])
    const { client, requests } = clientFor(baseUrl, seller)
    const placed = await client.placeOrder({ petId: BIG, quantity: 2, reference: 'web-7' })
    assert.equal(placed.status, 201)
    assert.equal(placed.replayed, false)
    assert.equal(placed.data.petId, BIG, 'the id stays exact')
    assert.equal(typeof placed.data.id, 'bigint')
    assert.deepEqual([placed.data.status, placed.data.source, placed.data.reference], ['placed', 'api', 'web-7'])
    assert.equal(placed.headers.get('location'), `orders/${placed.data.id}`)
    const approved = await client.approveOrder(placed.data.id)
    const delivered = await client.deliverOrder(placed.data.id)
    assert.deepEqual([approved.data.status, delivered.data.status, delivered.data.complete], ['approved', 'delivered', true])
    assert.deepEqual((await client.getOrder(placed.data.id)).data, delivered.data)
    assert.equal((await store.stock.getStockEntry(BIG))?.quantity, 1)
    const keys = requests.filter((r) => r.call.startsWith('POST')).map((r) => r.key ?? '')
    assert.equal(keys.length, 3)
    assert.equal(new Set(keys).size, 3, 'a key per call')
    for (const key of keys) assert.match(key, UUID)
    assert.deepEqual(requests.map((r) => r.call.replace(baseUrl, '')), [
      'POST /v1/store/orders', `POST /v1/store/orders/${placed.data.id}/approve`, `POST /v1/store/orders/${placed.data.id}/deliver`,
      `GET /v1/store/orders/${placed.data.id}`
    ])
  })

  test('when the answer to a placement or a delivery is lost, then the retry sends the same key and the order is placed and sold once', async (t) => {
    const { baseUrl, seller, store } = await served(t, [pet(1, { quantity: 3 })])
    const lossy = clientFor(baseUrl, seller, { fetch: losing(1) })
    const placed = await lossy.client.placeOrder({ petId: 1, quantity: 1 })
    assert.equal(placed.replayed, true, 'the first try placed it; the retry was answered from the record')
    assert.equal(placed.status, 201)
    assert.deepEqual(lossy.requests.map((r) => r.key), [placed.idempotencyKey, placed.idempotencyKey])
    assert.deepEqual((await createClient({ baseUrl, apiKey: seller }).listOrders()).data.map((o) => o.id), [placed.data.id], 'one order')

    const again = clientFor(baseUrl, seller, { fetch: losing(1) })
    const delivered = await again.client.deliverOrder(placed.data.id, { idempotencyKey: 'deliver-web-7' })
    assert.deepEqual([delivered.replayed, delivered.data.status, delivered.idempotencyKey], [true, 'delivered', 'deliver-web-7'])
    assert.deepEqual(again.requests.map((r) => r.key), ['deliver-web-7', 'deliver-web-7'])
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 2, 'sold once')
  })

  test('when too few units are available, then placeOrder throws InsufficientStockError with the shortages, after one request', async (t) => {
    const { baseUrl, seller } = await served(t, [pet(BIG, { quantity: 1 })])
    const { client, requests } = clientFor(baseUrl, seller)
    const error = await rejection(client.placeOrder({ petId: BIG, quantity: 2 }))
    assert.ok(error instanceof InsufficientStockError)
    assert.deepEqual([error.status, error.code, error.attempts], [409, 'insufficient_stock', 1])
    assert.deepEqual(error.shortages, [{ petId: BIG, requested: 2, available: 1 }])
    assert.equal(requests.length, 1, 'never retried')
  })

  test('when an order is moved from a state that does not allow it, then order_state_conflict is thrown and not retried', async (t) => {
    const { baseUrl, seller } = await served(t, [pet(1, { quantity: 3 })])
    const { client, requests } = clientFor(baseUrl, seller)
    const { data } = await client.placeOrder({ petId: 1, quantity: 1 })
    await client.cancelOrder(data.id)
    const error = await rejection(client.approveOrder(data.id))
    assert.deepEqual([error.status, error.code, error.attempts, error.shortages], [409, 'order_state_conflict', 1, null])
    assert.match(error.message, /is cancelled: it can no longer move/)
    assert.equal(requests.length, 3)
  })

  test('when a read key places an order, then an InsufficientScopeError names inventory:sell', async (t) => {
    const { baseUrl, seller } = await served(t, [pet(1, { quantity: 3 })], 'read')
    const error = await rejection(clientFor(baseUrl, seller).client.placeOrder({ petId: 1, quantity: 1 }))
    assert.ok(error instanceof InsufficientScopeError)
    assert.equal(error.requiredScope, 'inventory:sell')
  })
})

describe('client: holds', () => {
  test('when a hold is placed, read, listed, extended and confirmed, then each call answers the hold and the sale leaves the stock', async (t) => {
    const { baseUrl, seller, store } = await served(t, [pet(1, { quantity: 5 }), pet(BIG, { quantity: 2 })])
    const { client } = clientFor(baseUrl, seller)
    const placed = await client.placeHold({ lines: [{ petId: 1, quantity: 2 }, { petId: BIG, quantity: 1 }], expiresIn: 600, reference: 'cart-9' })
    assert.equal(placed.status, 201)
    assert.match(placed.data.id, /^hold_[A-Za-z0-9_-]{20}$/)
    assert.deepEqual(placed.data.lines, [{ petId: 1n, quantity: 2 }, { petId: BIG, quantity: 1 }])
    assert.deepEqual((await client.getHold(placed.data.id)).data, placed.data)
    const page = await client.listHolds({ petId: BIG })
    assert.deepEqual(page.data.map((h) => h.id), [placed.data.id])
    const all = []
    for await (const hold of client.allHolds({ reference: 'cart-9', limit: 1 })) all.push(hold.id)
    assert.deepEqual(all, [placed.data.id])
    const extended = await client.extendHold(placed.data.id, 900)
    assert.ok(Date.parse(String(extended.data.expiresAt)) > Date.parse(String(placed.data.expiresAt)))
    const confirmed = await client.confirmHold(placed.data.id)
    assert.equal(confirmed.data.state, 'confirmed')
    assert.deepEqual([(await store.stock.getStockEntry(1n))?.quantity, (await store.stock.getStockEntry(BIG))?.quantity], [3, 1])
  })

  test('when the answer to a confirmation is lost, then the retry with the same key is answered the confirmation, not hold_not_active', async (t) => {
    const { baseUrl, seller, store } = await served(t, [pet(1, { quantity: 5 })])
    const { data } = await clientFor(baseUrl, seller).client.placeHold({ lines: [{ petId: 1, quantity: 2 }] })
    const lossy = clientFor(baseUrl, seller, { fetch: losing(1) })
    const confirmed = await lossy.client.confirmHold(data.id)
    assert.deepEqual([confirmed.replayed, confirmed.data.state], [true, 'confirmed'])
    assert.equal(lossy.requests.length, 2)
    assert.equal(lossy.requests[0]?.key, lossy.requests[1]?.key)
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 3, 'sold once')
  })

  test('when a hold is released, then its units are available to the next hold; holding more is InsufficientStockError', async (t) => {
    const { baseUrl, seller } = await served(t, [pet(1, { quantity: 2 })])
    const { client } = clientFor(baseUrl, seller)
    const first = await client.placeHold({ lines: [{ petId: 1, quantity: 2 }] })
    const short = await rejection(client.placeHold({ lines: [{ petId: 1, quantity: 1 }] }))
    assert.ok(short instanceof InsufficientStockError)
    assert.deepEqual(short.shortages, [{ petId: 1n, requested: 1, available: 0 }])
    assert.equal((await client.releaseHold(first.data.id)).data.state, 'released')
    assert.equal((await client.placeHold({ lines: [{ petId: 1, quantity: 2 }] })).status, 201)
    const ended = await rejection(client.releaseHold(first.data.id))
    assert.deepEqual([ended.status, ended.code], [409, 'hold_not_active'])
  })
})

describe('client: availability', () => {
  test('when include is availability, then the entries show on hand, held and available now; without it, the specification\'s fields only', async (t) => {
    const { baseUrl, seller } = await served(t, [pet(1, { quantity: 5 }), pet(BIG, { quantity: 2 })])
    const { client, requests } = clientFor(baseUrl, seller)
    await client.placeHold({ lines: [{ petId: 1, quantity: 2 }] })
    await client.placeOrder({ petId: BIG, quantity: 2 })
    const listing = await client.listInventory({ include: 'availability' })
    assert.deepEqual(listing.data, [
      { petId: 1n, quantity: 5, status: 'available', onHand: 5, held: 2, available: 3 },
      { petId: BIG, quantity: 2, status: 'available', onHand: 2, held: 2, available: 0 }
    ])
    const entry = await client.getInventoryItem(BIG, { include: 'availability' })
    assert.deepEqual(entry.data, { petId: BIG, quantity: 2, status: 'available', onHand: 2, held: 2, available: 0 })
    const paged = []
    for await (const item of client.allInventory({ limit: 1, include: 'availability' })) paged.push(item.available)
    assert.deepEqual(paged, [3, 0])
    assert.deepEqual((await client.listInventory()).data, [{ petId: 1n, quantity: 5, status: 'available' }, { petId: BIG, quantity: 2, status: 'available' }])
    assert.match(requests.find((r) => r.call.includes(`/inventory/${BIG}`))?.call ?? '', /\?include=availability$/)
  })
})
