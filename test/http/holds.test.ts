/**
 * /v1/holds as a storefront meets it (SQLite; a focused run on PostgreSQL at the end): every operation, every 400
 * and 409, retries under the same Idempotency-Key, scopes, expiry at the instant (the app's clock is injected), the
 * availability the inventory shows, a sale seen by the listing right after the answer, and holds counted by the limit.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { InjectOptions } from 'fastify'
import { buildApp } from '../../src/app.js'
import { createKey } from '../../src/access/keys.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import type { KeyScope } from '../../src/model.js'
import type { Store } from '../../src/store/store.js'
import { auth, pet, testApp } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempPostgresStore, tempSchema } from '../helpers/postgres.js'
import { resilientRedis } from '../helpers/shared-redis.js'
import { REDIS_URL, redisKeyPrefix, requireRedis, waitReady } from '../ratelimit/redis-env.js'
import { createRedisClient } from '../../src/ratelimit/redis.js'
import { PostgresStore } from '../../src/store/postgres-store.js'

const json = { 'content-type': 'application/json' }
const START = Date.parse('2026-11-22T12:00:00Z')

async function keyOf (store: Store, scope: KeyScope): Promise<string> {
  const { key } = await createKey(store, 'production', { plan: 'enterprise', name: scope, perMinute: 100_000, perDay: 1_000_000, scope, expiresAt: null })
  return key
}

async function shop (t: TestContext, env: Record<string, string> = {}) {
  const app = await testApp(t, env, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 3 }), pet(3, { quantity: 0 })] })
  const seller = await keyOf(app.store, 'storefront')
  let n = 0
  /** A selling write with a fresh key unless one is given (null: none). */
  const write = (url: string, payload?: unknown, key: string | null = `k-${++n}`, as = seller) => app.request({
    method: 'POST',
    url,
    headers: { ...auth(as), ...(payload === undefined ? {} : json), ...(key === null ? {} : { 'idempotency-key': key }) },
    ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] })
  })
  const read = (url: string, headers: Record<string, string> = {}) => app.request({ method: 'GET', url, headers: { ...auth(seller), ...headers } })
  return { ...app, seller, write, read, reader: await keyOf(app.store, 'read') }
}

