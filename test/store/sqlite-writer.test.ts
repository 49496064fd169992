/**
 * A serving SQLite store's writes on a thread of their own (src/store/sqlite/writer.ts): a write that waits, for a lock
 * or an fsync, waits on that thread while the event loop goes on; errors cross the thread as the classes the edge
 * knows; closing answers every write asked for. (The areas' contracts also run on such a store: *.contract.test.ts.)
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { Worker } from 'node:worker_threads'
import { AppError, StoreReadOnlyError, StoreUnavailableError } from '../../src/errors.js'
import { importData } from '../../src/domain/import.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { SqliteOptions } from '../../src/store/sqlite/database.js'
import { receivedError, sendError } from '../../src/store/sqlite/writer.js'
import { tempDir } from '../helpers/app.js'
import { setStock, stockAdjustment, stockChange } from './helpers.js'

async function storeWithPets (t: TestContext, options: SqliteOptions): Promise<{ store: SqliteStore, path: string }> {
  const path = join(tempDir(t), 'store.db')
  const store = new SqliteStore(path, options)
  t.after(() => store.close())
  await store.schema.migrate()
  await importData(store, { pets: [1, 2, 3].map((id) => ({ id: BigInt(id), name: `pet ${id}`, status: 'available' as const, quantity: 0 })), orders: [] })
  return { store, path }
}

/**
 * Another connection's transaction holding the write lock for `ms`, on a thread of its own (so that an event loop
 * blocked waiting for the lock does not keep it from letting go): resolves once it holds the lock, with when it let go.
 */
async function holdWriteLock (path: string, ms: number): Promise<{ released: Promise<void> }> {
  const holder = new Worker(`
    const Database = require('better-sqlite3')
    const { parentPort, workerData } = require('node:worker_threads')
    const db = new Database(workerData.path)
    db.exec('BEGIN IMMEDIATE')
    parentPort.postMessage('held')
    setTimeout(() => { db.exec('COMMIT'); db.close() }, workerData.ms)
  `, { eval: true, workerData: { path, ms } })
  const released = new Promise<void>((resolve, reject) => {
    holder.once('error', reject)
    holder.once('exit', () => { resolve() })
  })
  await new Promise<void>((resolve, reject) => {
    holder.once('message', () => { resolve() })
    holder.once('error', reject)
  })
  return { released }
}

/** The longest the event loop went without running a 5 ms timer while `work` ran. */
async function longestStall (work: () => Promise<unknown>): Promise<number> {
  let last = performance.now()
  let longest = 0
  const timer = setInterval(() => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
  }, 5)
  try {
    await work()
  } finally {
    clearInterval(timer)
  }
  return Math.max(longest, performance.now() - last)
}

