/**
 * The PostgreSQL store's group commit of single-row stock writes (src/store/postgres/group-commit.ts): concurrent
 * writes share transactions (and feed positions), each answered with its own outcome; a failing write fails alone; a
 * key twice in one transaction applies once; the feed keeps each pet's order; a transaction's locks never deadlock
 * with a batch of changes. Two stores on one schema stand for two instances.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import pg from 'pg'
import { importData } from '../../src/domain/import.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import type { FeedChange } from '../../src/store/stock/types.js'
import { lockWaiters, POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { waitFor } from '../helpers/wait.js'
import { stockAdjustment, stockChange } from './helpers.js'

/** Two migrated stores (two pools: two instances) on one fresh schema, with pets 1..pets at quantity 0. */
async function twoInstances (t: TestContext, pets: number): Promise<{ schema: string, a: PostgresStore, b: PostgresStore }> {
  const schema = await tempSchema(t)
  const [a, b] = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema })) as [PostgresStore, PostgresStore]
  t.after(() => Promise.all([a.close(), b.close()]))
  await a.schema.migrate()
  const ids = Array.from({ length: pets }, (_, i) => BigInt(i + 1))
  await importData(a, { pets: ids.map((id) => ({ id, name: `p${id}`, status: 'available' as const, quantity: 0 })), orders: [] })
  return { schema, a, b }
}

/** Every stock change of the feed after the import. */
async function changesAfterImport (store: PostgresStore): Promise<FeedChange[]> {
  const feed = await store.stock.listChanges(null, 10_000)
  return feed.filter((change) => change.reason !== 'import')
}