describe('holds over HTTP', () => {
  test('when a hold is placed, then it is 201 with its Location, it reads back the same, and its units are no longer available', async (t) => {
    const { write, read } = await shop(t)
    const res = await write('/v1/holds', { lines: [{ petId: 2, quantity: 1 }, { petId: 1, quantity: 2 }], reference: 'cart-1', expiresIn: 600 })
    assert.equal(res.statusCode, 201)
    const hold = res.json()
    assert.match(hold.id, /^hold_[A-Za-z0-9_-]{20}$/)
    // Relative to the request URL, as every link of the API: /v1/holds/{id}.
    assert.equal(res.headers.location, `holds/${hold.id}`)
    assert.equal(new URL(res.headers.location, 'http://x/v1/holds').pathname, `/v1/holds/${hold.id}`)
    assert.equal(res.headers['idempotent-replayed'], undefined)
    assert.deepEqual(hold, {
      id: hold.id,
      state: 'active',
      lines: [{ petId: 1, quantity: 2 }, { petId: 2, quantity: 1 }],
      reference: 'cart-1',
      createdAt: '2026-11-22T12:00:00.000Z',
      expiresAt: '2026-11-22T12:10:00.000Z',
      endedAt: null
    })
    const again = await read(`/v1/holds/${hold.id}`)
    assert.equal(again.statusCode, 200)
    assert.deepEqual(again.json(), hold)
    const one = await read('/v1/inventory/1?include=availability')
    assert.deepEqual(one.json(), { petId: 1, quantity: 5, status: 'available', onHand: 5, held: 2, available: 3 })
  })

  test('when a hold is sent without expiresIn, then it expires after HOLD_DEFAULT_TTL_SECONDS', async (t) => {
    const { write } = await shop(t, { HOLD_DEFAULT_TTL_SECONDS: '120' })
    const res = await write('/v1/holds', { lines: [{ petId: 1, quantity: 1 }] })
    assert.equal(res.json().expiresAt, '2026-11-22T12:02:00.000Z')
    assert.equal(res.json().reference, null)
  })

  test('when a write has no Idempotency-Key, then it is 400 naming the header, and nothing is held', async (t) => {
    const { write, read } = await shop(t)
    const res = await write('/v1/holds', { lines: [{ petId: 1, quantity: 1 }] }, null)
    assert.equal(res.statusCode, 400)
    assert.equal(res.json().code, 'invalid_request')
    assert.match(res.json().message, /^Idempotency-Key is required/)
    assert.equal((await read('/v1/inventory/1?include=availability')).json().held, 0)
    const placed = (await write('/v1/holds', { lines: [{ petId: 1, quantity: 1 }] })).json()
    for (const action of ['confirm', 'release']) {
      const refused = await write(`/v1/holds/${placed.id}/${action}`, undefined, null)
      assert.equal(refused.statusCode, 400, action)
      assert.match(refused.json().message, /^Idempotency-Key is required/)
    }
    assert.equal((await write(`/v1/holds/${placed.id}/extend`, { expiresIn: 60 }, null)).statusCode, 400)
  })

  test('when a hold is retried with the same key and body, then the first answer is replayed (201 included) and nothing more is held', async (t) => {
    const { write, read, clock } = await shop(t)
    const body = { lines: [{ petId: 1, quantity: 2 }], reference: 'cart-9' }
    const first = await write('/v1/holds', body, 'checkout-9')
    clock.now += 30_000
    const retry = await write('/v1/holds', body, 'checkout-9')
    assert.equal(retry.statusCode, 201)
    assert.equal(retry.headers['idempotent-replayed'], 'true')
    assert.equal(retry.body, first.body)
    assert.equal(retry.headers.location, first.headers.location)
    assert.equal((await read('/v1/inventory/1?include=availability')).json().held, 2)
    assert.equal((await read('/v1/holds')).json().length, 1)
    const reused = await write('/v1/holds', { ...body, reference: 'cart-10' }, 'checkout-9')
    assert.equal(reused.statusCode, 422)
    assert.equal(reused.json().code, 'idempotency_key_reused')
  })

  test('when the same key is sent twice at once, then the hold is placed once: the other answer is in flight (409) or the replay', async (t) => {
    const { write, read } = await shop(t)
    const body = { lines: [{ petId: 1, quantity: 2 }] }
    const answers = await Promise.all([write('/v1/holds', body, 'double-click'), write('/v1/holds', body, 'double-click')])
    const placed = answers.filter((a) => a.statusCode === 201 && a.headers['idempotent-replayed'] === undefined)
    assert.equal(placed.length, 1, answers.map((a) => a.statusCode).join(' '))
    for (const other of answers.filter((a) => a !== placed[0])) {
      assert.ok(other.statusCode === 201 ? other.headers['idempotent-replayed'] === 'true' : other.json().code === 'idempotency_key_in_flight', other.body)
    }
    assert.equal((await read('/v1/inventory/1?include=availability')).json().held, 2)
  })

  test('when the Idempotency-Key is not a key (empty, too long, badly quoted), then it is 400 and nothing is held', async (t) => {
    const { request, seller, read } = await shop(t)
    const send = (headers: Record<string, string>) => request({
      method: 'POST', url: '/v1/holds', headers: { ...auth(seller), ...json, ...headers }, payload: { lines: [{ petId: 1, quantity: 1 }] }
    })
    for (const key of ['', 'x'.repeat(256), '"unterminated']) {
      const res = await send({ 'idempotency-key': key })
      assert.equal(res.statusCode, 400, JSON.stringify(key).slice(0, 20))
      assert.equal(res.json().code, 'invalid_request')
      assert.match(res.json().message, /Idempotency-Key/)
    }
    assert.equal((await read('/v1/inventory/1?include=availability')).json().held, 0)
  })

  test('when a line asks for more than is available, then it is 409 insufficient_stock with every short line, and nothing is held', async (t) => {
    const { write, read } = await shop(t)
    await write('/v1/holds', { lines: [{ petId: 1, quantity: 4 }] })
    const res = await write('/v1/holds', { lines: [{ petId: 1, quantity: 2 }, { petId: 2, quantity: 3 }, { petId: 3, quantity: 1 }] })
    assert.equal(res.statusCode, 409)
    const body = res.json()
    assert.equal(body.code, 'insufficient_stock')
    assert.equal(body.status, 409)
    assert.deepEqual(body.shortages, [{ petId: 1, requested: 2, available: 1 }, { petId: 3, requested: 1, available: 0 }])
    assert.match(body.message, /pet 1 has 1 unit available, 2 were requested; pet 3 has 0 units available, 1 was requested\. Nothing was held\./)
    assert.equal((await read('/v1/inventory/2?include=availability')).json().available, 3)
  })

  test('when the body is wrong, then it is 400: duplicate pets, no lines, too long, a zero quantity, an unknown field', async (t) => {
    const { write } = await shop(t, { HOLD_MAX_TTL_SECONDS: '3600' })
    const bodies: Array<[unknown, RegExp]> = [
      [{ lines: [{ petId: 1, quantity: 1 }, { petId: 1, quantity: 2 }] }, /body\.lines\[1\]\.petId repeats pet 1/],
      [{ lines: [] }, /body\.lines/],
      [{ lines: [{ petId: 1, quantity: 1 }], expiresIn: 3601 }, /body\.expiresIn must be an integer from 1 to 3600/],
      [{ lines: [{ petId: 1, quantity: 0 }] }, /body\.lines\[0\]\.quantity/],
      [{ lines: [{ petId: 1, quantity: 1 }], extra: true }, /body\.extra is not a known field/],
      [{ lines: Array.from({ length: 101 }, (_, i) => ({ petId: i + 1, quantity: 1 })) }, /body\.lines must hold 1 to 100 items/]
    ]
    for (const [body, message] of bodies) {
      const res = await write('/v1/holds', body)
      assert.equal(res.statusCode, 400, JSON.stringify(body).slice(0, 80))
      assert.equal(res.json().code, 'invalid_request')
      assert.match(res.json().message, message)
    }
  })

  test('when a pet has no stock entry, then it is 404 and nothing is held', async (t) => {
    const { write, read } = await shop(t)
    const res = await write('/v1/holds', { lines: [{ petId: 1, quantity: 1 }, { petId: 404, quantity: 1 }] })
    assert.equal(res.statusCode, 404)
    assert.match(res.json().message, /pet 404/)
    assert.equal((await read('/v1/inventory/1?include=availability')).json().held, 0)
  })

  test('when the quota\'s caps are reached, then it is 409 hold_limit_reached naming the cap', async (t) => {
    const { write } = await shop(t, { HOLDS_MAX_ACTIVE_PER_QUOTA: '2', HOLDS_MAX_UNITS_PER_QUOTA: '4' })
    assert.equal((await write('/v1/holds', { lines: [{ petId: 1, quantity: 3 }] })).statusCode, 201)
    const units = await write('/v1/holds', { lines: [{ petId: 2, quantity: 2 }] })
    assert.equal(units.statusCode, 409)
    assert.equal(units.json().code, 'hold_limit_reached')
    assert.match(units.json().message, /HOLDS_MAX_UNITS_PER_QUOTA/)
    assert.equal((await write('/v1/holds', { lines: [{ petId: 2, quantity: 1 }] })).statusCode, 201)
    const active = await write('/v1/holds', { lines: [{ petId: 2, quantity: 0 + 1 }] })
    assert.equal(active.json().code, 'hold_limit_reached')
    assert.match(active.json().message, /HOLDS_MAX_ACTIVE_PER_QUOTA/)
  })

  test('when a hold is confirmed, then the sale is in GET /v1/inventory right after the answer, and a retry replays it', async (t) => {
    const { write, read } = await shop(t)
    const before = await read('/v1/inventory')
    const hold = (await write('/v1/holds', { lines: [{ petId: 1, quantity: 2 }, { petId: 2, quantity: 3 }], reference: 'order-77' })).json()
    const confirmed = await write(`/v1/holds/${hold.id}/confirm`, undefined, 'pay-77')
    assert.equal(confirmed.statusCode, 200)
    assert.equal(confirmed.json().state, 'confirmed')
    assert.equal(confirmed.json().endedAt, '2026-11-22T12:00:00.000Z')
    const listing = await read('/v1/inventory', { 'if-none-match': String(before.headers.etag) })
    assert.equal(listing.statusCode, 200)
    assert.notEqual(listing.headers.etag, before.headers.etag)
    assert.deepEqual(listing.json().map((e: { petId: number, quantity: number }) => [e.petId, e.quantity]), [[1, 3], [2, 0], [3, 0]])
    const changes = (await read('/v1/inventory/changes?limit=10')).json()
    const sales = changes.filter((c: { reason: string }) => c.reason === 'sale')
    assert.deepEqual(sales.map((c: { petId: number, previousQuantity: number, quantity: number, reference: string }) => [c.petId, c.previousQuantity, c.quantity, c.reference]),
      [[1, 5, 3, 'order-77'], [2, 3, 0, 'order-77']])
    const retry = await write(`/v1/holds/${hold.id}/confirm`, {}, 'pay-77')
    assert.equal(retry.statusCode, 200)
    assert.equal(retry.headers['idempotent-replayed'], 'true')
    assert.equal(retry.body, confirmed.body)
    assert.equal((await read('/v1/inventory/1')).json().quantity, 3)
    const again = await write(`/v1/holds/${hold.id}/confirm`)
    assert.equal(again.statusCode, 409)
    assert.equal(again.json().code, 'hold_not_active')
  })

  test('when on hand was set below a hold, then available is 0, and confirming it is 409 insufficient_stock; the hold stays active', async (t) => {
    const { write, read, request, key } = await shop(t)
    const hold = (await write('/v1/holds', { lines: [{ petId: 1, quantity: 4 }] })).json()
    // A recount by a write key finds fewer on hand than are held: the count is the truth, the hold stays.
    const patch = await request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), ...json }, payload: { quantity: 2, reason: 'recount' } })
    assert.equal(patch.statusCode, 200)
    assert.deepEqual((await read('/v1/inventory/1?include=availability')).json(), { petId: 1, quantity: 2, status: 'available', onHand: 2, held: 4, available: 0 })
    const confirm = await write(`/v1/holds/${hold.id}/confirm`)
    assert.equal(confirm.statusCode, 409)
    assert.equal(confirm.json().code, 'insufficient_stock')
    assert.deepEqual(confirm.json().shortages, [{ petId: 1, requested: 4, available: 2 }])
    assert.match(confirm.json().message, /Nothing was sold; the hold stays active/)
    assert.equal((await read(`/v1/holds/${hold.id}`)).json().state, 'active')
  })

  test('when a hold reaches its expiry, then it is expired at that instant: its units are available and it cannot be confirmed', async (t) => {
    const { write, read, clock } = await shop(t)
    const hold = (await write('/v1/holds', { lines: [{ petId: 2, quantity: 3 }], expiresIn: 60 })).json()
    clock.now = START + 59_999
    assert.equal((await read(`/v1/holds/${hold.id}`)).json().state, 'active')
    assert.equal((await read('/v1/inventory/2?include=availability')).json().available, 0)
    assert.equal((await write('/v1/holds', { lines: [{ petId: 2, quantity: 1 }] })).statusCode, 409)
    clock.now = START + 60_000
    const expired = (await read(`/v1/holds/${hold.id}`)).json()
    assert.equal(expired.state, 'expired')
    assert.equal(expired.endedAt, '2026-11-22T12:01:00.000Z')
    assert.equal((await read('/v1/inventory/2?include=availability')).json().available, 3)
    const confirm = await write(`/v1/holds/${hold.id}/confirm`)
    assert.equal(confirm.statusCode, 409)
    assert.equal(confirm.json().code, 'hold_not_active')
    assert.match(confirm.json().message, /is expired since 2026-11-22T12:01:00.000Z/)
    assert.equal((await write('/v1/holds', { lines: [{ petId: 2, quantity: 3 }] })).statusCode, 201)
  })

  test('when a hold is released, then its units are available at once; releasing, confirming or extending it again is 409', async (t) => {
    const { write, read } = await shop(t)
    const hold = (await write('/v1/holds', { lines: [{ petId: 2, quantity: 3 }] })).json()
    const withFields = await write(`/v1/holds/${hold.id}/release`, { reason: 'abandoned' })
    assert.equal(withFields.statusCode, 400)
    assert.match(withFields.json().message, /must be empty or \{\}/)
    const released = await write(`/v1/holds/${hold.id}/release`, {})
    assert.equal(released.statusCode, 200)
    assert.equal(released.json().state, 'released')
    assert.equal((await read('/v1/inventory/2?include=availability')).json().available, 3)
    for (const [action, body] of [['release', undefined], ['confirm', undefined], ['extend', { expiresIn: 60 }]] as const) {
      const res = await write(`/v1/holds/${hold.id}/${action}`, body)
      assert.equal(res.statusCode, 409, action)
      assert.equal(res.json().code, 'hold_not_active')
    }
  })

  test('when a hold is extended, then it expires that long from now, and not later than HOLD_MAX_TTL_SECONDS after it was placed', async (t) => {
    const { write, clock } = await shop(t, { HOLD_MAX_TTL_SECONDS: '3600' })
    const hold = (await write('/v1/holds', { lines: [{ petId: 1, quantity: 1 }], expiresIn: 1200 })).json()
    clock.now = START + 1_000_000
    const extended = await write(`/v1/holds/${hold.id}/extend`, { expiresIn: 2600 })
    assert.equal(extended.statusCode, 200)
    assert.equal(extended.json().expiresAt, '2026-11-22T13:00:00.000Z')
    const tooLate = await write(`/v1/holds/${hold.id}/extend`, { expiresIn: 2601 })
    assert.equal(tooLate.statusCode, 400)
    assert.match(tooLate.json().message, /latest allowed, 2026-11-22T13:00:00.000Z/)
  })

  test('when a hold keeps an order\'s stock, then confirming, releasing and extending it through /v1/holds is 409 hold_of_order', async (t) => {
    const { write, store, clock } = await shop(t)
    const placed = await store.selling.placeHold({
      id: 'hold_AAAAAAAAAAAAAAAAAAAA', lines: [{ petId: 1n, quantity: 1 }], reference: null, expiresAt: null,
      caps: { activeHolds: 10, heldUnits: 10 }, order: { shipDate: '2026-11-23T10:00:00Z' }, quotaId: 'q', keyId: null, requestId: null, at: new Date(clock.now)
    })
    assert.equal(placed.status, 'placed')
    for (const [action, body] of [['confirm', undefined], ['release', undefined], ['extend', { expiresIn: 60 }]] as const) {
      const res = await write(`/v1/holds/hold_AAAAAAAAAAAAAAAAAAAA/${action}`, body)
      assert.equal(res.statusCode, 409, action)
      assert.equal(res.json().code, 'hold_of_order')
    }
  })

  test('when a hold does not exist, then reading and every write is 404', async (t) => {
    const { write, read } = await shop(t)
    for (const id of ['hold_AAAAAAAAAAAAAAAAAAAA', 'nope']) {
      assert.equal((await read(`/v1/holds/${id}`)).statusCode, 404)
      assert.equal((await write(`/v1/holds/${id}/confirm`)).statusCode, 404)
      assert.equal((await write(`/v1/holds/${id}/release`)).statusCode, 404)
      assert.equal((await write(`/v1/holds/${id}/extend`, { expiresIn: 60 })).statusCode, 404)
    }
  })

  test('when holds are listed, then they come oldest first, paged with a Link that keeps the filters', async (t) => {
    const { write, read, clock } = await shop(t)
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      ids.push((await write('/v1/holds', { lines: [{ petId: i % 2 === 0 ? 1 : 2, quantity: 1 }], reference: i < 3 ? 'a' : 'b', expiresIn: 100 + 100 * i })).json().id)
      clock.now += 1000
    }
    const first = await read('/v1/holds?limit=2')
    assert.deepEqual(first.json().map((h: { id: string }) => h.id), ids.slice(0, 2))
    const next = /^<\?([^>]+)>; rel="next"$/.exec(String(first.headers.link))?.[1]
    assert.ok(next)
    const second = await read(`/v1/holds?${next}`)
    assert.deepEqual(second.json().map((h: { id: string }) => h.id), ids.slice(2, 4))
    const byPet = await read('/v1/holds?petId=1&limit=1')
    assert.deepEqual(byPet.json().map((h: { id: string }) => h.id), [ids[0]])
    const link = new URLSearchParams(/^<\?([^>]+)>/.exec(String(byPet.headers.link))?.[1])
    assert.equal(link.get('petId'), '1')
    assert.deepEqual((await read(`/v1/holds?${link.toString()}`)).json().map((h: { id: string }) => h.id), [ids[2]])
    assert.deepEqual((await read('/v1/holds?reference=b')).json().map((h: { id: string }) => h.id), ids.slice(3))
    clock.now = START + 250_000
    assert.deepEqual((await read('/v1/holds?state=expired')).json().map((h: { id: string, state: string }) => [h.id, h.state]), [[ids[0], 'expired'], [ids[1], 'expired']])
    assert.equal((await read('/v1/holds?state=active')).json().length, 3)
    assert.equal((await read('/v1/holds?cursor=bm9wZQ')).statusCode, 400)
    assert.equal((await read('/v1/holds?state=gone')).statusCode, 400)
    assert.equal((await read('/v1/holds?petId=twelve')).statusCode, 400)
    assert.deepEqual((await read('/v1/holds?petId=9223372036854775807')).json(), [])
  })

  test('when a read key places or moves a hold, then it is 403 naming inventory:sell; it may read holds', async (t) => {
    const { write, read, reader } = await shop(t)
    const hold = (await write('/v1/holds', { lines: [{ petId: 1, quantity: 1 }] })).json()
    const writes: Array<[string, unknown]> = [['/v1/holds', { lines: [{ petId: 1, quantity: 1 }] }], [`/v1/holds/${hold.id}/confirm`, undefined],
      [`/v1/holds/${hold.id}/release`, undefined], [`/v1/holds/${hold.id}/extend`, { expiresIn: 60 }]]
    for (const [url, body] of writes) {
      const res = await write(url, body, 'k-read', reader)
      assert.equal(res.statusCode, 403, url)
      assert.equal(res.json().code, 'insufficient_scope')
      assert.match(String(res.headers['www-authenticate']), /scope="inventory:sell"/)
    }
    assert.equal((await read(`/v1/holds/${hold.id}`, {})).statusCode, 200)
    const asReader = await read('/v1/holds', { authorization: `Bearer ${reader}` })
    assert.equal(asReader.statusCode, 200)
    assert.equal((await read(`/v1/holds/${hold.id}`)).json().state, 'active')
  })

  test('when the inventory is read with include=availability, then every entry has onHand, held and available, fresh, without ETag', async (t) => {
    const { write, read, clock } = await shop(t)
    const plain = await read('/v1/inventory')
    await write('/v1/holds', { lines: [{ petId: 1, quantity: 2 }, { petId: 2, quantity: 3 }], expiresIn: 60 })
    // Without it: the same bytes and ETag as before any hold, and the 304 still answers.
    const after = await read('/v1/inventory')
    assert.equal(after.body, plain.body)
    assert.equal(after.headers.etag, plain.headers.etag)
    assert.equal((await read('/v1/inventory', { 'if-none-match': String(plain.headers.etag) })).statusCode, 304)
    const entry = await read('/v1/inventory/1')
    assert.equal(entry.body, '{"petId":1,"quantity":5,"status":"available"}')
    // A query the entry never read is still ignored, as before the parameter existed.
    assert.equal((await read('/v1/inventory/1?utm_source=shop')).body, entry.body)
    assert.equal((await read('/v1/inventory/1', { 'if-none-match': String(entry.headers.etag) })).statusCode, 304)

    const all = await read('/v1/inventory?include=availability', { 'if-none-match': String(plain.headers.etag) })
    assert.equal(all.statusCode, 200)
    assert.equal(all.headers.etag, undefined)
    assert.deepEqual(all.json(), [
      { petId: 1, quantity: 5, status: 'available', onHand: 5, held: 2, available: 3 },
      { petId: 2, quantity: 3, status: 'available', onHand: 3, held: 3, available: 0 },
      { petId: 3, quantity: 0, status: 'available', onHand: 0, held: 0, available: 0 }
    ])
    const one = await read('/v1/inventory/2?include=availability', { 'if-none-match': String(entry.headers.etag) })
    assert.equal(one.statusCode, 200)
    assert.equal(one.headers.etag, undefined)
    const page = await read('/v1/inventory?include=availability&limit=2')
    assert.deepEqual(page.json().map((e: { petId: number, held: number }) => [e.petId, e.held]), [[1, 2], [2, 3]])
    const next = /^<\?([^>]+)>; rel="next"$/.exec(String(page.headers.link))?.[1]
    assert.match(String(next), /include=availability/)
    assert.deepEqual((await read(`/v1/inventory?${next}`)).json().map((e: { petId: number }) => e.petId), [3])
    clock.now = START + 60_000
    assert.equal((await read('/v1/inventory/1?include=availability')).json().available, 5)
    assert.equal((await read('/v1/inventory/1?include=everything')).statusCode, 400)
    assert.equal((await read('/v1/inventory/404?include=availability')).statusCode, 404)
  })

  test('when holds are sent past the rate limit, then each counted as one request, the next is 429 and nothing is held', async (t) => {
    const app = await testApp(t, { RATE_LIMIT_FREE: '3/1000' }, { pets: [pet(1, { quantity: 5 })] })
    const { key } = await createKey(app.store, 'production', { plan: 'free', name: 'shop', perMinute: null, perDay: null, scope: 'storefront', expiresAt: null })
    const hold = (n: number) => app.request({ method: 'POST', url: '/v1/holds', headers: { ...auth(key), ...json, 'idempotency-key': `rl-${n}` }, payload: { lines: [{ petId: 1, quantity: 1 }] } })
    const first = await hold(1)
    assert.equal(first.headers['x-ratelimit-remaining'], '2')
    assert.equal((await hold(2)).statusCode, 201)
    assert.equal((await hold(3)).statusCode, 201)
    const limited = await hold(4)
    assert.equal(limited.statusCode, 429)
    assert.equal(limited.json().code, 'rate_limited')
    const [counts] = await app.store.selling.availability([1n], new Date(app.clock.now))
    assert.equal(counts?.held, 3)
  })
})

