/**
 * Holds without HTTP (src/domain/holds.ts) on a SQLite store in memory: each operation's answer at its instant, and
 * each refusal of the store as the error a client sees (code, status, what the message says).
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { importData } from '../../src/domain/import.js'
import { IdempotencyKeys } from '../../src/domain/idempotency.js'
import {
  confirmHold, extendHold, getHold, type HoldsContext, listHolds, placeHold, releaseHold, type Seller
} from '../../src/domain/holds.js'
import { HOLD_DEFAULTS, holdStateAt, InsufficientStockError, newHoldId, type SellingKey } from '../../src/domain/selling.js'
import { AppError } from '../../src/errors.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'

const START = Date.parse('2026-11-27T12:00:00.000Z')
const SELLER: Seller = { quotaId: 'quota_a', keyId: 'key_a', requestId: 'req-1' }

interface Setup {
  context: HoldsContext
  store: SqliteStore
  clock: { now: number }
  /** A fresh idempotency key of quota_a for each write. */
  key: (name?: string) => SellingKey
}

async function setup (t: TestContext, stock: Array<[number, number]>, settings = HOLD_DEFAULTS): Promise<Setup> {
  const store = new SqliteStore(':memory:')
  await store.schema.migrate()
  t.after(() => store.close())
  await importData(store, { pets: stock.map(([id, quantity]) => ({ id: BigInt(id), name: `pet ${id}`, status: 'available' as const, quantity })), orders: [] },
    { at: new Date(START - 60_000) })
  const clock = { now: START }
  const keys = new IdempotencyKeys({ store, clock: () => clock.now, ttlSeconds: 86_400 })
  let n = 0
  return {
    context: { store, clock: () => clock.now, settings },
    store,
    clock,
    key: (name) => ({ keys, key: name ?? `key-${++n}`, owner: 'quota_a' })
  }
}

const refusedWith = (code: string, status: number, message?: RegExp) => (error: unknown): boolean => {
  assert.ok(error instanceof AppError, `expected an AppError, got ${String(error)}`)
  assert.equal(error.code, code)
  assert.equal(error.status, status)
  if (message !== undefined) assert.match(error.message, message)
  return true
}

async function available (store: SqliteStore, petId: number, at: number): Promise<number | undefined> {
  const [one] = await store.selling.availability([BigInt(petId)], new Date(at))
  return one?.available
}

