/**
 * The rules of idempotency keys, without HTTP: a key applies a write once per caller, a retry is answered what the first
 * write left, another request with the key is refused, and a key in flight in this process is refused at once.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { IdempotencyKeys, purgeExpiredKeys } from '../../src/domain/idempotency.js'
import { adjustQuantity, updateQuantity } from '../../src/domain/inventory.js'
import type { StockEntry } from '../../src/model.js'
import { AppError } from '../../src/errors.js'
import type { IdempotencyClaim, IdempotencyRecord } from '../../src/store/idempotency/types.js'
import type { StockAdjustment, StockChange } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'

const NOW = Date.parse('2026-11-23T12:00:00Z')
const clock = (): number => NOW
const ACTOR = { keyId: 'key_a', requestId: 'req-1' }
const ENTRY: StockEntry = { petId: 7n, quantity: 5, status: 'available', revision: 3n }

/** A store that keeps records in a map and applies every change it is not told is recorded; it counts what it applied. */
function recordingStore () {
  const records = new Map<string, IdempotencyRecord & { claim: IdempotencyClaim }>()
  const applied: Array<StockChange | StockAdjustment> = []
  let gate: Promise<void> = Promise.resolve()
  const write = async (change: StockChange | StockAdjustment) => {
    await gate
    const claim = change.idempotency
    if (claim !== undefined && records.has(`${claim.scope}\n${claim.key}`)) return { status: 'recorded' as const }
    applied.push(change)
    const entry = { ...ENTRY, quantity: 'delta' in change ? ENTRY.quantity + change.delta : change.quantity, revision: ENTRY.revision + 1n }
    if (claim !== undefined) {
      records.set(`${claim.scope}\n${claim.key}`, { fingerprint: claim.fingerprint, entries: [entry], response: null, createdAt: change.at, expiresAt: claim.expiresAt, claim })
    }
    return { status: 'updated' as const, entry }
  }
  const store = {
    stock: { setQuantity: write, adjustQuantity: write },
    idempotency: {
      findIdempotencyRecord: async (scope: string, key: string, at: Date) => {
        const record = records.get(`${scope}\n${key}`)
        return record !== undefined && record.expiresAt > at ? record : null
      }
    }
  } as unknown as Store
  return { store, records, applied, hold: (until: Promise<void>) => { gate = until } }
}

const set = (quantity: number) => ({ quantity, reason: 'arrival' as const, note: null, expectedRevisions: null })
const adjust = (delta: number) => ({ delta, reason: 'arrival' as const, note: null, expectedRevisions: null })

