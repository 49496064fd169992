/**
 * The stock contract (src/store/stock/types.ts): entries, their writes, the ledger and the change feed, the same on
 * every store. Each runner calls stockContract() with a function that opens a fresh, migrated, empty store for one test
 * (and registers its cleanup on that test's context). Every test makes its own data; nothing is shared.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { MAX_QUANTITY } from '../../src/model.js'
import type { BatchChange, FeedChange, FeedPosition, StockBatch } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'
import { importData } from '../../src/domain/import.js'
import { ABOVE_2_53, CHANGED_AT, INT64_MAX, INT64_MIN, newKey, order, pet, setStock, snapshot, stockAdjustment, stockChange } from './helpers.js'

export function stockContract (name: string, open: (t: TestContext) => Promise<Store>): void {
  describe(`${name}: stock`, () => {
    describe('inventory', () => {
      test('inventoryVersion changes with every stock write and pet status change, and only then', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 1 }), pet(2n, { quantity: 2 })], orders: [] })
        const seen = [await store.stock.inventoryVersion()]
        const changed = async (what: string): Promise<void> => {
          const version = await store.stock.inventoryVersion()
          assert.ok(!seen.includes(version), `${what} must change the version`)
          seen.push(version)
        }
        const unchanged = async (what: string): Promise<void> => {
          assert.equal(await store.stock.inventoryVersion(), seen.at(-1), `${what} must not change the version`)
        }
        await setStock(store, 1n, 5)
        await changed('setQuantity')
        await importData(store, { pets: [pet(1n, { status: 'sold', quantity: undefined })], orders: [] })
        await changed('a pet status change')
        await importData(store, { pets: [pet(3n, { quantity: 3 })], orders: [] })
        await changed('a new stock entry')
        await importData(store, { pets: [pet(3n, { quantity: 4 })], orders: [] })
        await changed('a re-import changing a stock entry')
        await store.stock.listInventory()
        await store.catalog.getPet(1n)
        await store.catalog.listOrders({ afterId: null, limit: 10, status: null })
        await unchanged('reads')
        await importData(store, { pets: [], orders: [order(1n)] })
        await unchanged('an orders-only import')
        await store.keys.createApiKey(newKey('key_v'))
        await unchanged('a new API key')
      })

      test('listInventory is empty on a new store', async (t) => {
        const store = await open(t)
        assert.deepEqual(await store.stock.listInventory(), [])
      })

      test('listInventory lists only pets with a quantity, by numeric petId ascending, with the pet status and exact bigint ids', async (t) => {
        const store = await open(t)
        await importData(store, {
          pets: [
            pet(9223372036854775807n, { quantity: 7, status: 'sold' }),
            pet(10n, { quantity: 3, status: 'pending' }),
            pet(-5n, { quantity: 0 }),
            pet(3n, { quantity: undefined }),
            pet(9007199254740993n, { quantity: 1_000_000_000 }),
            pet(2n, { quantity: 2, status: 'sold' }),
            pet(-9223372036854775808n, { quantity: 5, status: 'pending' }),
            pet(9007199254740992n, { quantity: undefined })
          ],
          orders: []
        })
        const items = await store.stock.listInventory()
        assert.deepEqual(items, [
          { petId: -9223372036854775808n, quantity: 5, status: 'pending' },
          { petId: -5n, quantity: 0, status: 'available' },
          { petId: 2n, quantity: 2, status: 'sold' },
          { petId: 10n, quantity: 3, status: 'pending' },
          { petId: 9007199254740993n, quantity: 1_000_000_000, status: 'available' },
          { petId: 9223372036854775807n, quantity: 7, status: 'sold' }
        ])
        for (const item of items) {
          assert.equal(typeof item.petId, 'bigint')
          assert.equal(typeof item.quantity, 'number')
        }
      })

      /** Every page of one listing, with the versions they carried. */
      async function allPages (store: Store, size: number) {
        const pages = []
        for await (const page of store.stock.inventoryPages(size)) pages.push(page)
        return pages
      }

      test('inventoryPages lists what listInventory lists, size entries a page, each page with the version of exactly these entries', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [5n, -3n, 9007199254740993n, 2n, 8n].map((id) => pet(id, { quantity: Number(id % 100n) + 100 })), orders: [] })
        const pages = await allPages(store, 2)
        assert.deepEqual(pages.map((page) => page.items.length), [2, 2, 1])
        assert.deepEqual(pages.flatMap((page) => page.items), await store.stock.listInventory())
        const version = await store.stock.inventoryVersion()
        assert.deepEqual(pages.map((page) => page.version), [version, version, version])
      })

      test('inventoryPages of an empty store is one empty page with the store version', async (t) => {
        const store = await open(t)
        assert.deepEqual(await allPages(store, 10), [{ version: await store.stock.inventoryVersion(), feed: null, items: [] }])
      })

      test('inventoryPages carries the feed position of its snapshot: the last change in it, on every page', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 1 }), pet(2n, { quantity: 2 }), pet(3n, { quantity: 3 })], orders: [] })
        await store.stock.setQuantity(stockChange(2n, 20))
        const changes = await store.stock.listChanges(null, 100)
        const pages = await allPages(store, 2)
        assert.equal(pages.length, 2)
        const last = changes.at(-1)
        for (const page of pages) assert.deepEqual(page.feed, last === undefined ? null : { ...last.position, epoch: last.epoch })
        // Nothing after that position: following the feed from it yields exactly the changes made since.
        assert.deepEqual(await store.stock.listChanges(pages[0]?.feed ?? null, 100), [])
        await store.stock.setQuantity(stockChange(3n, 30))
        assert.deepEqual((await store.stock.listChanges(pages[0]?.feed ?? null, 100)).map((c) => [c.petId, c.quantity]), [[3n, 30]])
      })

      test('a change committed while inventoryPages is between pages shows neither in its entries nor in its version', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n), pet(2n), pet(3n)], orders: [] })
        const before = await store.stock.inventoryVersion()
        const pages = []
        for await (const page of store.stock.inventoryPages(1)) {
          pages.push(page)
          if (pages.length === 1) assert.notEqual(await setStock(store, 3n, 99), null)
        }
        assert.deepEqual(pages.map((page) => page.items[0]?.quantity), [1, 1, 1])
        assert.deepEqual(pages.map((page) => page.version), [before, before, before])
        assert.ok(await store.stock.inventoryVersion() > before)
        assert.equal((await allPages(store, 10))[0]?.items[2]?.quantity, 99)
      })

      test('an inventoryPages iteration stopped early leaves the store usable for writes and listings', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n), pet(2n)], orders: [] })
        for (let i = 0; i < 3; i++) {
          for await (const page of store.stock.inventoryPages(1)) {
            assert.equal(page.items.length, 1)
            break
          }
        }
        assert.notEqual(await setStock(store, 2n, 7), null)
        assert.deepEqual((await allPages(store, 5))[0]?.items.map((item) => item.quantity), [1, 7])
      })

      test('a change that reports the inventory version reports the version the store holds right after it', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n)], orders: [] })
        const result = await store.stock.setQuantity(stockChange(1n, 5))
        assert.equal(result.status, 'updated')
        if (result.status === 'updated' && result.version !== undefined) assert.equal(result.version, await store.stock.inventoryVersion())
      })

      test('setQuantity updates the entry and returns the updated item', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 }), pet(2n, { quantity: 9 })], orders: [] })
        assert.deepEqual(await setStock(store, 1n, 12), { petId: 1n, quantity: 12, status: 'available' })
        assert.deepEqual(await store.stock.listInventory(), [
          { petId: 1n, quantity: 12, status: 'available' },
          { petId: 2n, quantity: 9, status: 'available' }
        ])
      })

      test('setQuantity accepts 0 and 1000000000', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 })], orders: [] })
        assert.deepEqual(await setStock(store, 1n, 0), { petId: 1n, quantity: 0, status: 'available' })
        assert.deepEqual(await store.stock.listInventory(), [{ petId: 1n, quantity: 0, status: 'available' }])
        assert.deepEqual(await setStock(store, 1n, 1_000_000_000), { petId: 1n, quantity: 1_000_000_000, status: 'available' })
        assert.deepEqual(await store.stock.listInventory(), [{ petId: 1n, quantity: 1_000_000_000, status: 'available' }])
      })

      test('setQuantity works on int64 extreme and above-2^53 pet ids', async (t) => {
        const store = await open(t)
        const ids = [INT64_MIN, ABOVE_2_53, INT64_MAX]
        await importData(store, { pets: ids.map((id) => pet(id, { quantity: 1 })), orders: [] })
        for (const [i, id] of ids.entries()) {
          assert.deepEqual(await setStock(store, id, 100 + i), { petId: id, quantity: 100 + i, status: 'available' })
        }
        // 2^53 + 1 must not be confused with its double neighbour 2^53.
        assert.equal(await setStock(store, ABOVE_2_53 - 1n, 5), null)
        assert.deepEqual((await store.stock.listInventory()).map((i) => [i.petId, i.quantity]), [
          [INT64_MIN, 100], [ABOVE_2_53, 101], [INT64_MAX, 102]
        ])
      })

      test('setQuantity does not change the pet status', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { status: 'sold', quantity: 0 }), pet(2n, { status: 'pending', quantity: 1 })], orders: [] })
        assert.deepEqual(await setStock(store, 1n, 5), { petId: 1n, quantity: 5, status: 'sold' })
        assert.deepEqual(await setStock(store, 2n, 0), { petId: 2n, quantity: 0, status: 'pending' })
        assert.equal((await store.catalog.getPet(1n))?.status, 'sold')
        assert.equal((await store.catalog.getPet(2n))?.status, 'pending')
      })

      test('setQuantity answers not_found and changes nothing for a pet without a stock entry', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 }), pet(2n, { quantity: undefined })], orders: [] })
        const before = await snapshot(store, [1n, 2n])
        assert.equal(await setStock(store, 2n, 7), null)
        assert.deepEqual(await snapshot(store, [1n, 2n]), before)
        assert.deepEqual(await store.stock.listInventory(), [{ petId: 1n, quantity: 4, status: 'available' }])
      })

      test('setQuantity answers not_found and changes nothing for an unknown pet', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 })], orders: [] })
        const before = await snapshot(store, [1n, 99n])
        assert.equal(await setStock(store, 99n, 7), null)
        assert.equal(await setStock(store, INT64_MAX, 7), null)
        assert.deepEqual(await snapshot(store, [1n, 99n]), before)
        assert.equal(await store.catalog.getPet(99n), null)
      })

      test('concurrent setQuantity calls on one pet all land and the final value is one of them', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(7n, { quantity: 0, status: 'pending' })], orders: [] })
        const written = Array.from({ length: 50 }, (_, i) => i + 1)
        const results = await Promise.all(written.map((q) => setStock(store, 7n, q)))
        // Every call found the entry and reports its own write.
        results.forEach((item, i) => assert.deepEqual(item, { petId: 7n, quantity: written[i], status: 'pending' }))
        const inventory = await store.stock.listInventory()
        assert.equal(inventory.length, 1)
        const final = inventory[0]
        assert.ok(final !== undefined)
        assert.ok(written.includes(final.quantity), `final quantity ${final.quantity} was never written`)
        assert.equal(final.petId, 7n)
        assert.equal(final.status, 'pending')
        // A later read agrees with the first one.
        assert.deepEqual(await store.stock.listInventory(), inventory)
      })

      test('concurrent setQuantity calls on different pets all land', async (t) => {
        const store = await open(t)
        const ids = Array.from({ length: 40 }, (_, i) => BigInt(i + 1))
        await importData(store, { pets: ids.map((id) => pet(id, { quantity: 0 })), orders: [] })
        const results = await Promise.all(ids.map((id) => setStock(store, id, Number(id) * 10)))
        assert.deepEqual(results, ids.map((id) => ({ petId: id, quantity: Number(id) * 10, status: 'available' })))
        assert.deepEqual(await store.stock.listInventory(), results)
      })
    })

    describe('relative stock changes (adjustQuantity)', () => {
      test('an adjustment adds its delta to the quantity, grows the revision and records previous and new quantity in the ledger', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(ABOVE_2_53, { quantity: 4, status: 'pending' })], orders: [] })
        const before = await store.stock.getStockEntry(ABOVE_2_53)
        assert.ok(before !== null)
        const added = await store.stock.adjustQuantity(stockAdjustment(ABOVE_2_53, 3, { reason: 'arrival', note: 'Three more', keyId: 'key_a', requestId: 'req-1' }))
        assert.deepEqual(added.status === 'updated' && added.entry, { petId: ABOVE_2_53, quantity: 7, status: 'pending', revision: before.revision + 1n })
        const taken = await store.stock.adjustQuantity(stockAdjustment(ABOVE_2_53, -7))
        assert.equal(taken.status === 'updated' && taken.entry.quantity, 0)
        const history = await store.stock.stockHistory(ABOVE_2_53, 10)
        assert.deepEqual(history.slice(1).map((e) => [e.previousQuantity, e.quantity, e.reason, e.note, e.keyId, e.requestId]),
          [[4, 7, 'arrival', 'Three more', 'key_a', 'req-1'], [7, 0, 'adjustment', null, 'key_test', 'req-test']])
        assert.equal((await store.stock.listInventory())[0]?.quantity, 0)
      })

      test('an adjustment whose result leaves the allowed quantities changes nothing and returns the current entry', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 2 }), pet(2n, { quantity: MAX_QUANTITY - 1 })], orders: [] })
        const before = await snapshot(store, [1n, 2n])
        const below = await store.stock.adjustQuantity(stockAdjustment(1n, -3))
        assert.equal(below.status, 'out_of_range')
        assert.equal(below.status === 'out_of_range' && below.current.quantity, 2)
        const above = await store.stock.adjustQuantity(stockAdjustment(2n, 2))
        assert.equal(above.status, 'out_of_range')
        assert.equal(above.status === 'out_of_range' && above.current.quantity, MAX_QUANTITY - 1)
        assert.deepEqual(await snapshot(store, [1n, 2n]), before)
        const edge = await store.stock.adjustQuantity(stockAdjustment(2n, 1))
        assert.equal(edge.status === 'updated' && edge.entry.quantity, MAX_QUANTITY, 'the bound itself is allowed')
      })

      test('an adjustment with a stale expected revision changes nothing; an unknown pet is not_found', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const current = await store.stock.getStockEntry(1n)
        assert.ok(current !== null)
        const before = await snapshot(store, [1n])
        const stale = await store.stock.adjustQuantity(stockAdjustment(1n, 1, { expectedRevisions: [current.revision + 5n] }))
        assert.deepEqual(stale, { status: 'stale', current })
        // Stale wins over out of range: the client learns to read the entry again first.
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, -10, { expectedRevisions: [current.revision + 5n] }))).status, 'stale')
        assert.deepEqual(await snapshot(store, [1n]), before)
        const fresh = await store.stock.adjustQuantity(stockAdjustment(1n, 1, { expectedRevisions: [current.revision] }))
        assert.equal(fresh.status === 'updated' && fresh.entry.quantity, 4)
        assert.deepEqual(await store.stock.adjustQuantity(stockAdjustment(INT64_MAX, 1)), { status: 'not_found' })
      })

      test('a refused change (stale, out of range, unknown pet) and a re-import of the same catalogue leave the inventory version as it is', async (t) => {
        const store = await open(t)
        const catalogue = { pets: [pet(1n, { quantity: 3, status: 'pending' }), pet(2n, { quantity: 4 })], orders: [] }
        await importData(store, catalogue)
        const version = await store.stock.inventoryVersion()
        assert.equal((await store.stock.setQuantity(stockChange(1n, 9, { expectedRevisions: [12345n] }))).status, 'stale')
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, 9, { expectedRevisions: [12345n] }))).status, 'stale')
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, -4))).status, 'out_of_range')
        assert.equal((await store.stock.setQuantity(stockChange(INT64_MAX, 1))).status, 'not_found')
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(INT64_MAX, 1))).status, 'not_found')
        await importData(store, catalogue)
        assert.equal(await store.stock.inventoryVersion(), version)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'sold' })], orders: [] })
        assert.ok(await store.stock.inventoryVersion() > version, 'a status that changes moves it')
      })

      test('concurrent adjustments and absolute changes of one entry never lose one another', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 100 })], orders: [] })
        const results = await Promise.all(Array.from({ length: 60 }, (_, i) =>
          i % 20 === 19 ? store.stock.setQuantity(stockChange(1n, 100)) : store.stock.adjustQuantity(stockAdjustment(1n, i % 2 === 0 ? 2 : -1))))
        assert.ok(results.every((r) => r.status === 'updated'))
        // Every ledger row starts from the quantity the previous row left: each change saw the one before it.
        const history = (await store.stock.stockHistory(1n, 100)).slice(1)
        assert.equal(history.length, 60)
        for (let i = 1; i < history.length; i++) assert.equal(history[i]?.previousQuantity, history[i - 1]?.quantity)
        assert.equal((await store.stock.getStockEntry(1n))?.quantity, history.at(-1)?.quantity)
      })
    })

    describe('batches of changes (applyBatch)', () => {
      const batchOf = (changes: StockBatch['changes'], overrides: Partial<StockBatch> = {}): StockBatch => ({
        changes, allowed: { min: 0, max: MAX_QUANTITY }, batchId: 'batch-1', keyId: 'key_a', requestId: 'req-b', at: CHANGED_AT, ...overrides
      })
      const set = (petId: bigint, quantity: number, more: Partial<BatchChange> = {}): BatchChange =>
        ({ petId, quantity, expectedRevisions: null, reason: 'arrival', note: null, ...more }) as BatchChange
      const add = (petId: bigint, delta: number, more: Partial<BatchChange> = {}): BatchChange =>
        ({ petId, delta, expectedRevisions: null, reason: 'adjustment', note: null, ...more }) as BatchChange

      test('a batch applies every change, answers the entries in its order, and its ledger rows share the batch id', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 5 }), pet(ABOVE_2_53, { quantity: 2, status: 'sold' }), pet(3n, { quantity: 9 })], orders: [] })
        const before = await store.stock.getStockEntry(3n)
        assert.ok(before !== null)
        const version = await store.stock.inventoryVersion()
        const result = await store.stock.applyBatch(batchOf([add(ABOVE_2_53, 3), set(1n, 0, { note: 'sold out' }), add(3n, -4, { expectedRevisions: [before.revision] })]))
        assert.equal(result.status, 'updated')
        const entries = result.status === 'updated' ? result.entries : []
        assert.deepEqual(entries.map((e) => [e.petId, e.quantity, e.status]), [[ABOVE_2_53, 5, 'sold'], [1n, 0, 'available'], [3n, 5, 'available']])
        assert.deepEqual(await Promise.all(entries.map((e) => store.stock.getStockEntry(e.petId))), entries)
        assert.ok(await store.stock.inventoryVersion() > version)
        const rows = (await Promise.all([ABOVE_2_53, 1n, 3n].map((id) => store.stock.stockHistory(id, 10)))).map((h) => h.at(-1))
        assert.deepEqual(rows.map((r) => [r?.previousQuantity, r?.quantity, r?.reason, r?.note, r?.keyId, r?.requestId, r?.batchId]), [
          [2, 5, 'adjustment', null, 'key_a', 'req-b', 'batch-1'],
          [5, 0, 'arrival', 'sold out', 'key_a', 'req-b', 'batch-1'],
          [9, 5, 'adjustment', null, 'key_a', 'req-b', 'batch-1']
        ])
        assert.equal((await store.stock.stockHistory(1n, 10))[0]?.batchId, null, 'a change made alone has no batch')
      })

      test('when any change cannot apply, then nothing changes and every failing change is listed with why', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 5 }), pet(2n, { quantity: 1 }), pet(3n, { quantity: 9 })], orders: [] })
        const current2 = await store.stock.getStockEntry(2n)
        const current3 = await store.stock.getStockEntry(3n)
        const before = await snapshot(store, [1n, 2n, 3n])
        const result = await store.stock.applyBatch(batchOf([add(1n, 1), add(2n, -2), set(INT64_MAX, 1), add(3n, 1, { expectedRevisions: [999n] }), set(1n + 10n, 1)]))
        assert.deepEqual(result, {
          status: 'refused',
          failures: [
            { index: 1, petId: 2n, reason: 'out_of_range', current: current2 },
            { index: 2, petId: INT64_MAX, reason: 'not_found' },
            { index: 3, petId: 3n, reason: 'stale', current: current3 },
            { index: 4, petId: 11n, reason: 'not_found' }
          ]
        })
        assert.deepEqual(await snapshot(store, [1n, 2n, 3n]), before)
      })

      test('a batch with an idempotency key records all its entries, and the same key again changes nothing', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 5 }), pet(2n, { quantity: 1 })], orders: [] })
        const idempotency = { scope: 'key_a', key: 'b1', fingerprint: 'fp', expiresAt: new Date(CHANGED_AT.getTime() + 60_000) }
        const first = await store.stock.applyBatch(batchOf([add(1n, 1), add(2n, 1)], { idempotency }))
        assert.equal(first.status, 'updated')
        assert.deepEqual((await store.idempotency.findIdempotencyRecord('key_a', 'b1', CHANGED_AT))?.entries, first.status === 'updated' ? first.entries : null)
        const before = await snapshot(store, [1n, 2n])
        assert.deepEqual(await store.stock.applyBatch(batchOf([add(1n, 1), add(2n, 1)], { idempotency })), { status: 'recorded' })
        assert.deepEqual(await store.stock.adjustQuantity(stockAdjustment(1n, 1, { idempotency })), { status: 'recorded' }, 'one key, whatever the write')
        assert.deepEqual(await snapshot(store, [1n, 2n]), before)
        const refused = await store.stock.applyBatch(batchOf([add(1n, -100)], { idempotency: { ...idempotency, key: 'b2' } }))
        assert.equal(refused.status, 'refused')
        assert.equal(await store.idempotency.findIdempotencyRecord('key_a', 'b2', CHANGED_AT), null, 'a refused batch records nothing')
      })

      test('concurrent batches over the same pets in different orders all apply, none lost, without deadlock', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 }), pet(2n, { quantity: 0 }), pet(3n, { quantity: 0 })], orders: [] })
        const orders = [[1n, 2n, 3n], [3n, 2n, 1n], [2n, 3n, 1n]]
        const results = await Promise.all(Array.from({ length: 24 }, (_, i) =>
          store.stock.applyBatch(batchOf((orders[i % 3] as bigint[]).map((id) => add(id, 1)), { batchId: `b${i}` }))))
        assert.ok(results.every((r) => r.status === 'updated'))
        for (const id of [1n, 2n, 3n]) {
          assert.equal((await store.stock.getStockEntry(id))?.quantity, 24)
          const history = (await store.stock.stockHistory(id, 100)).slice(1)
          for (let i = 1; i < history.length; i++) assert.equal(history[i]?.previousQuantity, history[i - 1]?.quantity)
        }
      })
    })

    describe('the change feed (listChanges)', () => {
      /** Every change, page after page of `size`, following each page's last position. */
      async function readFeed (store: Store, size: number, after: FeedPosition | null = null): Promise<FeedChange[]> {
        const all: FeedChange[] = []
        for (;;) {
          const page = await store.stock.listChanges(after, size)
          all.push(...page)
          if (page.length < size) return all
          after = (page.at(-1) as FeedChange).position
        }
      }

      /**
       * Waits until the feed serves `count` changes: on a server shared with other tests, their open transactions hold
       * the feed back for a moment (it serves only what can no longer be overtaken).
       */
      async function settled (store: Store, count: number): Promise<void> {
        for (let tries = 0; tries < 400 && (await store.stock.listChanges(null, count)).length < count; tries++) {
          await new Promise((resolve) => setTimeout(resolve, 25))
        }
      }

      test('paging the feed serves every ledger entry once, imports included, each with its place', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 5 }), pet(ABOVE_2_53, { quantity: 2 })], orders: [] })
        await store.stock.setQuantity(stockChange(1n, 7, { note: 'recount' }))
        await store.stock.adjustQuantity(stockAdjustment(ABOVE_2_53, 3))
        await store.stock.applyBatch({
          changes: [{ petId: 1n, delta: -1, expectedRevisions: null, reason: 'adjustment', note: null }, { petId: ABOVE_2_53, quantity: 0, expectedRevisions: null, reason: 'return', note: null }],
          allowed: { min: 0, max: MAX_QUANTITY }, batchId: 'b-feed', keyId: 'key_a', requestId: 'req-b', at: CHANGED_AT
        })
        const ledger = [...await store.stock.stockHistory(1n, 100), ...await store.stock.stockHistory(ABOVE_2_53, 100)]
        await settled(store, ledger.length)
        for (const size of [1, 2, 3, 100]) {
          const feed = await readFeed(store, size)
          assert.deepEqual(feed.map((c) => c.id).sort(), ledger.map((e) => e.id).sort(), `page size ${size}`)
          const byId = new Map(ledger.map((entry) => [entry.id, entry]))
          assert.deepEqual(feed.map(({ position: _position, epoch: _epoch, ...entry }) => entry), feed.map((c) => byId.get(c.id)), 'each as the ledger has it')
        }
        const feed = await readFeed(store, 100)
        assert.deepEqual(feed.slice(0, 2).map((c) => c.reason), ['import', 'import'])
        assert.deepEqual(feed.slice(-2).map((c) => [c.batchId, c.quantity]), [['b-feed', 6], ['b-feed', 0]], 'a batch in its order')
        assert.deepEqual(await store.stock.listChanges(feed.at(-1)?.position ?? null, 10), [], 'nothing after the last')
        assert.deepEqual((await store.stock.listChanges(feed[2]?.position ?? null, 2)).map((c) => c.id), feed.slice(3, 5).map((c) => c.id))
      })

      test('concurrent writers and a reader paging all the while: the reader sees every change exactly once', async (t) => {
        const store = await open(t)
        await importData(store, { pets: Array.from({ length: 5 }, (_, i) => pet(BigInt(i + 1), { quantity: 1000 })), orders: [] })
        let writing = true
        const writers = Array.from({ length: 4 }, async (_, w) => {
          for (let i = 0; i < 25; i++) await store.stock.adjustQuantity(stockAdjustment(BigInt((w + i) % 5 + 1), i % 2 === 0 ? 1 : -1, { requestId: `w${w}-${i}` }))
        })
        const seen: FeedChange[] = []
        const reader = (async () => {
          let after: FeedPosition | null = null
          // Until every change was seen, or well after the writers stopped (a transaction elsewhere may hold the
          // feed back for a moment: it serves only what can no longer be overtaken).
          let deadline = Number.POSITIVE_INFINITY
          while (seen.length < 105 && Date.now() < deadline) {
            const page = await store.stock.listChanges(after, 3)
            seen.push(...page)
            if (page.length > 0) after = (page.at(-1) as FeedChange).position
            if (!writing && deadline === Number.POSITIVE_INFINITY) deadline = Date.now() + 10_000
            await new Promise((resolve) => setTimeout(resolve, page.length > 0 ? 0 : 5))
          }
        })()
        await Promise.all(writers)
        writing = false
        await reader
        const ids = seen.map((c) => c.id)
        assert.equal(new Set(ids).size, ids.length, 'no change twice')
        assert.equal(ids.length, 105, 'five imports and 100 adjustments, none missed')
        // Each pet's changes in the order they were made: every one starts where the one before it left the pet.
        const last = new Map<bigint, number>()
        for (const change of seen) {
          if (last.has(change.petId)) assert.equal(change.previousQuantity, last.get(change.petId), `change ${change.id} of pet ${change.petId}`)
          last.set(change.petId, change.quantity)
        }
        for (const [petId, quantity] of last) assert.equal((await store.stock.getStockEntry(petId))?.quantity, quantity, 'a copy that applies the feed ends where the store is')
      })
    })

    describe('stock ledger and revisions', () => {
      test('setQuantity records the change in the ledger with previous and new quantity, reason, note, key, request and time', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(ABOVE_2_53, { quantity: 4, status: 'pending' })], orders: [] }, { at: new Date('2026-11-22T11:00:00Z') })
        const before = await store.stock.getStockEntry(ABOVE_2_53)
        assert.ok(before !== null)
        const result = await store.stock.setQuantity(stockChange(ABOVE_2_53, 15, { reason: 'arrival', note: 'Truck 42 — 11 puppies', keyId: 'key_a', requestId: 'req-1' }))
        assert.equal(result.status, 'updated')
        assert.deepEqual(result.status === 'updated' && result.entry, { petId: ABOVE_2_53, quantity: 15, status: 'pending', revision: before.revision + 1n })
        const history = await store.stock.stockHistory(ABOVE_2_53, 10)
        assert.equal(history.length, 2)
        const [imported, arrival] = history
        assert.deepEqual({ ...imported, id: 0n }, {
          id: 0n, petId: ABOVE_2_53, event: null, previousQuantity: null, quantity: 4, reason: 'import', note: null, reference: null, keyId: null, requestId: null, batchId: null,
          status: 'pending', previousStatus: null, holdId: null, held: null, reorderPoint: null, at: new Date('2026-11-22T11:00:00Z')
        })
        assert.deepEqual({ ...arrival, id: 0n }, {
          id: 0n, petId: ABOVE_2_53, event: null, previousQuantity: 4, quantity: 15, reason: 'arrival', note: 'Truck 42 — 11 puppies', reference: null, keyId: 'key_a', requestId: 'req-1', batchId: null,
          status: null, previousStatus: null, holdId: null, held: null, reorderPoint: null, at: CHANGED_AT
        })
        assert.ok((arrival?.id ?? 0n) > (imported?.id ?? 0n))
        assert.equal(typeof arrival?.petId, 'bigint')
      })

      test('every write records a shop\'s reason (sale, loss, recount) and its reference; the history and the feed read both back as written', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 10 }), pet(ABOVE_2_53, { quantity: 5 })], orders: [] })
        const reference = 'invoice 2026/11-7 — “Züchter” ✓'
        assert.equal((await store.stock.setQuantity(stockChange(1n, 8, { reason: 'sale', reference: 'order-10482' }))).status, 'updated')
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(ABOVE_2_53, -2, { reason: 'loss', note: 'escaped' }))).status, 'updated')
        assert.equal((await store.stock.adjustQuantity(stockAdjustment(1n, 1, { reason: 'sale', reference: 'x'.repeat(128) }))).status, 'updated')
        const batch: StockBatch = {
          changes: [
            { petId: 1n, quantity: 7, expectedRevisions: null, reason: 'recount', note: null, reference },
            { petId: ABOVE_2_53, delta: 1, expectedRevisions: null, reason: 'recount', note: null }
          ],
          allowed: { min: 0, max: MAX_QUANTITY },
          batchId: 'batch-reasons',
          keyId: 'key_test',
          requestId: 'req-test',
          at: CHANGED_AT
        }
        assert.equal((await store.stock.applyBatch(batch)).status, 'updated')
        assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((e) => [e.reason, e.reference, e.quantity]), [
          ['import', null, 10], ['sale', 'order-10482', 8], ['sale', 'x'.repeat(128), 9], ['recount', reference, 7]
        ])
        assert.deepEqual((await store.stock.listChanges(null, 100)).map((c) => [c.petId, c.reason, c.reference, c.note]), [
          [1n, 'import', null, null], [ABOVE_2_53, 'import', null, null], [1n, 'sale', 'order-10482', null], [ABOVE_2_53, 'loss', null, 'escaped'],
          [1n, 'sale', 'x'.repeat(128), null], [1n, 'recount', reference, null], [ABOVE_2_53, 'recount', null, null]
        ])
      })

      test('getStockEntry returns the entry with its revision, and null for a pet without stock or an unknown pet', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'sold' }), pet(2n, { quantity: undefined })], orders: [] })
        const entry = await store.stock.getStockEntry(1n)
        assert.deepEqual({ ...entry, revision: 0n }, { petId: 1n, quantity: 3, status: 'sold', revision: 0n })
        assert.equal(typeof entry?.revision, 'bigint')
        assert.equal(await store.stock.getStockEntry(2n), null)
        assert.equal(await store.stock.getStockEntry(INT64_MAX), null)
      })

      test('every change grows the revision, and setting the same quantity again is still a recorded change', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const revisions = [(await store.stock.getStockEntry(1n))?.revision]
        for (const quantity of [5, 5, 0]) {
          await store.stock.setQuantity(stockChange(1n, quantity))
          revisions.push((await store.stock.getStockEntry(1n))?.revision)
        }
        assert.equal(new Set(revisions).size, 4)
        assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((e) => [e.previousQuantity, e.quantity]), [[null, 3], [3, 5], [5, 5], [5, 0]])
      })

      test('with expectedRevisions holding the current revision, the change applies', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const current = await store.stock.getStockEntry(1n)
        assert.ok(current !== null)
        const result = await store.stock.setQuantity(stockChange(1n, 8, { expectedRevisions: [current.revision - 1n, current.revision] }))
        assert.equal(result.status, 'updated')
        assert.equal((await store.stock.getStockEntry(1n))?.quantity, 8)
      })

      test('with a stale expected revision, nothing changes (stock, revision, ledger) and the current entry is returned', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'pending' })], orders: [] })
        const seen = await store.stock.getStockEntry(1n)
        assert.ok(seen !== null)
        await store.stock.setQuantity(stockChange(1n, 4))
        const before = await snapshot(store, [1n])
        const result = await store.stock.setQuantity(stockChange(1n, 9, { expectedRevisions: [seen.revision] }))
        assert.deepEqual(result, { status: 'stale', current: { petId: 1n, quantity: 4, status: 'pending', revision: seen.revision + 1n } })
        assert.deepEqual(await snapshot(store, [1n]), before)
        assert.equal((await store.stock.setQuantity(stockChange(1n, 9, { expectedRevisions: [] }))).status, 'stale')
      })

      test('without a stock entry the answer is not_found, whatever the expected revisions', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(2n, { quantity: undefined })], orders: [] })
        assert.deepEqual(await store.stock.setQuantity(stockChange(2n, 1, { expectedRevisions: [1n] })), { status: 'not_found' })
        assert.deepEqual(await store.stock.setQuantity(stockChange(99n, 1, { expectedRevisions: [] })), { status: 'not_found' })
        assert.deepEqual(await store.stock.stockHistory(2n, 10), [])
      })

      test('a change the database refuses writes no ledger row', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const before = await snapshot(store, [1n])
        await assert.rejects(store.stock.setQuantity(stockChange(1n, -5)))
        assert.deepEqual(await snapshot(store, [1n]), before)
      })

      test('concurrent changes of one pet form an unbroken chain in the ledger', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(7n, { quantity: 0 })], orders: [] })
        const start = await store.stock.getStockEntry(7n)
        const written = Array.from({ length: 30 }, (_, i) => i + 1)
        await Promise.all(written.map((q) => store.stock.setQuantity(stockChange(7n, q, { note: `write ${q}` }))))
        const history = (await store.stock.stockHistory(7n, 1000)).slice(1)
        assert.equal(history.length, written.length)
        // Each change replaced exactly the quantity the previous one left: no change was lost or reordered.
        history.forEach((entry, i) => assert.equal(entry.previousQuantity, i === 0 ? 0 : history[i - 1]?.quantity))
        assert.deepEqual(history.map((e) => e.quantity).sort((a, b) => a - b), written)
        const final = await store.stock.getStockEntry(7n)
        assert.equal(final?.quantity, history.at(-1)?.quantity)
        assert.equal(final?.revision, (start?.revision ?? 0n) + BigInt(written.length))
      })

      test('concurrent compare-and-set changes from one revision: exactly one applies', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(7n, { quantity: 0 })], orders: [] })
        const seen = await store.stock.getStockEntry(7n)
        assert.ok(seen !== null)
        const results = await Promise.all([1, 2, 3, 4, 5, 6].map((q) => store.stock.setQuantity(stockChange(7n, q, { expectedRevisions: [seen.revision] }))))
        assert.equal(results.filter((r) => r.status === 'updated').length, 1)
        assert.equal(results.filter((r) => r.status === 'stale').length, 5)
        assert.equal((await store.stock.stockHistory(7n, 100)).length, 2)
      })

      test('an import records new and changed quantities, and leaves unchanged ones alone (revision and ledger)', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 }), pet(2n, { quantity: 5 })], orders: [] })
        const [one, two] = [await store.stock.getStockEntry(1n), await store.stock.getStockEntry(2n)]
        await importData(store, { pets: [pet(1n, { quantity: 3 }), pet(2n, { quantity: 6 }), pet(3n, { quantity: 0 })], orders: [] })
        assert.equal((await store.stock.getStockEntry(1n))?.revision, one?.revision, 'an unchanged quantity keeps its revision')
        assert.equal((await store.stock.getStockEntry(2n))?.revision, (two?.revision ?? 0n) + 1n)
        assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((e) => [e.reason, e.previousQuantity, e.quantity]), [['import', null, 3]])
        assert.deepEqual((await store.stock.stockHistory(2n, 10)).map((e) => [e.reason, e.previousQuantity, e.quantity]), [['import', null, 5], ['import', 5, 6]])
        assert.deepEqual((await store.stock.stockHistory(3n, 10)).map((e) => [e.reason, e.previousQuantity, e.quantity]), [['import', null, 0]])
      })

      test('an import that changes a listed pet\'s status grows the entry revision once and records the change with both statuses', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const before = await store.stock.getStockEntry(1n)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'available' })], orders: [] })
        assert.equal((await store.stock.getStockEntry(1n))?.revision, before?.revision, 'the same status is no change')
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        assert.deepEqual(await store.stock.getStockEntry(1n), { petId: 1n, quantity: 3, status: 'sold', revision: (before?.revision ?? 0n) + 1n })
        const history = await store.stock.stockHistory(1n, 10)
        assert.deepEqual(history.map((e) => [e.reason, e.previousQuantity, e.quantity, e.previousStatus, e.status]),
          [['import', null, 3, null, 'available'], ['import', 3, 3, 'available', 'sold']])
        // With the same quantity and status again: nothing.
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'sold' })], orders: [] })
        assert.equal((await store.stock.stockHistory(1n, 10)).length, 2)
      })

      test('an import that changes a status and a quantity at once records one change with both, and grows the revision once', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'available' })], orders: [] })
        const before = await store.stock.getStockEntry(1n)
        await importData(store, { pets: [pet(1n, { quantity: 0, status: 'sold' })], orders: [] })
        assert.deepEqual((await store.stock.stockHistory(1n, 10)).slice(1).map((e) => [e.previousQuantity, e.quantity, e.previousStatus, e.status]),
          [[3, 0, 'available', 'sold']])
        assert.equal((await store.stock.getStockEntry(1n))?.revision, (before?.revision ?? 0n) + 1n)
        // A quantity alone: once too.
        await importData(store, { pets: [pet(1n, { quantity: 4, status: 'sold' })], orders: [] })
        assert.equal((await store.stock.getStockEntry(1n))?.revision, (before?.revision ?? 0n) + 2n)
      })

      test('an import that changes the status of a pet without stock records nothing: the listing does not show it', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'available' })], orders: [] })
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        assert.deepEqual(await store.stock.listChanges(null, 10), [])
        // Its first stock creates the entry with the status it has.
        await importData(store, { pets: [pet(1n, { quantity: 2, status: 'sold' })], orders: [] })
        assert.deepEqual((await store.stock.listChanges(null, 10)).map((e) => [e.previousQuantity, e.quantity, e.previousStatus, e.status]), [[null, 2, null, 'sold']])
      })

      test('stockHistory returns the newest entries of that pet only, oldest first', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 }), pet(2n, { quantity: 0 })], orders: [] })
        for (const quantity of [1, 2, 3, 4]) {
          await store.stock.setQuantity(stockChange(1n, quantity))
          await store.stock.setQuantity(stockChange(2n, quantity * 10))
        }
        assert.deepEqual((await store.stock.stockHistory(1n, 3)).map((e) => e.quantity), [2, 3, 4])
        assert.deepEqual((await store.stock.stockHistory(2n, 100)).map((e) => e.quantity), [0, 10, 20, 30, 40])
        assert.deepEqual(await store.stock.stockHistory(99n, 10), [])
      })
    })

    describe('feedHead', () => {
      test('when the feed is empty, then the head is null; when changes were made, then it is the place of the last change listChanges returns', async (t) => {
        const store = await open(t)
        assert.equal(await store.stock.feedHead(), null)
        await importData(store, { pets: [pet(1n, { quantity: 10 }), pet(2n, { quantity: 10 })], orders: [] })
        await setStock(store, 1n, 5)
        await store.stock.applyBatch({
          changes: [{ petId: 1n, quantity: 6, expectedRevisions: null, reason: 'arrival', note: null }, { petId: 2n, delta: 1, expectedRevisions: null, reason: 'arrival', note: null }],
          allowed: { min: 0, max: MAX_QUANTITY }, batchId: 'b-head', keyId: null, requestId: null, at: CHANGED_AT
        })
        const feed = await store.stock.listChanges(null, 100_000)
        assert.equal(feed.length, 5)
        const last = feed.at(-1)
        assert.deepEqual(await store.stock.feedHead(), last === undefined ? undefined : { ...last.position, epoch: last.epoch })
      })
    })
  })
}