describe('holds (domain)', () => {
  test('a new hold id is hold_ and 20 base64url characters, never the same twice', () => {
    const ids = new Set(Array.from({ length: 1000 }, newHoldId))
    assert.equal(ids.size, 1000)
    for (const id of ids) assert.match(id, /^hold_[A-Za-z0-9_-]{20}$/)
  })

  test('an active hold is expired from the instant of its expiry, not before', () => {
    const expiresAt = new Date(START + 1000)
    assert.equal(holdStateAt({ state: 'active', expiresAt }, new Date(START + 999)), 'active')
    assert.equal(holdStateAt({ state: 'active', expiresAt }, expiresAt), 'expired')
    assert.equal(holdStateAt({ state: 'active', expiresAt: null }, new Date(START + 10 ** 12)), 'active')
    assert.equal(holdStateAt({ state: 'released', expiresAt }, new Date(START + 5000)), 'released')
  })

  test('when a hold is placed without expiresIn, then it lasts the default duration and its units stop being available', async (t) => {
    const { context, store, key } = await setup(t, [[1, 5], [2, 3]])
    const { hold, replayed } = await placeHold(context, { lines: [{ petId: 2n, quantity: 3 }, { petId: 1n, quantity: 2 }], reference: 'cart-7' }, SELLER, key())
    assert.equal(replayed, false)
    assert.equal(hold.state, 'active')
    assert.deepEqual(hold.lines, [{ petId: 1n, quantity: 2 }, { petId: 2n, quantity: 3 }])
    assert.equal(hold.reference, 'cart-7')
    assert.equal(hold.expiresAt?.getTime(), START + HOLD_DEFAULTS.defaultTtlSeconds * 1000)
    assert.equal(await available(store, 1, START), 3)
    assert.equal(await available(store, 2, START), 0)
  })

  test('when a line asks for more than is available, then nothing is held and every short line says how many are available', async (t) => {
    const { context, store, key } = await setup(t, [[1, 5], [2, 3], [3, 9]])
    await placeHold(context, { lines: [{ petId: 1n, quantity: 4 }] }, SELLER, key())
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 2 }, { petId: 2n, quantity: 4 }, { petId: 3n, quantity: 1 }] }, SELLER, key()),
      (error: unknown) => {
        assert.ok(error instanceof InsufficientStockError)
        assert.equal(error.status, 409)
        assert.deepEqual(error.shortages, [{ petId: 1n, requested: 2, available: 1 }, { petId: 2n, requested: 4, available: 3 }])
        assert.match(error.message, /pet 1 has 1 unit available, 2 were requested; pet 2 has 3 units available, 4 were requested/)
        return true
      })
    assert.equal(await available(store, 3, START), 9)
  })

  test('when lines name a pet twice, or expiresIn is beyond the maximum, then it is 400 and nothing is held', async (t) => {
    const { context, store, key } = await setup(t, [[1, 5]])
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 1 }, { petId: 1n, quantity: 1 }] }, SELLER, key()),
      refusedWith('invalid_request', 400, /body\.lines\[1\]\.petId repeats pet 1/))
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 1 }], expiresIn: HOLD_DEFAULTS.maxTtlSeconds + 1 }, SELLER, key()),
      refusedWith('invalid_request', 400, /expiresIn must be an integer from 1 to 86400/))
    assert.equal(await available(store, 1, START), 5)
  })

  test('when a pet has no stock entry, then it is 404 naming it', async (t) => {
    const { context, key } = await setup(t, [[1, 5]])
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 1 }, { petId: 99n, quantity: 1 }] }, SELLER, key()),
      refusedWith('not_found', 404, /pet 99/))
  })

  test('when the quota would exceed its caps, then it is hold_limit_reached naming the cap and the numbers', async (t) => {
    const { context, key } = await setup(t, [[1, 50]], { ...HOLD_DEFAULTS, maxActivePerQuota: 2, maxUnitsPerQuota: 10 })
    await placeHold(context, { lines: [{ petId: 1n, quantity: 6 }] }, SELLER, key())
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 5 }] }, SELLER, key()),
      refusedWith('hold_limit_reached', 409, /at most 10 \(HOLDS_MAX_UNITS_PER_QUOTA\)/))
    await placeHold(context, { lines: [{ petId: 1n, quantity: 1 }] }, SELLER, key())
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 1 }] }, SELLER, key()),
      refusedWith('hold_limit_reached', 409, /2 active holds and may have at most 2 \(HOLDS_MAX_ACTIVE_PER_QUOTA\)/))
  })

  test('when the same key is sent again with the same request, then the first hold is answered and nothing more is held', async (t) => {
    const { context, store, clock, key } = await setup(t, [[1, 5]])
    const first = await placeHold(context, { lines: [{ petId: 1n, quantity: 2 }], expiresIn: 60 }, SELLER, key('retry'))
    clock.now += 5000
    const again = await placeHold(context, { lines: [{ petId: 1n, quantity: 2 }], expiresIn: 60 }, SELLER, key('retry'))
    assert.equal(again.replayed, true)
    assert.deepEqual({ ...again.hold, quotaId: null, keyId: null }, { ...first.hold, quotaId: null, keyId: null })
    assert.equal(await available(store, 1, clock.now), 3)
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 3 }], expiresIn: 60 }, SELLER, key('retry')),
      refusedWith('idempotency_key_reused', 422))
  })

  test('when a write is sent without a key, then it is 400 naming the Idempotency-Key header', async (t) => {
    const { context, key } = await setup(t, [[1, 5]])
    await assert.rejects(placeHold(context, { lines: [{ petId: 1n, quantity: 1 }] }, SELLER, { ...key(), key: null }),
      refusedWith('invalid_request', 400, /^Idempotency-Key is required/))
  })

  test('when a hold is read after its expiry, then it is expired from that instant and its units are available again', async (t) => {
    const { context, store, clock, key } = await setup(t, [[1, 5]])
    const { hold } = await placeHold(context, { lines: [{ petId: 1n, quantity: 5 }], expiresIn: 60 }, SELLER, key())
    clock.now = START + 59_999
    assert.equal((await getHold(context, hold.id)).state, 'active')
    assert.equal(await available(store, 1, clock.now), 0)
    clock.now = START + 60_000
    const expired = await getHold(context, hold.id)
    assert.equal(expired.state, 'expired')
    assert.equal(expired.endedAt?.getTime(), START + 60_000)
    assert.equal(await available(store, 1, clock.now), 5)
    await assert.rejects(confirmHold(context, hold.id, SELLER, key()), refusedWith('hold_not_active', 409, /is expired since 2026-11-27T12:01:00.000Z/))
  })

  test('when a hold is confirmed, then its units leave the stock and the entries are answered; a second confirmation is hold_not_active', async (t) => {
    const { context, store, clock, key } = await setup(t, [[1, 5], [2, 4]])
    const { hold } = await placeHold(context, { lines: [{ petId: 1n, quantity: 2 }, { petId: 2n, quantity: 4 }], reference: 'order-9' }, SELLER, key())
    clock.now += 1000
    const sale = await confirmHold(context, hold.id, SELLER, key('confirm'))
    assert.equal(sale.hold.state, 'confirmed')
    assert.deepEqual(sale.entries.map((entry) => [entry.petId, entry.quantity]), [[1n, 3], [2n, 0]])
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 3)
    const [change] = (await store.stock.stockHistory(1n, 1))
    assert.equal(change?.reason, 'sale')
    assert.equal(change?.reference, 'order-9')
    // The retry of the confirmation is its answer again, not a 409.
    const retried = await confirmHold(context, hold.id, SELLER, key('confirm'))
    assert.equal(retried.replayed, true)
    assert.equal(retried.hold.state, 'confirmed')
    await assert.rejects(confirmHold(context, hold.id, SELLER, key()), refusedWith('hold_not_active', 409, /is confirmed/))
  })

  test('when on hand was set below a line, then confirming is insufficient_stock with what is on hand, and the hold stays active', async (t) => {
    const { context, store, key } = await setup(t, [[1, 5]])
    const { hold } = await placeHold(context, { lines: [{ petId: 1n, quantity: 4 }] }, SELLER, key())
    await store.stock.setQuantity({ petId: 1n, quantity: 2, reason: 'recount', note: null, expectedRevisions: null, keyId: null, requestId: null, at: new Date(START) })
    await assert.rejects(confirmHold(context, hold.id, SELLER, key()), (error: unknown) => {
      assert.ok(error instanceof InsufficientStockError)
      assert.deepEqual(error.shortages, [{ petId: 1n, requested: 4, available: 2 }])
      assert.match(error.message, /pet 1 has 2 units on hand, 4 were requested\. Nothing was sold; the hold stays active\./)
      return true
    })
    assert.equal((await getHold(context, hold.id)).state, 'active')
  })

  test('when a hold is released, then its units are available at once, and releasing or extending it again is hold_not_active', async (t) => {
    const { context, store, key } = await setup(t, [[1, 5]])
    const { hold } = await placeHold(context, { lines: [{ petId: 1n, quantity: 5 }] }, SELLER, key())
    const released = await releaseHold(context, hold.id, SELLER, key())
    assert.equal(released.hold.state, 'released')
    assert.equal(await available(store, 1, START), 5)
    await assert.rejects(releaseHold(context, hold.id, SELLER, key()), refusedWith('hold_not_active', 409, /is released/))
    await assert.rejects(extendHold(context, hold.id, 60, SELLER, key()), refusedWith('hold_not_active', 409))
  })

  test('when a hold is extended, then it expires that long from now, but never later than the maximum after it was placed', async (t) => {
    const { context, clock, key } = await setup(t, [[1, 5]], { ...HOLD_DEFAULTS, maxTtlSeconds: 3600 })
    const { hold } = await placeHold(context, { lines: [{ petId: 1n, quantity: 1 }], expiresIn: 1200 }, SELLER, key())
    clock.now = START + 1_000_000
    const extended = await extendHold(context, hold.id, 2600, SELLER, key('extend'))
    assert.equal(extended.hold.expiresAt?.getTime(), START + 3_600_000)
    await assert.rejects(extendHold(context, hold.id, 2601, SELLER, key()),
      refusedWith('invalid_request', 400, /latest allowed, 2026-11-27T13:00:00.000Z \(3600 seconds after it was placed\): send at most 2600/))
    // A retry later than the bound is still the replay of what was done.
    clock.now += 10_000
    const retried = await extendHold(context, hold.id, 2600, SELLER, key('extend'))
    assert.equal(retried.replayed, true)
    assert.equal(retried.hold.expiresAt?.getTime(), START + 3_600_000)
  })

  test('when holds are unknown, then reading, confirming, releasing and extending them is 404', async (t) => {
    const { context, key } = await setup(t, [[1, 5]])
    for (const id of [newHoldId(), 'not-a-hold']) {
      await assert.rejects(getHold(context, id), refusedWith('not_found', 404))
      await assert.rejects(confirmHold(context, id, SELLER, key()), refusedWith('not_found', 404))
      await assert.rejects(releaseHold(context, id, SELLER, key()), refusedWith('not_found', 404))
      await assert.rejects(extendHold(context, id, 60, SELLER, key()), refusedWith('not_found', 404))
    }
  })

  test('when holds are listed, then they come oldest first a page at a time, filtered by pet, reference and state now', async (t) => {
    const { context, clock, key } = await setup(t, [[1, 50], [2, 50]])
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      const { hold } = await placeHold(context, { lines: [{ petId: i % 2 === 0 ? 1n : 2n, quantity: 1 }], reference: i < 3 ? 'cart-a' : 'cart-b', expiresIn: 100 + i * 100 },
        SELLER, key())
      ids.push(hold.id)
      clock.now += 10
    }
    const first = await listHolds(context, {}, { limit: 2, cursor: null })
    assert.deepEqual(first.holds.map((hold) => hold.id), ids.slice(0, 2))
    assert.notEqual(first.nextCursor, null)
    const second = await listHolds(context, {}, { limit: 2, cursor: first.nextCursor })
    assert.deepEqual(second.holds.map((hold) => hold.id), ids.slice(2, 4))
    const last = await listHolds(context, {}, { limit: 2, cursor: second.nextCursor })
    assert.deepEqual(last.holds.map((hold) => hold.id), ids.slice(4))
    assert.equal(last.nextCursor, null)

    assert.deepEqual((await listHolds(context, { petId: 2n }, { limit: 10, cursor: null })).holds.map((hold) => hold.id), [ids[1], ids[3]])
    assert.deepEqual((await listHolds(context, { reference: 'cart-b' }, { limit: 10, cursor: null })).holds.map((hold) => hold.id), ids.slice(3))
    clock.now = START + 250_000
    const expired = await listHolds(context, { state: 'expired' }, { limit: 10, cursor: null })
    assert.deepEqual(expired.holds.map((hold) => [hold.id, hold.state]), [[ids[0], 'expired'], [ids[1], 'expired']])
    await assert.rejects(listHolds(context, {}, { limit: 2, cursor: 'bm9wZQ' }), refusedWith('invalid_request', 400))
  })
})
