/**
 * POST /v1/inventory/batch as API clients see it: several changes applied together or not at all, every failing
 * change listed, a shared batch id in the ledger, N requests of quota for N changes, Idempotency-Key, and the bounds
 * of the body.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, pet, testApp, type TestApp } from '../helpers/app.js'

const BIG = 9007199254740993n // 2^53 + 1

function batch (app: TestApp, body: unknown, headers: Record<string, string> = {}) {
  return app.request({
    method: 'POST',
    url: '/v1/inventory/batch',
    headers: { ...auth(app.key), 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body, (_key, value: unknown) => typeof value === 'bigint' ? `#${value}#` : value).replace(/"#(-?\d+)#"/g, '$1')
  })
}

const quantities = async (app: TestApp, ids: bigint[]) => Promise.all(ids.map(async (id) => (await app.store.stock.getStockEntry(id))?.quantity))

describe('POST /v1/inventory/batch', () => {
  test('when every change can apply, then all apply, the entries and their ETags are answered in order, and the ledger rows share a batch id', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(BIG, { quantity: 2, status: 'pending' }), pet(3, { quantity: 9 })] })
    const entry = await app.request({ method: 'GET', url: '/v1/inventory/3', headers: auth(app.key) })
    const res = await batch(app, {
      changes: [
        { petId: BIG, delta: 3, reason: 'arrival', note: 'Truck 7' },
        { petId: 1, quantity: 0 },
        { petId: 3, delta: -4, ifMatch: entry.headers.etag }
      ]
    }, { 'x-request-id': 'restock-1' })
    assert.equal(res.statusCode, 200, res.body)
    assert.equal(res.body, `{"entries":[{"petId":${BIG},"quantity":5,"status":"pending","etag":"\\"r2\\""},` +
      '{"petId":1,"quantity":0,"status":"available","etag":"\\"r2\\""},{"petId":3,"quantity":5,"status":"available","etag":"\\"r2\\""}]}')
    assert.deepEqual(await quantities(app, [1n, BIG, 3n]), [0, 5, 5])
    const rows = (await Promise.all([BIG, 1n, 3n].map((id) => app.store.stock.stockHistory(id, 10)))).map((h) => h.at(-1))
    assert.deepEqual(rows.map((r) => [r?.reason, r?.note, r?.requestId]), [['arrival', 'Truck 7', 'restock-1'], ['adjustment', null, 'restock-1'], ['adjustment', null, 'restock-1']])
    assert.match(rows[0]?.batchId ?? '', /^[0-9a-f-]{36}$/)
    assert.ok(rows.every((r) => r?.batchId === rows[0]?.batchId))
    const listing = await app.request({ method: 'GET', url: '/v1/inventory', headers: auth(app.key) })
    assert.deepEqual(listing.json().map((i: { quantity: number }) => i.quantity), [0, 5, 5], 'the listing shows the batch at once')
    const fetched = await app.request({ method: 'GET', url: '/v1/inventory/3', headers: auth(app.key) })
    assert.equal(fetched.headers.etag, '"r2"', 'the ETag the batch answered')
  })

  test('when any change cannot apply, then nothing changes and the 409 lists every failing change with its code', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 1 }), pet(3, { quantity: 9 })] })
    const res = await batch(app, {
      changes: [
        { petId: 1, delta: 1 },
        { petId: 2, delta: -2 },
        { petId: 99, quantity: 1 },
        { petId: 3, quantity: 4, ifMatch: '"r7"' }
      ]
    })
    assert.equal(res.statusCode, 409)
    assert.deepEqual(res.json(), {
      code: 'batch_refused',
      message: '3 of 4 changes cannot be applied; nothing was changed.',
      status: 409,
      failures: [
        { index: 1, petId: 2, code: 'stock_out_of_range', message: 'Adding -2 to the stock of pet 2 (now 1) would leave -1, outside 0 to 1000000000.', etag: '"r1"' },
        { index: 2, petId: 99, code: 'not_found', message: 'No inventory entry exists for pet 99.' },
        { index: 3, petId: 3, code: 'precondition_failed', message: 'The inventory entry of pet 3 has changed since the revision the change was based on.', etag: '"r1"' }
      ]
    })
    assert.deepEqual(await quantities(app, [1n, 2n, 3n]), [5, 1, 9])
    assert.equal((await app.store.stock.stockHistory(1n, 10)).length, 1, 'only the import')
  })

  const INVALID: Array<[string, unknown, RegExp]> = [
    ['no changes', { changes: [] }, /body.changes must hold 1 to 100 items/],
    ['101 changes', { changes: Array.from({ length: 101 }, (_, i) => ({ petId: i + 1, delta: 1 })) }, /body.changes must hold 1 to 100 items/],
    ['a change with neither quantity nor delta', { changes: [{ petId: 1 }] }, /body.changes\[0\] must have either quantity .* or delta .*, not neither/],
    ['a change with both', { changes: [{ petId: 1, quantity: 1, delta: 1 }] }, /not both/],
    ['a pet twice', { changes: [{ petId: 1, delta: 1 }, { petId: 2, delta: 1 }, { petId: 1, quantity: 3 }] }, /body.changes\[2\] changes pet 1 again \(body.changes\[0\] already does\)/],
    ['a delta of 0', { changes: [{ petId: 1, delta: 0 }] }, /delta must not be 0/],
    ['a quantity out of range', { changes: [{ petId: 1, quantity: 1_000_000_001 }] }, /body.changes\[0\].quantity must be an integer from 0 to 1000000000/],
    ['a malformed ifMatch', { changes: [{ petId: 1, delta: 1, ifMatch: 'r1' }] }, /body.changes\[0\].ifMatch must be \* or an entity tag/],
    ['a petId beyond int64', '{"changes":[{"petId":9223372036854775808,"delta":1}]}', /petId must be an integer within int64/],
    ['a petId as text', { changes: [{ petId: '1', delta: 1 }] }, /petId/],
    ['an unknown field', { changes: [{ petId: 1, delta: 1, qty: 2 }] }, /body.changes\[0\].qty is not a known field/]
  ]
  for (const [what, body, message] of INVALID) {
    test(`when the body has ${what}, then it answers 400 naming the problem and changes nothing`, async (t) => {
      const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 5 })] })
      const res = await batch(app, body)
      assert.equal(res.statusCode, 400, res.body)
      assert.equal(res.json().code, 'invalid_request')
      assert.match(res.json().message, message)
      assert.deepEqual(await quantities(app, [1n, 2n]), [5, 5])
    })
  }

  test('when a batch of N changes is sent, then it costs N requests of quota, and is refused whole with 429 when fewer remain', async (t) => {
    const app = await testApp(t, { RATE_LIMIT_FREE: '10/1000' }, { pets: Array.from({ length: 8 }, (_, i) => pet(i + 1, { quantity: 0 })) })
    const changes = (n: number) => ({ changes: Array.from({ length: n }, (_, i) => ({ petId: i + 1, delta: 1 })) })
    const first = await batch(app, changes(6))
    assert.equal(first.statusCode, 200)
    assert.equal(first.headers['x-ratelimit-remaining'], '4')
    const refused = await batch(app, changes(6))
    assert.equal(refused.statusCode, 429)
    assert.equal(refused.json().code, 'rate_limited')
    assert.match(refused.json().message, /This batch of 6 changes counts as 6 requests, and this key has 4 left this minute \(this request included\); nothing was changed/)
    assert.match(String(refused.headers['retry-after']), /^\d+$/)
    // The refused batch's own request was counted, as every answered request is; its other five were not.
    assert.equal(refused.headers['x-ratelimit-remaining'], '3')
    assert.deepEqual(await quantities(app, [1n, 6n, 7n]), [1, 1, 0])
    const fits = await batch(app, changes(3))
    assert.equal(fits.statusCode, 200)
    assert.equal(fits.headers['x-ratelimit-remaining'], '0')
  })

  test('when a batch counts as more requests than the key may make in a minute, then it answers 400 saying so: waiting would not help', async (t) => {
    const app = await testApp(t, { RATE_LIMIT_FREE: '5/1000' }, { pets: Array.from({ length: 6 }, (_, i) => pet(i + 1, { quantity: 0 })) })
    const res = await batch(app, { changes: Array.from({ length: 6 }, (_, i) => ({ petId: i + 1, delta: 1 })) })
    assert.equal(res.statusCode, 400)
    assert.match(res.json().message, /This batch of 6 changes counts as 6 requests, more than this key's limit of 5 per minute; send at most 5 at a time/)
  })

  test('when a batch is retried with its Idempotency-Key, then the first answer is replayed and nothing applies twice', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 0 }), pet(2, { quantity: 0 })] })
    const body = { changes: [{ petId: 1, delta: 2 }, { petId: 2, quantity: 7 }] }
    const first = await batch(app, body, { 'idempotency-key': 'restock-2026-11-23' })
    const again = await batch(app, body, { 'idempotency-key': 'restock-2026-11-23' })
    assert.equal(again.statusCode, 200)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.equal(again.body, first.body)
    assert.deepEqual(await quantities(app, [1n, 2n]), [2, 7])
    const other = await batch(app, { changes: [{ petId: 1, delta: 2 }] }, { 'idempotency-key': 'restock-2026-11-23' })
    assert.equal(other.statusCode, 422)
    assert.equal(other.json().code, 'idempotency_key_reused')
  })

  test('when the same batch is sent again with its key while the first is still running, then 409 idempotency_key_in_flight, and later its replay', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 0 }), pet(2, { quantity: 0 })] })
    const body = { changes: [{ petId: 1, delta: 1 }, { petId: 2, delta: 1 }] }
    const answers = await Promise.all([batch(app, body, { 'idempotency-key': 'k' }), batch(app, body, { 'idempotency-key': 'k' })])
    assert.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 409])
    const refused = answers.find((a) => a.statusCode === 409)
    assert.deepEqual([refused?.json().code, refused?.json().failures], ['idempotency_key_in_flight', undefined])
    assert.equal((await batch(app, body, { 'idempotency-key': 'k' })).headers['idempotent-replayed'], 'true')
    assert.deepEqual(await quantities(app, [1n, 2n]), [1, 1])
  })

  test('when a batch is refused for its body (a pet twice) or carries If-Match, then it answers 400 and costs one request, not N', async (t) => {
    const app = await testApp(t, { RATE_LIMIT_FREE: '10/1000' }, { pets: [pet(1, { quantity: 0 }), pet(2, { quantity: 0 })] })
    const twice = await batch(app, { changes: [{ petId: 1, delta: 1 }, { petId: 2, delta: 1 }, { petId: 1, delta: 1 }] })
    assert.equal(twice.statusCode, 400)
    assert.equal(twice.headers['x-ratelimit-remaining'], '9')
    const conditional = await batch(app, { changes: [{ petId: 1, delta: 1 }] }, { 'if-match': '"r1"' })
    assert.equal(conditional.statusCode, 400)
    assert.match(conditional.json().message, /If-Match does not apply to a batch: put each change's ETag in its ifMatch/)
    assert.deepEqual(await quantities(app, [1n, 2n]), [0, 0])
  })

  test('when many batches over the same pets arrive at once, then all apply and none is lost', async (t) => {
    const app = await testApp(t, { RATE_LIMIT_FREE: '1000/10000' }, { pets: [pet(1, { quantity: 0 }), pet(2, { quantity: 0 }), pet(3, { quantity: 0 })] })
    const orders = [[1, 2, 3], [3, 2, 1], [2, 1, 3]]
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => batch(app, { changes: (orders[i % 3] as number[]).map((petId) => ({ petId, delta: 1 })) })))
    assert.ok(answers.every((a) => a.statusCode === 200))
    assert.deepEqual(await quantities(app, [1n, 2n, 3n]), [30, 30, 30])
  })
})