if (await requirePostgres('PostgreSQL group commit tests')) {
  describe('PostgresStore group commit of stock writes', () => {
    test('when two instances write concurrently, then writes share transactions and feed positions, and each is answered with its own entry', async (t) => {
      const { a, b } = await twoInstances(t, 20)
      const writes = Array.from({ length: 120 }, (_, i) => ({ store: i % 2 === 0 ? a : b, petId: BigInt((i % 20) + 1), quantity: 1000 + i }))
      const results = await Promise.all(writes.map((w) => w.store.stock.setQuantity(stockChange(w.petId, w.quantity, { note: `write ${w.quantity}` }))))
      results.forEach((result, i) => {
        const write = writes[i]!
        assert.equal(result.status, 'updated')
        if (result.status !== 'updated') return
        assert.equal(result.entry.petId, write.petId)
        assert.equal(result.entry.quantity, write.quantity)
      })
      const feed = await changesAfterImport(a)
      assert.equal(feed.length, writes.length)
      // Each ledger row is the write that was answered with its revision: the note names the quantity it wrote.
      for (const change of feed) assert.equal(change.note, `write ${change.quantity}`)
      const positions = new Set(feed.map((change) => change.position.order))
      assert.ok(positions.size < writes.length / 4, `${writes.length} writes took ${positions.size} feed positions: they were not batched`)
      const stats = [a.stock.groupCommit, b.stock.groupCommit]
      assert.ok(stats.every((s) => s.batches > 0 && s.batchedWrites > s.batches), JSON.stringify(stats))
      // The answers' revisions per pet are 2..7 (the import made 1), each once.
      for (let pet = 1n; pet <= 20n; pet++) {
        const revisions = results.flatMap((r, i) => (r.status === 'updated' && writes[i]!.petId === pet ? [r.entry.revision] : [])).sort((x, y) => Number(x - y))
        assert.deepEqual(revisions, [2n, 3n, 4n, 5n, 6n, 7n])
      }
    })

    test('when each pet is written many times from two instances, then the feed gives each pet\'s changes in the order of their revisions', async (t) => {
      const { a, b } = await twoInstances(t, 3)
      const writes = Array.from({ length: 90 }, (_, i) => ({ store: i % 2 === 0 ? a : b, petId: BigInt((i % 3) + 1), delta: i + 1 }))
      const results = await Promise.all(writes.map((w) => w.store.stock.adjustQuantity(stockAdjustment(w.petId, w.delta))))
      const revisionOf = new Map<string, bigint>()
      results.forEach((result, i) => {
        assert.equal(result.status, 'updated')
        if (result.status === 'updated') revisionOf.set(`${writes[i]!.petId}:${result.entry.quantity}`, result.entry.revision)
      })
      const feed = await changesAfterImport(b)
      for (const pet of [1n, 2n, 3n]) {
        const mine = feed.filter((change) => change.petId === pet)
        assert.equal(mine.length, 30)
        // In feed order: each change starts from the quantity the one before it left, and the revisions answered rise by one.
        mine.forEach((change, i) => { assert.equal(change.previousQuantity, i === 0 ? 0 : mine[i - 1]!.quantity) })
        const revisions = mine.map((change) => revisionOf.get(`${pet}:${change.quantity}`))
        assert.deepEqual(revisions, mine.map((_, i) => BigInt(i + 2)))
      }
      assert.equal(feed.length, 90)
    })

    test('when one write of a batch fails, then it fails alone and the others of the batch apply', async (t) => {
      const { a } = await twoInstances(t, 5)
      const quantities = [11, 12, -5, 14, 15]
      const settled = await Promise.allSettled(quantities.map((q, i) => a.stock.setQuantity(stockChange(BigInt(i + 1), q))))
      assert.equal(settled[2]?.status, 'rejected')
      settled.forEach((outcome, i) => {
        if (i === 2) return
        assert.equal(outcome.status, 'fulfilled')
        if (outcome.status === 'fulfilled') assert.deepEqual(outcome.value.status === 'updated' && [outcome.value.entry.petId, outcome.value.entry.quantity], [BigInt(i + 1), quantities[i]])
      })
      assert.deepEqual((await a.stock.listInventory()).map((item) => item.quantity), [11, 12, 0, 14, 15])
      assert.deepEqual((await changesAfterImport(a)).map((change) => change.petId).sort(), [1n, 2n, 4n, 5n])
      assert.equal(a.stock.groupCommit.retriedAlone, 1)
    })

    test('when the same idempotency key comes twice in one batch, then it applies once and the second answers recorded', async (t) => {
      const { a } = await twoInstances(t, 3)
      const claim = { scope: 'key_a', key: 'k-1', fingerprint: 'fp', expiresAt: new Date(Date.now() + 60_000) }
      const results = await Promise.all([
        a.stock.setQuantity(stockChange(1n, 7, { idempotency: claim, at: new Date() })),
        a.stock.setQuantity(stockChange(2n, 8)),
        a.stock.setQuantity(stockChange(1n, 9, { idempotency: claim, at: new Date() })),
        a.stock.adjustQuantity(stockAdjustment(3n, 4))
      ])
      assert.deepEqual(results.map((r) => r.status), ['updated', 'updated', 'recorded', 'updated'])
      assert.deepEqual(a.stock.groupCommit, { batches: 1, batchedWrites: 4, retriedAlone: 0 }, 'the four writes were one transaction')
      assert.equal((await a.stock.getStockEntry(1n))?.quantity, 7)
      assert.deepEqual((await changesAfterImport(a)).map((change) => [change.petId, change.quantity]), [[1n, 7], [2n, 8], [3n, 4]])
      const record = await a.idempotency.findIdempotencyRecord('key_a', 'k-1', new Date())
      assert.deepEqual(record?.entries.map((entry) => [entry.petId, entry.quantity]), [[1n, 7]])
    })

    test('when texts with quotes, backslashes and any characters are written in one batch, then the ledger reads them back as written', async (t) => {
      const { a } = await twoInstances(t, 4)
      const notes = ["it's", 'back\\slash \\\' end', '$1 $$ ; COMMIT; --', 'ünï 🐈 \u0001']
      const results = await Promise.all(notes.map((note, i) => a.stock.setQuantity(stockChange(BigInt(i + 1), i + 1, { note, reference: note, requestId: note }))))
      assert.deepEqual(results.map((r) => r.status), ['updated', 'updated', 'updated', 'updated'])
      assert.deepEqual(a.stock.groupCommit.batchedWrites, 4)
      const feed = await changesAfterImport(a)
      assert.deepEqual(feed.map((change) => [change.note, change.reference, change.requestId]), notes.map((note) => [note, note, note]))
    })

    test('when a batch of changes holds a pet a group commit also writes, then both apply: the group commit locks its rows first, in pet order', async (t) => {
      const { schema, a, b } = await twoInstances(t, 2)
      const locker = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await locker.connect()
      t.after(() => locker.end())
      let batch, writes
      try {
        await locker.query('BEGIN')
        await locker.query('SELECT 1 FROM inventory WHERE pet_id = 1 FOR UPDATE')
        const set = (petId: bigint, quantity: number) => ({ petId, quantity, expectedRevisions: null, reason: 'adjustment' as const, note: null })
        // The batch of changes waits for pet 1, then will want pet 2.
        batch = b.stock.applyBatch({ changes: [set(1n, 21), set(2n, 22)], allowed: { min: 0, max: 1_000_000_000 }, batchId: 'b', keyId: null, requestId: null, at: new Date() })
        await waitFor('the batch waiting for pet 1', async () => await lockWaiters(schema) === 1, { intervalMs: 20 })
        // One group commit writing pet 2 first, then pet 1: written in that order, it would hold pet 2 while waiting for pet 1.
        writes = Promise.all([a.stock.setQuantity(stockChange(2n, 32)), a.stock.setQuantity(stockChange(1n, 31))])
        await waitFor('the group commit waiting too', async () => await lockWaiters(schema) === 2, { intervalMs: 20 })
        await locker.query('COMMIT')
      } finally {
        await locker.query('ROLLBACK').catch(() => {})
      }
      assert.equal((await batch).status, 'updated')
      assert.deepEqual((await writes).map((r) => r.status), ['updated', 'updated'])
      assert.deepEqual(a.stock.groupCommit, { batches: 1, batchedWrites: 2, retriedAlone: 0 }, 'no deadlock, no retry')
      assert.deepEqual((await a.stock.listInventory()).map((item) => item.quantity), [31, 32])
    })
  })
}
