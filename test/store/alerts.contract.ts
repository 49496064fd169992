/**
 * The low-stock contract (src/store/alerts/types.ts): reorder points, and ONE inventory.low_stock ledger row per
 * crossing, written by every stock write in its own transaction, the same on every store. Each runner calls
 * alertsContract() with a function that opens a fresh, migrated, empty store for one test and reads its ledger by SQL.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { importData } from '../../src/domain/import.js'
import type { StockBatch } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'
import { CHANGED_AT, pet, stockAdjustment, stockChange } from './helpers.js'
import { newHold } from './selling.contract.js'

/** A ledger row as the tests read it by SQL. */
export interface LedgerRow {
  id: bigint
  pet_id: bigint
  event: string | null
  quantity: number
  previous_quantity: number | null
  reason: string | null
  reorder_point: number | null
  key_id: string | null
  request_id: string | null
}

export interface AlertsHarness {
  store: Store
  /** Every ledger row, by id. */
  ledger: () => Promise<LedgerRow[]>
  /** How many event rows take part in a pet's chain of changes (SQLite's previous_id and ledger_head): must be none. */
  chained: () => Promise<number>
}

const LOW = 'inventory.low_stock'

/** Sets a point as the API does. */
async function point (store: Store, petId: bigint, reorderPoint: number): Promise<boolean> {
  const result = await store.alerts.setReorderPoint({ petId, reorderPoint, keyId: 'key_test', requestId: 'req-point', at: CHANGED_AT })
  assert.equal(result.status, 'set')
  return result.status === 'set' && result.point.low
}

async function set (store: Store, petId: bigint, quantity: number): Promise<void> {
  assert.equal((await store.stock.setQuantity(stockChange(petId, quantity))).status, 'updated')
}

/** The inventory.low_stock rows (a hold's rows are events of other types). */
async function events (h: AlertsHarness): Promise<LedgerRow[]> {
  return (await h.ledger()).filter((row) => row.event === LOW)
}

function batch (changes: StockBatch['changes']): StockBatch {
  return { changes, allowed: { min: 0, max: 1_000_000_000 }, batchId: 'batch-1', keyId: 'key_test', requestId: 'req-batch', at: CHANGED_AT }
}

