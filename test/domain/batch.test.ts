/**
 * The rule of a batch, without HTTP: each pet once, one batch id for its changes, the range handed to the store,
 * every failing change reported with the code a single change would answer, and idempotency keys as for one change.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { IdempotencyKeys } from '../../src/domain/idempotency.js'
import { applyBatch, BatchRefusedError, type BatchChangeRequest } from '../../src/domain/inventory.js'
import { MAX_QUANTITY, type StockEntry } from '../../src/model.js'
import { AppError } from '../../src/errors.js'
import type { StockBatch, StockBatchResult } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'

const NOW = Date.parse('2026-11-23T12:00:00Z')
const clock = (): number => NOW
const ACTOR = { keyId: 'key_a', requestId: 'req-1' }
const entry = (petId: bigint, quantity: number): StockEntry => ({ petId, quantity, status: 'available', revision: 4n })
const add = (petId: bigint, delta: number): BatchChangeRequest => ({ petId, delta, reason: 'arrival', note: null, expectedRevisions: null })
const set = (petId: bigint, quantity: number): BatchChangeRequest => ({ petId, quantity, reason: 'adjustment', note: null, expectedRevisions: [3n] })

function storeAnswering (answer: (batch: StockBatch) => StockBatchResult) {
  const asked: StockBatch[] = []
  const store = {
    stock: { applyBatch: async (batch: StockBatch) => { asked.push(batch); return answer(batch) } },
    idempotency: { findIdempotencyRecord: async () => ({ fingerprint: 'other', entries: [], response: null, createdAt: new Date(NOW), expiresAt: new Date(NOW + 1000) }) }
  } as unknown as Store
  return { store, asked }
}

describe('applyBatch', () => {
  test('when the store applies it, then the entries are answered in order, and the store got one batch id, the range and the actor', async () => {
    const { store, asked } = storeAnswering(() => ({ status: 'updated', entries: [entry(1n, 3), entry(2n, 0)], version: 8n }))
    const applied = await applyBatch(store, [add(1n, 3), set(2n, 0)], ACTOR, clock)
    assert.deepEqual(applied, { entries: [entry(1n, 3), entry(2n, 0)], version: 8n, replayed: false })
    const [batch] = asked
    assert.match(batch?.batchId ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    assert.deepEqual({ ...batch, batchId: '' }, {
      changes: [add(1n, 3), set(2n, 0)], allowed: { min: 0, max: MAX_QUANTITY }, batchId: '', keyId: 'key_a', requestId: 'req-1', at: new Date(NOW)
    })
  })

  test('when a pet appears twice, then it is invalid_request naming both changes, and the store is not asked', async () => {
    const { store, asked } = storeAnswering(() => assert.fail('not asked'))
    await assert.rejects(applyBatch(store, [add(1n, 1), add(2n, 1), set(1n, 5)], ACTOR, clock),
      (error: unknown) => error instanceof AppError && error.code === 'invalid_request' && /changes\[2\] changes pet 1 again \(body.changes\[0\]/.test(error.message))
    assert.equal(asked.length, 0)
  })

  test('when changes cannot apply, then batch_refused (409) lists each with the code a single change would answer', async () => {
    const { store } = storeAnswering(() => ({
      status: 'refused',
      failures: [
        { index: 0, petId: 1n, reason: 'out_of_range', current: entry(1n, 2) },
        { index: 1, petId: 2n, reason: 'stale', current: entry(2n, 9) },
        { index: 2, petId: 3n, reason: 'not_found' }
      ]
    }))
    await assert.rejects(applyBatch(store, [add(1n, -3), set(2n, 1), add(3n, 1)], ACTOR, clock), (error: unknown) => {
      assert.ok(error instanceof BatchRefusedError)
      assert.deepEqual([error.code, error.status, error.message], ['batch_refused', 409, '3 of 3 changes cannot be applied; nothing was changed.'])
      assert.deepEqual(error.failures.map((f) => [f.index, f.petId, f.code, f.current?.quantity]), [
        [0, 1n, 'stock_out_of_range', 2], [1, 2n, 'precondition_failed', 9], [2, 3n, 'not_found', undefined]
      ])
      assert.match(error.failures[0]?.message ?? '', /Adding -3 to the stock of pet 1 \(now 2\) would leave -1/)
      return true
    })
  })

  test('when sent with an idempotency key that recorded another request, then it is idempotency_key_reused', async () => {
    const { store } = storeAnswering(() => ({ status: 'recorded' }))
    const keys = new IdempotencyKeys({ store, clock, ttlSeconds: 60 })
    await assert.rejects(applyBatch(store, [add(1n, 1)], ACTOR, clock, { keys, key: 'k', owner: 'key_a' }), /used for a different request/)
  })
})