describe('SQLite writes on a thread of their own', () => {
  test('when another process holds the write lock, then a write waits on the writer thread and the event loop keeps running', async (t) => {
    const HOLD_MS = 1000
    const threaded = await storeWithPets(t, { writerThread: true })
    // A write first, so that the thread is up and its statements prepared.
    await setStock(threaded.store, 1n, 1)
    const lock = await holdWriteLock(threaded.path, HOLD_MS)
    const stall = await longestStall(async () => {
      const written = await setStock(threaded.store, 1n, 2)
      assert.equal(written?.quantity, 2)
    })
    await lock.released
    assert.ok(stall < HOLD_MS / 2, `the event loop stood still for ${Math.round(stall)} ms`)
    assert.equal((await threaded.store.stock.getStockEntry(1n))?.quantity, 2, 'a read after the answer sees the write')

    // The control: the same write on the event loop waits there, and nothing else runs meanwhile.
    const inline = await storeWithPets(t, {})
    const held = await holdWriteLock(inline.path, HOLD_MS)
    const blocked = await longestStall(() => setStock(inline.store, 1n, 2))
    await held.released
    assert.ok(blocked > HOLD_MS * 0.8, `on the event loop, it stood still for ${Math.round(blocked)} ms`)
  })

  test('when the thread cannot get the lock in time, then the write fails as StoreUnavailableError on the event loop, and the next one succeeds', async (t) => {
    const { store, path } = await storeWithPets(t, { writerThread: true, busyTimeoutMs: 50 })
    await setStock(store, 1n, 1)
    const lock = await holdWriteLock(path, 400)
    await assert.rejects(setStock(store, 1n, 2), (error: unknown) => {
      assert.ok(error instanceof StoreUnavailableError, String(error))
      assert.match(error.message, /SQLITE_BUSY/)
      return true
    })
    await lock.released
    assert.equal((await setStock(store, 1n, 3))?.quantity, 3)
  })

  test('when writes of several areas are asked for together, then each gets its own answer, and a refusal fails only its own', async (t) => {
    const { store } = await storeWithPets(t, { writerThread: true })
    const [stock, missing, adjusted, reorder] = await Promise.all([
      setStock(store, 1n, 10),
      store.stock.setQuantity(stockChange(99n, 1)),
      store.stock.adjustQuantity(stockAdjustment(2n, 5)),
      store.alerts.setReorderPoint({ petId: 3n, reorderPoint: 2, keyId: null, requestId: 'r-4', at: new Date() })
    ])
    assert.equal(stock?.quantity, 10)
    assert.deepEqual(missing, { status: 'not_found' })
    assert.equal(adjusted.status === 'updated' ? adjusted.entry.quantity : adjusted.status, 5)
    assert.equal(reorder.status, 'set')
    assert.deepEqual((await store.stock.listInventory()).map((item) => item.quantity), [10, 5, 0])
  })

  test('when the store closes with writes asked for, then each is answered and durable, and a write after the close fails as unavailable', async (t) => {
    const path = join(tempDir(t), 'closing.db')
    const store = new SqliteStore(path, { writerThread: true })
    await store.schema.migrate()
    await importData(store, { pets: [{ id: 1n, name: 'pet 1', status: 'available', quantity: 0 }], orders: [] })
    const writes = Array.from({ length: 50 }, (_, i) => setStock(store, 1n, i + 1))
    const closed = store.close()
    assert.deepEqual((await Promise.all(writes)).map((entry) => entry?.quantity), Array.from({ length: 50 }, (_, i) => i + 1))
    await closed
    await assert.rejects(setStock(store, 1n, 99), StoreUnavailableError)
    const reopened = new SqliteStore(path)
    t.after(() => reopened.close())
    assert.equal((await reopened.stock.getStockEntry(1n))?.quantity, 50)
    assert.equal((await reopened.stock.stockHistory(1n, 100)).length, 51, 'the import and every write in the ledger')
  })

  test('when an error crosses the thread, then it is the class the edge answers by, with its code, message and headers', () => {
    const cross = (error: unknown): Error => receivedError(structuredClone(sendError(error)))
    const unavailable = cross(new StoreUnavailableError('SQLite is unavailable (SQLITE_FULL)'))
    assert.ok(unavailable instanceof StoreUnavailableError)
    assert.equal(unavailable.message, 'SQLite is unavailable (SQLITE_FULL)')
    assert.ok(cross(new StoreReadOnlyError('newer schema')) instanceof StoreReadOnlyError)
    const app = cross(new AppError('hold_limit_reached', 'The quota holds 5 holds.', { 'retry-after': '1' }))
    assert.ok(app instanceof AppError)
    assert.deepEqual([app.code, app.message, app.status, app.headers], ['hold_limit_reached', 'The quota holds 5 holds.', 409, { 'retry-after': '1' }])
    const constraint = cross(Object.assign(new Error('UNIQUE constraint failed: api_keys.key_hash'), { name: 'SqliteError', code: 'SQLITE_CONSTRAINT_UNIQUE' }))
    assert.deepEqual([constraint.name, constraint.message, (constraint as Error & { code?: string }).code],
      ['SqliteError', 'UNIQUE constraint failed: api_keys.key_hash', 'SQLITE_CONSTRAINT_UNIQUE'])
    assert.equal(cross('a string').message, 'a string')
  })
})