describe('idempotency keys', () => {
  test('when a keyed write applies, then its record carries the fingerprint and an expiry one retention later', async () => {
    const { store, records } = recordingStore()
    const keys = new IdempotencyKeys({ store, clock, ttlSeconds: 3600 })
    const applied = await updateQuantity(store, 7n, set(9), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })
    assert.deepEqual(applied, { entry: { ...ENTRY, quantity: 9, revision: 4n }, replayed: false })
    const { claim } = records.get('key_a\nk1') ?? assert.fail('no record')
    assert.deepEqual(claim, { scope: 'key_a', key: 'k1', fingerprint: claim.fingerprint, expiresAt: new Date(NOW + 3_600_000) })
    assert.match(claim.fingerprint, /^[0-9a-f]{64}$/)
  })

  test('when the same request comes again with the key, then it is answered the recorded entry, replayed, and nothing applies again', async () => {
    const { store, applied } = recordingStore()
    const keys = new IdempotencyKeys({ store, clock, ttlSeconds: 3600 })
    const first = await adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })
    const again = await adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })
    assert.deepEqual(again, { entry: first.entry, replayed: true })
    assert.equal(applied.length, 1)
  })

  test('when another request comes with a used key, then it is idempotency_key_reused (422) and nothing applies', async () => {
    const { store, applied } = recordingStore()
    const keys = new IdempotencyKeys({ store, clock, ttlSeconds: 3600 })
    await adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })
    const others = [
      () => adjustQuantity(store, 7n, adjust(3), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' }),
      () => adjustQuantity(store, 8n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' }),
      () => adjustQuantity(store, 7n, { ...adjust(2), reason: 'return' }, ACTOR, clock, { keys, key: 'k1', owner: 'key_a' }),
      () => adjustQuantity(store, 7n, { ...adjust(2), note: 'a note' }, ACTOR, clock, { keys, key: 'k1', owner: 'key_a' }),
      () => adjustQuantity(store, 7n, { ...adjust(2), expectedRevisions: [3n] }, ACTOR, clock, { keys, key: 'k1', owner: 'key_a' }),
      () => updateQuantity(store, 7n, set(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })
    ]
    for (const other of others) {
      await assert.rejects(other(), (error: unknown) => error instanceof AppError && error.code === 'idempotency_key_reused' && error.status === 422 &&
        /2026-11-23T12:00:00.000Z/.test(error.message))
    }
    assert.equal(applied.length, 1)
  })

  test('when the first request with a key is still running here, then a second is idempotency_key_in_flight (409); once it ends, the key replays', async () => {
    const { store, applied, hold } = recordingStore()
    const keys = new IdempotencyKeys({ store, clock, ttlSeconds: 3600 })
    let release = (): void => {}
    hold(new Promise<void>((resolve) => { release = resolve }))
    const first = adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })
    await assert.rejects(adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' }),
      (error: unknown) => error instanceof AppError && error.code === 'idempotency_key_in_flight' && error.status === 409)
    // Another caller's key of the same spelling is another key: it is not held up.
    const otherCaller = adjustQuantity(store, 7n, adjust(2), { ...ACTOR, keyId: 'key_b' }, clock, { keys, key: 'k1', owner: 'key_b' })
    release()
    await first
    assert.equal((await otherCaller).replayed, false)
    assert.equal((await adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })).replayed, true)
    assert.equal(applied.length, 2)
  })

  test('when a retry comes with another key of the same quota (a rotation), then it is the same caller: replayed, applied once', async () => {
    const { store, applied } = recordingStore()
    const keys = new IdempotencyKeys({ store, clock, ttlSeconds: 3600 })
    const first = await adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })
    // The rotated key has its own id (the ledger names it) and its predecessor's quota id (the owner of its keys).
    const retry = await adjustQuantity(store, 7n, adjust(2), { ...ACTOR, keyId: 'key_new' }, clock, { keys, key: 'k1', owner: 'key_a' })
    assert.deepEqual(retry, { entry: first.entry, replayed: true })
    assert.equal(applied.length, 1)
  })

  test('when the record expires while a retry is being written, then the retry is tried again at its own time and applies', async () => {
    const time = { now: NOW }
    const ticking = (): number => time.now
    const records = new Map<string, { fingerprint: string, expiresAt: Date, entries: StockEntry[], createdAt: Date }>()
    let applied = 0
    const store = {
      stock: {
        adjustQuantity: async (change: StockAdjustment) => {
          const claim = change.idempotency as IdempotencyClaim
          const held = records.get(claim.key)
          time.now += 2 // the write takes a little while
          if (held !== undefined && held.expiresAt > change.at) return { status: 'recorded' }
          applied++
          records.set(claim.key, { fingerprint: claim.fingerprint, expiresAt: claim.expiresAt, entries: [ENTRY], createdAt: change.at })
          return { status: 'updated', entry: ENTRY }
        }
      },
      idempotency: {
        findIdempotencyRecord: async (_scope: string, key: string, at: Date) => {
          const held = records.get(key)
          return held !== undefined && held.expiresAt > at ? held : null
        }
      }
    } as unknown as Store
    const keys = new IdempotencyKeys({ store, clock: ticking, ttlSeconds: 60 })
    await adjustQuantity(store, 7n, adjust(1), ACTOR, ticking, { keys, key: 'k', owner: 'key_a' })
    time.now = NOW + 60_000 - 1
    const retry = await adjustQuantity(store, 7n, adjust(1), ACTOR, ticking, { keys, key: 'k', owner: 'key_a' })
    assert.equal(retry.replayed, false, 'the key had expired: the write applies anew')
    assert.equal(applied, 2)
  })

  test('when a keyed write fails, then the key is free again in this process', async () => {
    const { store } = recordingStore()
    const keys = new IdempotencyKeys({ store, clock, ttlSeconds: 3600 })
    const failing = { ...store, stock: { ...store.stock, adjustQuantity: async () => { throw new Error('disk full') } } } as unknown as Store
    await assert.rejects(adjustQuantity(failing, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' }), /disk full/)
    assert.equal((await adjustQuantity(store, 7n, adjust(2), ACTOR, clock, { keys, key: 'k1', owner: 'key_a' })).replayed, false)
  })

  test('when the fingerprint is taken, then revisions in any order and repeated count as one condition, and every part counts', async () => {
    const seen: string[] = []
    const capture = { stock: { setQuantity: async (change: StockChange) => { seen.push(change.idempotency?.fingerprint ?? ''); return { status: 'not_found' } } } } as unknown as Store
    const keys = new IdempotencyKeys({ store: capture, clock, ttlSeconds: 60 })
    // not_found records nothing, so the key stays free for the next one.
    for (const expectedRevisions of [[3n, 12n], [12n, 3n, 3n], [3n], null]) {
      await assert.rejects(updateQuantity(capture, 7n, { ...set(1), expectedRevisions }, ACTOR, clock, { keys, key: 'k', owner: 'key_a' }), /No inventory entry/)
    }
    assert.equal(seen[0], seen[1])
    assert.equal(new Set(seen).size, 3)
  })

  test('when expired records are purged, then batches are deleted until one comes back short', async () => {
    const asked: Array<[Date, number]> = []
    const answers = [500, 500, 120]
    const store = { idempotency: { purgeIdempotencyRecords: async (before: Date, limit: number) => { asked.push([before, limit]); return answers.shift() ?? 0 } } } as unknown as Store
    assert.equal(await purgeExpiredKeys(store, clock), 1120)
    assert.deepEqual(asked.map(([before, limit]) => [before.getTime(), limit]), [[NOW, 500], [NOW, 500], [NOW, 500]])
  })
})