if (await requirePostgres('holds over HTTP on PostgreSQL')) {
  describe('holds over HTTP on PostgreSQL', () => {
    test('when a hold is placed, retried, confirmed and another expires, then PostgreSQL answers as SQLite does', async (t) => {
      const store = await tempPostgresStore(t)
      await importData(store, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 3 })], orders: [] })
      const key = await keyOf(store, 'storefront')
      const clock = { now: START }
      const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false, clock: () => clock.now })
      t.after(() => app.close())
      const write = (url: string, idempotencyKey: string, payload?: unknown) => app.inject({
        method: 'POST', url, headers: { ...auth(key), ...(payload === undefined ? {} : json), 'idempotency-key': idempotencyKey }, ...(payload === undefined ? {} : { payload: payload as InjectOptions['payload'] })
      })
      const placed = await write('/v1/holds', 'pg-1', { lines: [{ petId: 1, quantity: 4 }], reference: 'cart-pg' })
      assert.equal(placed.statusCode, 201)
      const retry = await write('/v1/holds', 'pg-1', { lines: [{ petId: 1, quantity: 4 }], reference: 'cart-pg' })
      assert.equal(retry.statusCode, 201)
      assert.equal(retry.headers['idempotent-replayed'], 'true')
      assert.equal(retry.body, placed.body)
      const short = await write('/v1/holds', 'pg-2', { lines: [{ petId: 1, quantity: 2 }] })
      assert.equal(short.statusCode, 409)
      assert.deepEqual(short.json().shortages, [{ petId: 1, requested: 2, available: 1 }])
      const expiring = await write('/v1/holds', 'pg-3', { lines: [{ petId: 2, quantity: 3 }], expiresIn: 60 })
      assert.equal(expiring.statusCode, 201)
      const confirmed = await write(`/v1/holds/${placed.json().id}/confirm`, 'pg-4')
      assert.equal(confirmed.statusCode, 200)
      const listing = await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
      assert.deepEqual(listing.json().map((e: { petId: number, quantity: number }) => [e.petId, e.quantity]), [[1, 1], [2, 3]])
      clock.now += 60_000
      const availability = await app.inject({ method: 'GET', url: '/v1/inventory?include=availability', headers: auth(key) })
      assert.deepEqual(availability.json().map((e: { petId: number, held: number, available: number }) => [e.petId, e.held, e.available]), [[1, 0, 1], [2, 0, 3]])
      const late = await write(`/v1/holds/${expiring.json().id}/confirm`, 'pg-5')
      assert.equal(late.statusCode, 409)
      assert.equal(late.json().code, 'hold_not_active')
    })
  })
}

