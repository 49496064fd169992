/**
 * POST /v1/inventory/{petId}/adjustments as API clients see it: a delta added atomically, the ledger row, the entry's
 * ETag, 409 stock_out_of_range, If-Match, the bounds of the body, and the gate.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, pet, testApp, type TestApp } from '../helpers/app.js'

const BIG = 9007199254740993n // 2^53 + 1

function adjust (app: TestApp, petId: string | bigint | number, body: unknown, headers: Record<string, string> = {}) {
  return app.request({
    method: 'POST',
    url: `/v1/inventory/${petId}/adjustments`,
    headers: { ...auth(app.key), 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body)
  })
}

describe('POST /v1/inventory/{petId}/adjustments', () => {
  test('when a delta is posted, then the stock grows by it, the entry and its new ETag are answered, and the ledger records it', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(BIG, { quantity: 2, status: 'pending' })] })
    const before = await app.request({ method: 'GET', url: `/v1/inventory/${BIG}`, headers: auth(app.key) })
    const res = await adjust(app, BIG, { delta: 3, reason: 'arrival', note: 'Three puppies' }, { 'x-request-id': 'delivery-7' })
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, `{"petId":${BIG},"quantity":5,"status":"pending"}`)
    assert.match(res.headers.etag as string, /^"r\d+"$/)
    assert.notEqual(res.headers.etag, before.headers.etag)
    assert.match(res.headers['x-ratelimit-remaining'] as string, /^\d+$/)
    const last = (await app.store.stock.stockHistory(BIG, 10)).at(-1)
    assert.deepEqual([last?.previousQuantity, last?.quantity, last?.reason, last?.note, last?.requestId], [2, 5, 'arrival', 'Three puppies', 'delivery-7'])
    const listing = await app.request({ method: 'GET', url: '/v1/inventory', headers: auth(app.key) })
    assert.equal(listing.json()[0].quantity, 5, 'the listing shows the change at once')
  })

  test('when a negative delta is posted without a reason, then stock is taken away and recorded as an adjustment', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 10 })] })
    const res = await adjust(app, 1, { delta: -4 })
    assert.equal(res.statusCode, 200)
    assert.equal(res.json().quantity, 6)
    const last = (await app.store.stock.stockHistory(1n, 10)).at(-1)
    assert.deepEqual([last?.previousQuantity, last?.quantity, last?.reason, last?.note], [10, 6, 'adjustment', null])
  })

  test('when the result would fall below 0 or rise above 1,000,000,000, then it answers 409 stock_out_of_range and changes nothing', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 }), pet(2, { quantity: 999_999_999 })] })
    for (const [petId, delta, now] of [[1, -3, 2], [2, 2, 999_999_999]] as const) {
      const res = await adjust(app, petId, { delta })
      assert.equal(res.statusCode, 409)
      assert.equal(res.json().code, 'stock_out_of_range')
      assert.equal(res.json().status, 409)
      assert.match(res.json().message, new RegExp(`now ${now}`))
      assert.equal((await app.store.stock.getStockEntry(BigInt(petId)))?.quantity, now)
      assert.equal((await app.store.stock.stockHistory(BigInt(petId), 10)).length, 1, 'only the import is in the ledger')
    }
  })

  test('when many adjustments arrive at once, then none is lost', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 0 })] })
    const answers = await Promise.all(Array.from({ length: 40 }, () => adjust(app, 1, { delta: 1 })))
    assert.ok(answers.every((res) => res.statusCode === 200))
    assert.deepEqual(answers.map((res) => res.json().quantity).sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i + 1))
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 40)
  })

  test('when If-Match holds an old ETag, then it answers 412 with the current ETag and changes nothing; with the current one it applies', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const first = await app.request({ method: 'GET', url: '/v1/inventory/1', headers: auth(app.key) })
    const moved = await adjust(app, 1, { delta: 1 })
    const stale = await adjust(app, 1, { delta: 1 }, { 'if-match': first.headers.etag as string })
    assert.equal(stale.statusCode, 412)
    assert.equal(stale.json().code, 'precondition_failed')
    assert.equal(stale.headers.etag, moved.headers.etag)
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 6)
    const fresh = await adjust(app, 1, { delta: 1 }, { 'if-match': moved.headers.etag as string })
    assert.equal(fresh.statusCode, 200)
    assert.equal(fresh.json().quantity, 7)
  })

  const invalid: Array<[string, unknown]> = [
    ['a delta of 0', { delta: 0 }],
    ['a fractional delta', { delta: 1.5 }],
    ['a delta above 1,000,000,000', { delta: 1_000_000_001 }],
    ['a delta below -1,000,000,000', { delta: -1_000_000_001 }],
    ['a delta as text', { delta: '3' }],
    ['no delta', { reason: 'arrival' }],
    ['a quantity instead', { quantity: 3 }],
    ['an unknown reason', { delta: 1, reason: 'theft' }]
  ]
  for (const [what, body] of invalid) {
    test(`when the body has ${what}, then it answers 400 invalid_request and changes nothing`, async (t) => {
      const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
      const res = await adjust(app, 1, body)
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().code, 'invalid_request')
      assert.equal((await app.store.stock.stockHistory(1n, 10)).length, 1)
    })
  }

  test('when the delta is 0, then the message says it must not be 0', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    assert.equal((await adjust(app, 1, { delta: 0 })).json().message, 'body.delta must not be 0.')
  })

  test('when If-Match names a revision spelled with leading zeros or beyond int64, then it matches nothing: 412, nothing changes', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const current = (await app.request({ method: 'GET', url: '/v1/inventory/1', headers: auth(app.key) })).headers.etag as string
    const padded = current.replace('"r', '"r000')
    for (const tag of [padded, '"r9999999999999999999"', `"r12345", "r9999999999999999999"`]) {
      const res = await adjust(app, 1, { delta: 1 }, { 'if-match': tag })
      assert.equal(res.statusCode, 412, tag)
      assert.equal(res.json().code, 'precondition_failed')
    }
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 5)
  })

  test('when the pet has no stock entry, then it answers 404 and records nothing; without a key it answers 401', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const missing = await adjust(app, 404, { delta: 1 })
    assert.equal(missing.statusCode, 404)
    assert.equal(missing.json().code, 'not_found')
    const keyless = await app.request({ method: 'POST', url: '/v1/inventory/1/adjustments', headers: { 'content-type': 'application/json' }, payload: '{"delta":1}' })
    assert.equal(keyless.statusCode, 401)
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 5)
  })

  test('when another method is used on the adjustments path, then it answers 405 naming POST', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const res = await app.request({ method: 'GET', url: '/v1/inventory/1/adjustments', headers: auth(app.key) })
    assert.equal(res.statusCode, 405)
    assert.match(res.headers.allow as string, /POST/)
  })
})