export function alertsContract (name: string, open: (t: TestContext) => Promise<AlertsHarness>): void {
  describe(`${name}: low stock`, () => {
    test('a fall to or below the point writes one event row, and falling further writes none', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 10 })], orders: [] })
      assert.equal(await point(h.store, 1n, 5), false)
      await set(h.store, 1n, 6)
      assert.deepEqual(await events(h), [], 'above the point: no event')
      await set(h.store, 1n, 5)
      await set(h.store, 1n, 3)
      assert.equal((await h.store.stock.adjustQuantity(stockAdjustment(1n, -1))).status, 'updated')
      const rows = await events(h)
      assert.equal(rows.length, 1)
      assert.deepEqual({ ...rows[0], id: undefined }, {
        id: undefined, pet_id: 1n, event: LOW, quantity: 5, previous_quantity: null, reason: null, reorder_point: 5, key_id: 'key_test', request_id: 'req-test'
      })
      // The event follows the change that crossed, in the same transaction.
      const ledger = await h.ledger()
      const at = ledger.findIndex((row) => row.event === LOW)
      assert.deepEqual([ledger[at - 1]?.quantity, ledger[at - 1]?.event], [5, null])
      assert.equal((await h.store.alerts.getReorderPoint(1n))?.low, true)
      assert.equal(await h.chained(), 0)
    })

    test('the event moves no revision, no listing version and is not in the pet\'s history', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 10 })], orders: [] })
      await point(h.store, 1n, 5)
      await set(h.store, 1n, 4)
      const before = { entry: await h.store.stock.getStockEntry(1n), version: await h.store.stock.inventoryVersion() }
      // A point set above the quantity of a pet already low: nothing new; set below it: re-armed, nothing written.
      await point(h.store, 1n, 8)
      await point(h.store, 1n, 2)
      assert.deepEqual({ entry: await h.store.stock.getStockEntry(1n), version: await h.store.stock.inventoryVersion() }, before)
      const history = await h.store.stock.stockHistory(1n, 100)
      assert.deepEqual(history.map((entry) => entry.quantity), [10, 4])
      assert.equal((await events(h)).length, 1)
    })

    test('after rising above the point, the next fall is a crossing again', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 10 })], orders: [] })
      await point(h.store, 1n, 5)
      await set(h.store, 1n, 2)
      await set(h.store, 1n, 5)
      assert.equal((await h.store.alerts.getReorderPoint(1n))?.low, true, 'at the point is still low')
      await set(h.store, 1n, 6)
      assert.equal((await h.store.alerts.getReorderPoint(1n))?.low, false, 'above it: re-armed')
      assert.equal((await events(h)).length, 1, 're-arming writes nothing')
      assert.equal((await h.store.stock.adjustQuantity(stockAdjustment(1n, -6))).status, 'updated')
      const rows = await events(h)
      assert.deepEqual(rows.map((row) => [row.quantity, row.reorder_point]), [[2, 5], [0, 5]])
    })

    test('a point set at or above the quantity of a pet not low is a crossing; below it re-arms', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 4 }), pet(2n, { quantity: 4 })], orders: [] })
      assert.equal(await point(h.store, 1n, 4), true)
      assert.equal(await point(h.store, 2n, 3), false)
      assert.equal(await point(h.store, 1n, 6), true, 'still low: no second event')
      assert.deepEqual((await events(h)).map((row) => [row.pet_id, row.quantity, row.reorder_point, row.request_id]), [[1n, 4, 4, 'req-point']])
      assert.equal(await point(h.store, 1n, 3), false)
      assert.equal(await point(h.store, 1n, 4), true)
      assert.equal((await events(h)).length, 2)
    })

    test('a batch writes one event per pet that crosses, after its change; a refused batch writes none', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 10 }), pet(2n, { quantity: 10 }), pet(3n, { quantity: 10 }), pet(4n, { quantity: 10 })], orders: [] })
      for (const id of [1n, 2n, 3n]) await point(h.store, id, 5)
      const common = { expectedRevisions: null, reason: 'sale' as const, note: null }
      const refused = await h.store.stock.applyBatch(batch([{ petId: 1n, quantity: 1, ...common }, { petId: 9n, quantity: 1, ...common }]))
      assert.equal(refused.status, 'refused')
      assert.deepEqual(await events(h), [])
      const applied = await h.store.stock.applyBatch(batch([
        { petId: 3n, delta: -7, ...common }, { petId: 2n, quantity: 6, ...common }, { petId: 1n, quantity: 0, ...common }, { petId: 4n, quantity: 0, ...common }
      ]))
      assert.equal(applied.status, 'updated')
      const ledger = (await h.ledger()).slice(-6)
      assert.deepEqual(ledger.map((row) => [row.pet_id, row.event, row.quantity, row.reorder_point]), [
        [3n, null, 3, null], [3n, LOW, 3, 5], [2n, null, 6, null], [1n, null, 0, null], [1n, LOW, 0, 5], [4n, null, 0, null]
      ])
      assert.deepEqual((await events(h)).map((row) => [row.key_id, row.request_id]), [['key_test', 'req-batch'], ['key_test', 'req-batch']])
      assert.equal(await h.chained(), 0)
    })

    test('an import sets points, and its stock writes cross them once', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 3, reorderPoint: 5 }), pet(2n, { quantity: 9, reorderPoint: 5 }), pet(3n, { quantity: 1 })], orders: [] })
      assert.deepEqual(await h.store.alerts.getReorderPoint(1n), { petId: 1n, reorderPoint: 5, low: true })
      assert.deepEqual(await h.store.alerts.getReorderPoint(2n), { petId: 2n, reorderPoint: 5, low: false })
      assert.equal(await h.store.alerts.getReorderPoint(3n), null)
      // The same file again changes nothing; a lower quantity for pet 2 crosses; a file without points keeps them.
      await importData(h.store, { pets: [pet(1n, { quantity: 3, reorderPoint: 5 }), pet(2n, { quantity: 9, reorderPoint: 5 })], orders: [] })
      await importData(h.store, { pets: [pet(2n, { quantity: 2 }), pet(1n, { quantity: 1 })], orders: [] })
      assert.deepEqual((await events(h)).map((row) => [row.pet_id, row.quantity, row.reorder_point, row.key_id]), [[1n, 3, 5, null], [2n, 2, 5, null]])
      assert.equal((await h.store.alerts.getReorderPoint(2n))?.reorderPoint, 5)
      assert.equal(await h.chained(), 0)
    })

    test('a pet without a point costs no row; points of pets without an entry are refused', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 10 }), pet(2n, { quantity: undefined })], orders: [] })
      await set(h.store, 1n, 0)
      assert.deepEqual(await events(h), [])
      const missing = await h.store.alerts.setReorderPoint({ petId: 2n, reorderPoint: 1, keyId: null, requestId: null, at: CHANGED_AT })
      assert.deepEqual(missing, { status: 'not_found' })
      assert.deepEqual(await h.store.alerts.clearReorderPoint(2n), { status: 'not_found' })
      assert.deepEqual(await h.store.alerts.clearReorderPoint(1n), { status: 'cleared', had: false })
    })

    test('a cleared point writes nothing more; set again it starts not low', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 10 })], orders: [] })
      await point(h.store, 1n, 5)
      await set(h.store, 1n, 5)
      assert.deepEqual(await h.store.alerts.clearReorderPoint(1n), { status: 'cleared', had: true })
      assert.equal(await h.store.alerts.getReorderPoint(1n), null)
      await set(h.store, 1n, 10)
      await set(h.store, 1n, 1)
      assert.equal((await events(h)).length, 1)
      assert.equal(await point(h.store, 1n, 5), true)
      assert.equal((await events(h)).length, 2)
    })

    test('listLowStock answers the entries at or below their point, by petId, in pages', async (t) => {
      const h = await open(t)
      await importData(h.store, {
        pets: [pet(4n, { quantity: 5, reorderPoint: 5 }), pet(1n, { quantity: 0, reorderPoint: 0 }), pet(2n, { quantity: 6, reorderPoint: 5 }),
          pet(3n, { quantity: 1, status: 'sold', reorderPoint: 2 }), pet(5n, { quantity: 0 })],
        orders: []
      })
      assert.deepEqual(await h.store.alerts.listLowStock({ afterId: null, limit: 10 }), [
        { petId: 1n, quantity: 0, status: 'available' }, { petId: 3n, quantity: 1, status: 'sold' }, { petId: 4n, quantity: 5, status: 'available' }
      ])
      assert.deepEqual((await h.store.alerts.listLowStock({ afterId: 1n, limit: 1 })).map((item) => item.petId), [3n])
    })

    test('a sale through a hold\'s confirmation crosses the point like any stock write, once, after its rows', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 10 }), pet(2n, { quantity: 10 })], orders: [] })
      await point(h.store, 1n, 5)
      await point(h.store, 2n, 5)
      const placedHold = await h.store.selling.placeHold(newHold([{ petId: 1n, quantity: 6 }, { petId: 2n, quantity: 1 }]))
      assert.equal(placedHold.status, 'placed')
      if (placedHold.status !== 'placed') return
      assert.deepEqual(await events(h), [], 'a hold sells nothing: no crossing')
      const confirmed = await h.store.selling.endHold({ id: placedHold.hold.id, ending: 'confirmed', ofOrder: false, quotaId: 'quota_a', keyId: 'key_a',
        requestId: 'req-confirm', at: placedHold.hold.createdAt })
      assert.equal(confirmed.status, 'ended')
      const ledger = await h.ledger()
      assert.deepEqual(ledger.filter((row) => row.pet_id === 1n).slice(-3).map((row) => [row.event ?? row.reason, row.quantity]),
        [['sale', 4], ['hold.confirmed', 4], [LOW, 4]])
      assert.deepEqual((await events(h)).map((row) => [row.pet_id, row.request_id]), [[1n, 'req-confirm']])
    })

    test('concurrent writes of one pet record one crossing', async (t) => {
      const h = await open(t)
      await importData(h.store, { pets: [pet(1n, { quantity: 100 })], orders: [] })
      await point(h.store, 1n, 50)
      await Promise.all(Array.from({ length: 60 }, () => h.store.stock.adjustQuantity(stockAdjustment(1n, -1))))
      assert.equal((await h.store.stock.getStockEntry(1n))?.quantity, 40)
      assert.deepEqual((await events(h)).map((row) => row.quantity), [50])
    })
  })
}
