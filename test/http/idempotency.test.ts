/**
 * Idempotency-Key on the stock writes as API clients see it: a retry is replayed (status, body, ETag,
 * Idempotent-Replayed) and applies nothing twice; another request with a used key is 422; a key still in flight is
 * 409; malformed keys are 400; keys belong to their API key; records expire and are purged; replays are counted.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, newKey, pet, testApp, type TestApp } from '../helpers/app.js'

const BIG = 9007199254740993n // 2^53 + 1

function write (app: TestApp, kind: 'patch' | 'adjust', petId: bigint | number, body: unknown, headers: Record<string, string> = {}, key = app.key) {
  return app.request({
    method: kind === 'patch' ? 'PATCH' : 'POST',
    url: kind === 'patch' ? `/v1/inventory/${petId}` : `/v1/inventory/${petId}/adjustments`,
    headers: { ...auth(key), 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body)
  })
}

const ledgerLength = async (app: TestApp, petId: bigint) => (await app.store.stock.stockHistory(petId, 1000)).length

describe('Idempotency-Key on stock writes', () => {
  for (const [kind, body] of [['patch', { quantity: 7, reason: 'arrival' }], ['adjust', { delta: 3, reason: 'arrival' }]] as const) {
    test(`when a ${kind} is retried with its key, then the first answer is replayed with Idempotent-Replayed and nothing applies twice`, async (t) => {
      const app = await testApp(t, {}, { pets: [pet(BIG, { quantity: 2 })] })
      const first = await write(app, kind, BIG, body, { 'idempotency-key': 'order-4711' })
      assert.equal(first.statusCode, 200)
      assert.equal(first.headers['idempotent-replayed'], undefined)
      // Someone else changes the entry meanwhile: the replay still answers what the first request left.
      assert.equal((await write(app, 'adjust', BIG, { delta: 10 })).statusCode, 200)
      const again = await write(app, kind, BIG, body, { 'idempotency-key': 'order-4711' })
      assert.equal(again.statusCode, 200)
      assert.equal(again.headers['idempotent-replayed'], 'true')
      assert.equal(again.body, first.body)
      assert.equal(again.headers.etag, first.headers.etag)
      assert.equal(again.headers['content-type'], first.headers['content-type'])
      assert.equal((await app.store.stock.getStockEntry(BIG))?.quantity, (kind === 'patch' ? 7 : 5) + 10)
      assert.equal(await ledgerLength(app, BIG), 3, 'the import, the first write and the other change')
    })
  }

  test('when a key is reused for another request, then it answers 422 idempotency_key_reused and changes nothing', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 }), pet(2, { quantity: 2 })] })
    assert.equal((await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k' })).statusCode, 200)
    const others: Array<[string, () => ReturnType<typeof write>]> = [
      ['another delta', () => write(app, 'adjust', 1, { delta: 2 }, { 'idempotency-key': 'k' })],
      ['another pet', () => write(app, 'adjust', 2, { delta: 1 }, { 'idempotency-key': 'k' })],
      ['another operation', () => write(app, 'patch', 1, { quantity: 1 }, { 'idempotency-key': 'k' })],
      ['a precondition', () => write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k', 'if-match': '"r1"' })],
      ['a note', () => write(app, 'adjust', 1, { delta: 1, note: 'x' }, { 'idempotency-key': 'k' })]
    ]
    for (const [what, send] of others) {
      const res = await send()
      assert.equal(res.statusCode, 422, what)
      assert.deepEqual([res.json().code, res.json().status], ['idempotency_key_reused', 422], what)
      assert.equal(res.headers['idempotent-replayed'], undefined)
    }
    assert.deepEqual([(await app.store.stock.getStockEntry(1n))?.quantity, (await app.store.stock.getStockEntry(2n))?.quantity], [3, 2])
    assert.equal(await ledgerLength(app, 1n), 2)
  })

  test('when the same body comes with defaults spelled out, then it is the same request and is replayed', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    assert.equal((await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k' })).statusCode, 200)
    const again = await write(app, 'adjust', 1, { reason: 'adjustment', delta: 1 }, { 'idempotency-key': '"k"' })
    assert.equal(again.statusCode, 200)
    assert.equal(again.headers['idempotent-replayed'], 'true')
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 3)
  })

  test('when the first request with a key is still being processed, then a second answers 409 idempotency_key_in_flight', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 0 })] })
    const answers = await Promise.all(Array.from({ length: 5 }, () => write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'same' })))
    assert.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 409, 409, 409, 409])
    for (const refused of answers.filter((a) => a.statusCode === 409)) {
      assert.deepEqual([refused.json().code, refused.json().status], ['idempotency_key_in_flight', 409])
    }
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 1)
    const later = await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'same' })
    assert.equal(later.headers['idempotent-replayed'], 'true')
  })

  test('when a write is refused (404, 409 out of range, 412), then nothing is recorded and the key can be sent again', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    assert.equal((await write(app, 'adjust', 1, { delta: -5 }, { 'idempotency-key': 'k' })).statusCode, 409)
    assert.equal((await write(app, 'adjust', 1, { delta: 3 })).statusCode, 200)
    const retried = await write(app, 'adjust', 1, { delta: -5 }, { 'idempotency-key': 'k' })
    assert.equal(retried.statusCode, 200)
    assert.equal(retried.headers['idempotent-replayed'], undefined)
    assert.equal(retried.json().quantity, 0)
    assert.equal((await write(app, 'patch', 99, { quantity: 1 }, { 'idempotency-key': 'k404' })).statusCode, 404)
    assert.equal((await write(app, 'patch', 1, { quantity: 1 }, { 'idempotency-key': 'k412', 'if-match': '"r999"' })).statusCode, 412)
    assert.equal((await write(app, 'patch', 1, { quantity: 1 }, { 'idempotency-key': 'k412' })).statusCode, 200)
  })

  test('when two API keys send the same idempotency key, then each applies: keys are scoped per API key', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 0 })] })
    const other = await newKey(app.store)
    assert.equal((await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'shared' })).headers['idempotent-replayed'], undefined)
    assert.equal((await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'shared' }, other)).headers['idempotent-replayed'], undefined)
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 2)
  })

  test('when a replay is answered, then it counts against the rate limit like any request', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 0 })] })
    const first = await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k' })
    const again = await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k' })
    assert.equal(Number(again.headers['x-ratelimit-remaining']), Number(first.headers['x-ratelimit-remaining']) - 1)
  })

  test('when the retention has passed, then the key is free again: the same request applies anew', async (t) => {
    const app = await testApp(t, { IDEMPOTENCY_TTL_SECONDS: '120' }, { pets: [pet(1, { quantity: 0 })] })
    assert.equal((await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k' })).statusCode, 200)
    app.clock.now += 119_000
    assert.equal((await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k' })).headers['idempotent-replayed'], 'true')
    app.clock.now += 1000
    const anew = await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': 'k' })
    assert.equal(anew.headers['idempotent-replayed'], undefined)
    assert.equal(anew.json().quantity, 2)
  })

  const INVALID: Array<[string, Record<string, string> | Array<[string, string]>]> = [
    ['empty', { 'idempotency-key': '' }],
    ['an empty quoted string', { 'idempotency-key': '""' }],
    ['256 characters', { 'idempotency-key': 'k'.repeat(256) }],
    ['256 characters quoted', { 'idempotency-key': `"${'k'.repeat(256)}"` }],
    ['a tab', { 'idempotency-key': 'a\tb' }],
    ['a character beyond ASCII', { 'idempotency-key': 'caf\u00e9' }],
    ['a quote left open', { 'idempotency-key': '"abc' }],
    ['a bad escape in a quoted string', { 'idempotency-key': '"a\\b"' }],
    ['a structured parameter', { 'idempotency-key': '"abc";x=1' }]
  ]
  for (const [what, headers] of INVALID) {
    test(`when the Idempotency-Key is ${what}, then it answers 400 invalid_request naming the header, and changes nothing`, async (t) => {
      const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
      const res = await write(app, 'adjust', 1, { delta: 1 }, headers as Record<string, string>)
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().code, 'invalid_request')
      assert.match(res.json().message, /^Idempotency-Key .*1 to 255 printable ASCII characters/)
      assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 2)
    })
  }

  test('when two Idempotency-Key fields are sent, then it answers 400 rather than joining them into one key', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const res = await app.request({
      method: 'POST',
      url: '/v1/inventory/1/adjustments',
      headers: { ...auth(app.key), 'content-type': 'application/json', 'idempotency-key': ['a', 'b'] },
      payload: '{"delta":1}'
    })
    assert.equal(res.statusCode, 400)
    assert.match(res.json().message, /sent more than once/)
  })

  test('when a key is 255 characters, bare or quoted with escapes, then it is accepted and both spellings name the same key', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 0 })] })
    const longest = `a"b\\${'k'.repeat(251)}`
    assert.equal(longest.length, 255)
    assert.equal((await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': longest })).statusCode, 200)
    const quoted = `"${longest.replace(/["\\]/g, '\\$&')}"`
    const again = await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': quoted })
    assert.equal(again.statusCode, 200)
    assert.equal(again.headers['idempotent-replayed'], 'true')
  })

  test('when records have expired, then the server purges them without a request asking', async (t) => {
    const app = await testApp(t, { IDEMPOTENCY_TTL_SECONDS: '60' }, { pets: [pet(1, { quantity: 0 })] })
    for (const key of ['a', 'b', 'c']) await write(app, 'adjust', 1, { delta: 1 }, { 'idempotency-key': key })
    const at = new Date(app.clock.now)
    assert.notEqual(await app.store.idempotency.findIdempotencyRecord((await app.store.keys.listApiKeys())[0]?.id ?? '', 'a', at), null)
    // A second app on the same store purges once it is ready, as a restarted or other instance does.
    app.clock.now += 61_000
    const { buildApp } = await import('../../src/app.js')
    const other = await buildApp(app.config, { store: app.store, logger: false, clock: () => app.clock.now })
    await other.ready()
    await other.close()
    assert.equal(await app.store.idempotency.purgeIdempotencyRecords(new Date(app.clock.now), 100), 0, 'nothing was left to purge')
    assert.equal((await app.store.stock.getStockEntry(1n))?.quantity, 3)
  })

  test('when a browser asks, then CORS allows the Idempotency-Key header and exposes Idempotent-Replayed', async (t) => {
    const app = await testApp(t, { CORS_ORIGINS: 'https://shop.example' }, { pets: [pet(1, { quantity: 0 })] })
    const preflight = await app.request({
      method: 'OPTIONS',
      url: '/v1/inventory/1/adjustments',
      headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'idempotency-key,content-type' }
    })
    assert.match(String(preflight.headers['access-control-allow-headers']), /Idempotency-Key/)
    const res = await write(app, 'adjust', 1, { delta: 1 }, { origin: 'https://shop.example', 'idempotency-key': 'k' })
    assert.match(String(res.headers['access-control-expose-headers']), /Idempotent-Replayed/)
  })
})
