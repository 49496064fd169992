/**
 * The rule of a relative stock change, without HTTP: the store is asked to keep the result within 0..MAX_QUANTITY,
 * and each answer it gives becomes the change or the error a client sees.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { adjustQuantity, StaleEntryError } from '../../src/domain/inventory.js'
import { MAX_QUANTITY, type StockEntry } from '../../src/model.js'
import { AppError } from '../../src/errors.js'
import type { StockAdjustment, StockAdjustmentResult } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'

const ENTRY: StockEntry = { petId: 7n, quantity: 5, status: 'available', revision: 3n }
const ACTOR = { keyId: 'key_a', requestId: 'req-1' }
const clock = (): number => Date.parse('2026-11-23T12:00:00Z')

function storeAnswering (result: StockAdjustmentResult) {
  const asked: StockAdjustment[] = []
  const store = { stock: { adjustQuantity: async (change: StockAdjustment) => { asked.push(change); return result } } } as unknown as Store
  return { store, asked }
}

describe('adjustQuantity', () => {
  test('when the store applies it, then the change is what the store answered, and the store was asked to keep 0..MAX_QUANTITY', async () => {
    const { store, asked } = storeAnswering({ status: 'updated', entry: { ...ENTRY, quantity: 8, revision: 4n }, version: 9n })
    const applied = await adjustQuantity(store, 7n, { delta: 3, reason: 'arrival', note: null, expectedRevisions: null }, ACTOR, clock)
    assert.deepEqual(applied, { entry: { ...ENTRY, quantity: 8, revision: 4n }, version: 9n, replayed: false })
    assert.deepEqual(asked, [{
      petId: 7n, delta: 3, reason: 'arrival', note: null, expectedRevisions: null, keyId: 'key_a', requestId: 'req-1',
      at: new Date(clock()), allowed: { min: 0, max: MAX_QUANTITY }
    }])
  })

  test('when the result would leave the range, then it is stock_out_of_range (409) naming the current quantity and the result', async () => {
    const { store } = storeAnswering({ status: 'out_of_range', current: ENTRY })
    await assert.rejects(adjustQuantity(store, 7n, { delta: -6, reason: 'adjustment', note: null, expectedRevisions: null }, ACTOR, clock),
      (error: unknown) => error instanceof AppError && error.code === 'stock_out_of_range' && error.status === 409 &&
        /now 5\) would leave -1, outside 0 to 1000000000/.test(error.message))
  })

  test('when the entry is stale or missing, then it is precondition_failed with the current entry, or not_found', async () => {
    await assert.rejects(adjustQuantity(storeAnswering({ status: 'stale', current: ENTRY }).store, 7n,
      { delta: 1, reason: 'adjustment', note: null, expectedRevisions: [1n] }, ACTOR, clock),
    (error: unknown) => error instanceof StaleEntryError && error.current === ENTRY)
    await assert.rejects(adjustQuantity(storeAnswering({ status: 'not_found' }).store, 7n,
      { delta: 1, reason: 'adjustment', note: null, expectedRevisions: null }, ACTOR, clock),
    (error: unknown) => error instanceof AppError && error.code === 'not_found')
  })
})