if (await requirePostgres('a confirmation seen by every instance') && await requireRedis('a confirmation seen by every instance')) {
  describe('a confirmation across instances (PostgreSQL with Redis)', () => {
    test('when one instance confirms a hold, then a GET that starts after the answer on the other instance shows the sale', async (t) => {
      const prefix = redisKeyPrefix(t)
      const schema = await tempSchema(t)
      const stores = [new PostgresStore(POSTGRES_URL, { schema }), new PostgresStore(POSTGRES_URL, { schema })] as const
      t.after(() => Promise.all(stores.map((store) => store.close())))
      await stores[0].schema.migrate()
      await importData(stores[0], { pets: [pet(1, { quantity: 9 }), pet(2, { quantity: 9 })], orders: [] })
      const key = await keyOf(stores[0], 'storefront')
      const clients: Array<ReturnType<typeof createRedisClient>> = []
      const apps = await Promise.all(stores.map(async (store) => {
        const client = createRedisClient(REDIS_URL)
        clients.push(client)
        t.after(() => client.disconnect())
        const shared = resilientRedis(client, prefix, { logger: { warn: () => {}, info: () => {} } })
        t.after(() => shared.limiter.close())
        // Keys stay cached: the listing's freshness comes from the change signal, not from a store call per GET.
        const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '60000' }), { store, logger: false, ...shared })
        t.after(() => app.close())
        return app
      }))
      await Promise.all(clients.map(waitReady))
      const [one, two] = apps as [typeof apps[0], typeof apps[0]]
      const list = async (app: typeof one) => (await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).json()
        .map((e: { petId: number, quantity: number }) => [e.petId, e.quantity])
      // Both listings are warm before the sales.
      for (const app of [one, two]) assert.deepEqual(await list(app), [[1, 9], [2, 9]])
      for (let i = 1; i <= 4; i++) {
        const [seller, other] = i % 2 === 0 ? [one, two] : [two, one]
        const hold = await seller.inject({ method: 'POST', url: '/v1/holds', headers: { ...auth(key), ...json, 'idempotency-key': `h-${i}` }, payload: { lines: [{ petId: 2, quantity: 1 }] } })
        assert.equal(hold.statusCode, 201)
        const confirmed = await seller.inject({ method: 'POST', url: `/v1/holds/${hold.json().id}/confirm`, headers: { ...auth(key), 'idempotency-key': `c-${i}` } })
        assert.equal(confirmed.statusCode, 200)
        assert.deepEqual(await list(other), [[1, 9], [2, 9 - i]], `sale ${i} seen by the other instance`)
      }
    })
  })
}
