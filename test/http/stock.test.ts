/**
 * Stock changes as store staff and API clients see them: the ledger a PATCH writes (reason, note, key, request),
 * the per-entry ETag, GET of one entry, and optimistic concurrency with If-Match (412 precondition_failed).
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, pet, testApp, type TestApp } from '../helpers/app.js'
import { importData } from '../../src/domain/import.js'

const BIG = 9007199254740993n // 2^53 + 1

function patch (app: TestApp, petId: string | bigint, body: unknown, headers: Record<string, string> = {}) {
  return app.request({
    method: 'PATCH',
    url: `/v1/inventory/${petId}`,
    headers: { ...auth(app.key), 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body)
  })
}

function getEntry (app: TestApp, petId: string | bigint, headers: Record<string, string> = {}) {
  return app.request({ method: 'GET', url: `/v1/inventory/${petId}`, headers: { ...auth(app.key), ...headers } })
}

async function keyId (app: TestApp): Promise<string | undefined> {
  return (await app.store.keys.listApiKeys())[0]?.id
}

describe('PATCH /v1/inventory/{petId}: the stock ledger', () => {
  test('when a PATCH has a reason and a note, then the ledger records them with the previous quantity, key id, request id and time', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(BIG, { quantity: 2 })] })
    const res = await patch(app, BIG, { quantity: 14, reason: 'arrival', note: 'Litter of 12 from the breeder' }, { 'x-request-id': 'delivery-0042' })
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, `{"petId":${BIG},"quantity":14,"status":"available"}`)
    const last = (await app.store.stock.stockHistory(BIG, 10)).at(-1)
    assert.deepEqual({ ...last, id: 0n }, {
      id: 0n,
      petId: BIG,
      event: null,
      previousQuantity: 2,
      quantity: 14,
      reason: 'arrival',
      note: 'Litter of 12 from the breeder',
      reference: null,
      keyId: await keyId(app),
      requestId: 'delivery-0042',
      batchId: null,
      status: null,
      previousStatus: null,
      holdId: null,
      held: null,
      reorderPoint: null,
      at: new Date(app.clock.now)
    })
  })

  test('when a PATCH has no reason, then it is recorded as an adjustment without a note', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    assert.equal((await patch(app, '1', { quantity: 1 })).statusCode, 200)
    const last = (await app.store.stock.stockHistory(1n, 10)).at(-1)
    assert.equal(last?.reason, 'adjustment')
    assert.equal(last?.note, null)
    assert.equal(last?.previousQuantity, 2)
  })

  test('when a return is recorded, then the reason is return', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    assert.equal((await patch(app, '1', { quantity: 3, reason: 'return', note: 'Returned by customer #77' })).statusCode, 200)
    assert.deepEqual((await app.store.stock.stockHistory(1n, 10)).map((e) => e.reason), ['import', 'return'])
  })

  for (const [what, body, message] of [
    ['an unknown reason', { quantity: 1, reason: 'theft' }, 'body.reason must be one of arrival, return, adjustment, sale, loss, recount.'],
    ['a reason of the wrong type', { quantity: 1, reason: 1 }, null],
    ['an empty note', { quantity: 1, note: '' }, null],
    ['a null note', { quantity: 1, note: null }, null],
    ['a note of 501 characters', { quantity: 1, note: 'x'.repeat(501) }, null],
    ['a note with a control character', { quantity: 1, note: 'ok\u001b[31mred' }, null],
    ['a note with a newline', { quantity: 1, note: 'two\nlines' }, null],
    // What a terminal interprets or reorders: the C1 CSI, DEL, line separators, bidi overrides and isolates.
    ['a note with a C1 control character', { quantity: 1, note: 'ok\u009b31mred' }, null],
    ['a note with DEL', { quantity: 1, note: 'ok\u007f' }, null],
    ['a note with a line separator', { quantity: 1, note: 'a\u2028b' }, null],
    ['a note with a paragraph separator', { quantity: 1, note: 'a\u2029b' }, null],
    ['a note with a right-to-left override', { quantity: 1, note: 'cost \u202e0001' }, null],
    ['a note with a left-to-right embedding', { quantity: 1, note: '\u202aabc\u202c' }, null],
    ['a note with a first-strong isolate', { quantity: 1, note: 'a\u2068b\u2069' }, null],
    ['a note with a left-to-right isolate', { quantity: 1, note: '\u2066x' }, null]
  ] as const) {
    test(`when the body has ${what}, then it answers 400 and neither stock nor ledger change`, async (t) => {
      const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
      const before = await app.store.stock.stockHistory(1n, 10)
      const res = await patch(app, '1', body)
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().code, 'invalid_request')
      if (message !== null) assert.equal(res.json().message, message)
      assert.deepEqual(await app.store.stock.stockHistory(1n, 10), before)
      assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 2)
    })
  }

  test('when a note has 500 characters of any script, then it is accepted and kept exactly', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const note = 'Ünïcödé 🐕 '.repeat(50).slice(0, 500)
    assert.equal((await patch(app, '1', { quantity: 3, note })).statusCode, 200)
    assert.equal((await app.store.stock.stockHistory(1n, 10)).at(-1)?.note, note)
  })

  test('when the PATCH answers 404, then nothing is recorded', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: undefined })] })
    assert.equal((await patch(app, '1', { quantity: 3, reason: 'arrival' })).statusCode, 404)
    assert.deepEqual(await app.store.stock.stockHistory(1n, 10), [])
  })
})

describe('ETags of stock entries', () => {
  test('when a PATCH succeeds, then it carries a strong ETag that GET of the entry answers too', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2, status: 'pending' })] })
    const before = await getEntry(app, '1')
    assert.equal(before.statusCode, 200)
    assert.deepEqual(before.json(), { petId: 1, quantity: 2, status: 'pending' })
    const updated = await patch(app, '1', { quantity: 5 })
    const etag = String(updated.headers.etag)
    assert.match(etag, /^"[^"]+"$/, 'a strong ETag: no W/ prefix')
    assert.notEqual(etag, before.headers.etag)
    const after = await getEntry(app, '1')
    assert.equal(after.headers.etag, etag)
    assert.deepEqual(after.json(), { petId: 1, quantity: 5, status: 'pending' })
  })

  test('when an entry is fetched by an id above 2^53, then that exact entry is answered', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(BIG, { quantity: 7 }), pet(BIG - 1n, { quantity: 1 })] })
    const res = await getEntry(app, BIG)
    assert.equal(res.body, `{"petId":${BIG},"quantity":7,"status":"available"}`)
  })

  test('when the pet has no stock entry, then GET of the entry answers 404; a malformed id answers 400', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: undefined })] })
    assert.equal((await getEntry(app, '1')).json().code, 'not_found')
    assert.equal((await getEntry(app, '2')).statusCode, 404)
    assert.equal((await getEntry(app, '01')).statusCode, 400)
    assert.equal((await getEntry(app, '9223372036854775808')).statusCode, 400)
  })

  test('when GET of an entry sends its current ETag in If-None-Match, then it answers 304 without counting against the limit', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const first = await getEntry(app, '1')
    const remaining = Number(first.headers['x-ratelimit-remaining'])
    const revalidated = await getEntry(app, '1', { 'if-none-match': String(first.headers.etag) })
    assert.equal(revalidated.statusCode, 304)
    assert.equal(revalidated.body, '')
    assert.equal(revalidated.headers.etag, first.headers.etag)
    assert.equal(Number(revalidated.headers['x-ratelimit-remaining']), remaining)
    await patch(app, '1', { quantity: 3 })
    const changed = await getEntry(app, '1', { 'if-none-match': String(first.headers.etag) })
    assert.equal(changed.statusCode, 200)
    assert.deepEqual(changed.json(), { petId: 1, quantity: 3, status: 'available' })
  })

  test('when the pet status changes (re-import), then the entry ETag changes', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const before = (await getEntry(app, '1')).headers.etag
    await importData(app.store, { pets: [pet(1, { quantity: undefined, status: 'sold' })], orders: [] })
    assert.notEqual((await getEntry(app, '1')).headers.etag, before)
  })
})

describe('PATCH with If-Match (optimistic concurrency)', () => {
  test('when If-Match holds the current ETag, then the change applies and a new ETag is answered', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const etag = String((await getEntry(app, '1')).headers.etag)
    const res = await patch(app, '1', { quantity: 9 }, { 'if-match': etag })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { petId: 1, quantity: 9, status: 'available' })
    assert.notEqual(res.headers.etag, etag)
  })

  test('when If-Match holds an old ETag, then it answers 412 precondition_failed with the current ETag and changes nothing', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const seen = String((await getEntry(app, '1')).headers.etag)
    const other = await patch(app, '1', { quantity: 4, note: 'someone else' })
    const history = await app.store.stock.stockHistory(1n, 10)
    const res = await patch(app, '1', { quantity: 9 }, { 'if-match': seen })
    assert.equal(res.statusCode, 412)
    assert.equal(res.json().code, 'precondition_failed')
    assert.equal(res.json().status, 412)
    assert.match(res.json().message, /changed since the ETag/)
    assert.equal(res.headers.etag, other.headers.etag, 'the current ETag, to refetch or retry with')
    assert.ok(res.headers['x-ratelimit-remaining'] !== undefined, 'a 412 carries the rate-limit headers like every answer')
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 4)
    assert.deepEqual(await app.store.stock.stockHistory(1n, 10), history)
  })

  test('when two clients update from the same ETag, then the first wins and the second gets 412', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 10 })] })
    const etag = String((await getEntry(app, '1')).headers.etag)
    const [a, b] = await Promise.all([
      patch(app, '1', { quantity: 9, note: 'sold one' }, { 'if-match': etag }),
      patch(app, '1', { quantity: 8, note: 'sold two' }, { 'if-match': etag })
    ])
    assert.deepEqual([a.statusCode, b.statusCode].sort(), [200, 412])
    assert.equal((await app.store.stock.stockHistory(1n, 10)).length, 2)
  })

  test('when If-Match lists several tags and one is current, then the change applies', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const etag = String((await getEntry(app, '1')).headers.etag)
    assert.equal((await patch(app, '1', { quantity: 3 }, { 'if-match': `"r999", "x,y", ${etag}` })).statusCode, 200)
  })

  test('when If-Match is *, then the change applies to an existing entry', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    assert.equal((await patch(app, '1', { quantity: 3 }, { 'if-match': '*' })).statusCode, 200)
  })

  test('when If-Match holds the current ETag as a weak tag, then it answers 412 (If-Match compares strongly)', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const etag = String((await getEntry(app, '1')).headers.etag)
    const res = await patch(app, '1', { quantity: 3 }, { 'if-match': `W/${etag}` })
    assert.equal(res.statusCode, 412)
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 2)
  })

  test('when If-Match holds the inventory listing ETag, then it answers 412: the tags are not interchangeable', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const listing = await app.request({ method: 'GET', url: '/v1/inventory', headers: auth(app.key) })
    assert.equal((await patch(app, '1', { quantity: 3 }, { 'if-match': String(listing.headers.etag) })).statusCode, 412)
  })

  for (const header of ['r1', '"unterminated', '""x', ' ', 'W/', '"a" "b"']) {
    test(`when If-Match is malformed (${JSON.stringify(header)}), then it answers 400 and changes nothing`, async (t) => {
      const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
      const res = await patch(app, '1', { quantity: 3 }, { 'if-match': header })
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().code, 'invalid_request')
      assert.match(res.json().message, /If-Match/)
      assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 2)
    })
  }

  test('when If-Match is sent for a pet without a stock entry, then it answers 404, not 412', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: undefined })] })
    assert.equal((await patch(app, '1', { quantity: 3 }, { 'if-match': '"r1"' })).statusCode, 404)
  })

  test('when the pet status changed after the client read the entry, then If-Match with the old ETag answers 412', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const etag = String((await getEntry(app, '1')).headers.etag)
    await importData(app.store, { pets: [pet(1, { quantity: undefined, status: 'sold' })], orders: [] })
    assert.equal((await patch(app, '1', { quantity: 3 }, { 'if-match': etag })).statusCode, 412)
  })
})
