/**
 * The idempotency contract (src/store/idempotency/types.ts): the records a keyed stock write leaves, found and purged,
 * the same on every store. Each runner calls idempotencyContract() with a function that opens a fresh, migrated, empty
 * store for one test. Every test makes its own data; nothing is shared.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { IdempotencyClaim } from '../../src/store/idempotency/types.js'
import type { Store } from '../../src/store/store.js'
import { importData } from '../../src/domain/import.js'
import { ABOVE_2_53, CHANGED_AT, INT64_MAX, pet, snapshot, stockAdjustment, stockChange } from './helpers.js'

export function idempotencyContract (name: string, open: (t: TestContext) => Promise<Store>): void {
  describe(`${name}: idempotency`, () => {
    describe('idempotency records (a change sent with an idempotency key)', () => {
      const EXPIRES = new Date(CHANGED_AT.getTime() + 86_400_000)
      const claim = (key: string, overrides: Partial<IdempotencyClaim> = {}): IdempotencyClaim =>
        ({ scope: 'key_a', key, fingerprint: `fp-${key}`, expiresAt: EXPIRES, ...overrides })

      test('a keyed change writes its record with the entry it left; the same key again changes nothing and answers recorded', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(ABOVE_2_53, { quantity: 4, status: 'pending' }), pet(2n, { quantity: 1 })], orders: [] })
        const first = await store.stock.adjustQuantity(stockAdjustment(ABOVE_2_53, 3, { idempotency: claim('k1') }))
        assert.equal(first.status, 'updated')
        const entry = first.status === 'updated' ? first.entry : null
        assert.deepEqual(await store.idempotency.findIdempotencyRecord('key_a', 'k1', CHANGED_AT),
          { fingerprint: 'fp-k1', entries: [entry], response: null, createdAt: CHANGED_AT, expiresAt: EXPIRES })
        const before = await snapshot(store, [ABOVE_2_53, 2n])
        assert.deepEqual(await store.stock.adjustQuantity(stockAdjustment(ABOVE_2_53, 3, { idempotency: claim('k1') })), { status: 'recorded' })
        // Whatever the second change asks, and however it would end, the recorded key stops it first.
        assert.deepEqual(await store.stock.setQuantity(stockChange(2n, 9, { idempotency: claim('k1', { fingerprint: 'other' }) })), { status: 'recorded' })
        assert.deepEqual(await store.stock.adjustQuantity(stockAdjustment(ABOVE_2_53, -100, { idempotency: claim('k1') })), { status: 'recorded' })
        assert.deepEqual(await store.stock.setQuantity(stockChange(ABOVE_2_53, 1, { expectedRevisions: [0n], idempotency: claim('k1') })), { status: 'recorded' })
        assert.deepEqual(await store.stock.setQuantity(stockChange(INT64_MAX, 1, { idempotency: claim('k1') })), { status: 'recorded' })
        assert.deepEqual(await snapshot(store, [ABOVE_2_53, 2n]), before)
      })

      test('a change that applies nothing (unknown pet, stale revision, out of range) writes no record', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 2 })], orders: [] })
        assert.equal((await store.stock.setQuantity(stockChange(INT64_MAX, 1, { idempotency: claim('k1') }))).status, 'not_found')
        assert.equal((await store.stock.setQuantity(stockChange(1n, 5, { expectedRevisions: [999n], idempotency: claim('k2') }))).status, 'stale')
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, -3, { idempotency: claim('k3') }))).status, 'out_of_range')
        for (const key of ['k1', 'k2', 'k3']) assert.equal(await store.idempotency.findIdempotencyRecord('key_a', key, CHANGED_AT), null)
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, -2, { idempotency: claim('k3') }))).status, 'updated', 'the key is still free')
      })

      test('keys are scoped: the same key of another scope is another key', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 })], orders: [] })
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('same') }))).status, 'updated')
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('same', { scope: 'key_b' }) }))).status, 'updated')
        assert.equal((await store.stock.getStockEntry(1n))?.quantity, 2)
        assert.equal((await store.idempotency.findIdempotencyRecord('key_b', 'same', CHANGED_AT))?.entries[0]?.quantity, 2)
      })

      test('an expired record is not found, and a change with its key applies and records it anew', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 })], orders: [] })
        const expiry = new Date(CHANGED_AT.getTime() + 60_000)
        await store.stock.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('k', { expiresAt: expiry }) }))
        assert.notEqual(await store.idempotency.findIdempotencyRecord('key_a', 'k', new Date(expiry.getTime() - 1)), null)
        assert.equal(await store.idempotency.findIdempotencyRecord('key_a', 'k', expiry), null, 'expired at its expiry')
        const later = new Date(expiry.getTime() + 1000)
        const again = await store.stock.adjustQuantity(stockAdjustment(1n, 1, { at: later, idempotency: claim('k', { fingerprint: 'new', expiresAt: EXPIRES }) }))
        assert.equal(again.status, 'updated')
        assert.deepEqual(await store.idempotency.findIdempotencyRecord('key_a', 'k', later),
          { fingerprint: 'new', entries: [again.status === 'updated' && again.entry], response: null, createdAt: later, expiresAt: EXPIRES })
      })

      test('purging deletes expired records only, at most the number asked for', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 })], orders: [] })
        for (let i = 0; i < 5; i++) {
          await store.stock.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim(`old-${i}`, { expiresAt: new Date(CHANGED_AT.getTime() + 1000 + i) }) }))
        }
        await store.stock.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('live') }))
        const now = new Date(CHANGED_AT.getTime() + 10_000)
        assert.equal(await store.idempotency.purgeIdempotencyRecords(now, 3), 3)
        assert.equal(await store.idempotency.purgeIdempotencyRecords(now, 3), 2)
        assert.equal(await store.idempotency.purgeIdempotencyRecords(now, 3), 0)
        assert.notEqual(await store.idempotency.findIdempotencyRecord('key_a', 'live', now), null)
        assert.equal((await store.stock.stockHistory(1n, 10)).length, 7, 'the changes themselves stay in the ledger')
      })

      test('the same key sent many times at once applies once; every other attempt answers recorded', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 }), pet(2n, { quantity: 0 })], orders: [] })
        const results = await Promise.all(Array.from({ length: 30 }, (_, i) =>
          // Different pets too: the key, not the entry's lock, is what makes them one request.
          store.stock.adjustQuantity(stockAdjustment(i % 3 === 0 ? 2n : 1n, 1, { idempotency: claim('once') }))))
        assert.equal(results.filter((r) => r.status === 'updated').length, 1)
        assert.equal(results.filter((r) => r.status === 'recorded').length, 29)
        const total = ((await store.stock.getStockEntry(1n))?.quantity ?? 0) + ((await store.stock.getStockEntry(2n))?.quantity ?? 0)
        assert.equal(total, 1)
        assert.equal((await store.stock.stockHistory(1n, 100)).length + (await store.stock.stockHistory(2n, 100)).length, 3, 'two imports and one change')
      })
    })
  })
}
