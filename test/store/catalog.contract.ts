/**
 * The catalogue contract (src/store/catalog/types.ts): pets, orders and imports, the same on every store. Each runner
 * calls catalogContract() with a function that opens a fresh, migrated, empty store for one test. Every test makes its
 * own data; nothing is shared.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { OrderStatus } from '../../src/model.js'
import type { Store } from '../../src/store/store.js'
import { importData } from '../../src/domain/import.js'
import { ABOVE_2_53, allPages, asPet, INT64_MAX, INT64_MIN, order, pet, setStock, snapshot } from './helpers.js'

export function catalogContract (name: string, open: (t: TestContext) => Promise<Store>): void {
  describe(`${name}: catalog`, () => {
    describe('pets', () => {
      test('getPet returns every field exactly, including int64 category and tag ids', async (t) => {
        const store = await open(t)
        const full = pet(ABOVE_2_53, {
          name: 'Rex "the king" — ümlaut 🐕',
          status: 'pending',
          quantity: 3,
          category: { id: INT64_MAX, name: 'Dogs' },
          tags: [
            { id: INT64_MAX, name: 'max' },
            { id: INT64_MIN, name: 'min' },
            { id: ABOVE_2_53, name: 'above 2^53' },
            { id: 0n, name: 'zero' }
          ],
          photoUrls: ['https://example.com/b.jpg', 'https://example.com/a.jpg?x=1&y="2"']
        })
        await importData(store, { pets: [full], orders: [] })
        const got = await store.catalog.getPet(ABOVE_2_53)
        assert.deepEqual(got, asPet(full))
        assert.equal(typeof got?.category?.id, 'bigint')
        for (const tag of got?.tags ?? []) assert.equal(typeof tag.id, 'bigint')
      })

      test('getPet omits absent optional fields instead of returning undefined-valued keys', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        const got = await store.catalog.getPet(1n)
        assert.deepEqual(got, { id: 1n, name: 'pet 1', status: 'sold' })
        assert.deepEqual(Object.keys(got ?? {}).sort(), ['id', 'name', 'status'])
      })

      test('getPet keeps empty tags and photoUrls arrays as empty arrays', async (t) => {
        const store = await open(t)
        const bare = pet(1n, { tags: [], photoUrls: [] })
        await importData(store, { pets: [bare], orders: [] })
        assert.deepEqual(await store.catalog.getPet(1n), asPet(bare))
      })

      test('getPet returns pets at both int64 extremes', async (t) => {
        const store = await open(t)
        const low = pet(INT64_MIN, { category: { id: INT64_MIN, name: 'low' } })
        const high = pet(INT64_MAX, { tags: [{ id: INT64_MAX, name: 'high' }] })
        await importData(store, { pets: [low, high], orders: [] })
        assert.deepEqual(await store.catalog.getPet(INT64_MIN), asPet(low))
        assert.deepEqual(await store.catalog.getPet(INT64_MAX), asPet(high))
      })

      test('getPet returns null for an unknown id', async (t) => {
        const store = await open(t)
        assert.equal(await store.catalog.getPet(1n), null)
        await importData(store, { pets: [pet(ABOVE_2_53)], orders: [] })
        assert.equal(await store.catalog.getPet(1n), null)
        assert.equal(await store.catalog.getPet(ABOVE_2_53 - 1n), null)
        assert.equal(await store.catalog.getPet(INT64_MAX), null)
        assert.equal(await store.catalog.getPet(INT64_MIN), null)
      })

      test('countPets counts every pet, with or without a stock entry', async (t) => {
        const store = await open(t)
        assert.equal(await store.catalog.countPets(), 0)
        await importData(store, {
          pets: [pet(1n), pet(2n, { quantity: undefined }), pet(INT64_MAX), pet(INT64_MIN, { quantity: undefined })],
          orders: [order(1n)]
        })
        assert.equal(await store.catalog.countPets(), 4)
      })
    })

    describe('importData', () => {
      test('importData reports how many pets and orders it wrote', async (t) => {
        const store = await open(t)
        assert.deepEqual(await importData(store, { pets: [], orders: [] }), { pets: 0, orders: 0 })
        assert.deepEqual(await importData(store, { pets: [pet(1n), pet(2n)], orders: [order(1n), order(2n), order(3n)] }), { pets: 2, orders: 3 })
      })

      test('a second import with the same ids replaces pets, stock and orders without duplicating them', async (t) => {
        const store = await open(t)
        await importData(store, {
          pets: [
            pet(1n, { name: 'old', status: 'available', quantity: 1, category: { id: 1n, name: 'Cats' }, tags: [{ id: 1n, name: 'a' }, { id: 2n, name: 'b' }], photoUrls: ['https://x/1'] }),
            pet(INT64_MAX, { name: 'big', quantity: 2 })
          ],
          orders: [
            order(1n, { petId: 1n, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false }),
            order(ABOVE_2_53, { petId: INT64_MAX })
          ]
        })
        const renamed = pet(1n, {
          name: 'new', status: 'sold', quantity: 9, category: { id: INT64_MAX, name: 'Dogs' }, tags: [{ id: INT64_MIN, name: 'c' }], photoUrls: ['https://x/2', 'https://x/3']
        })
        const replacedOrder = order(1n, { petId: INT64_MAX, quantity: 2_147_483_647, shipDate: '2027-01-02T03:04:05.678+01:00', status: 'delivered', complete: true })
        assert.deepEqual(await importData(store, { pets: [renamed], orders: [replacedOrder] }), { pets: 1, orders: 1 })

        assert.equal(await store.catalog.countPets(), 2)
        assert.deepEqual(await store.catalog.getPet(1n), asPet(renamed))
        assert.deepEqual(await store.catalog.getPet(INT64_MAX), asPet(pet(INT64_MAX, { name: 'big', quantity: 2 })))
        assert.deepEqual(await store.stock.listInventory(), [
          { petId: 1n, quantity: 9, status: 'sold' },
          { petId: INT64_MAX, quantity: 2, status: 'available' }
        ])
        assert.deepEqual(await store.catalog.listOrders({ afterId: null, limit: 10, status: null }), {
          orders: [replacedOrder, order(ABOVE_2_53, { petId: INT64_MAX })],
          hasMore: false
        })
      })

      test('a re-import without optional pet fields removes the old category, tags and photoUrls', async (t) => {
        const store = await open(t)
        await importData(store, {
          pets: [pet(1n, { category: { id: 1n, name: 'Cats' }, tags: [{ id: 1n, name: 'a' }], photoUrls: ['https://x/1'] })],
          orders: []
        })
        await importData(store, { pets: [pet(1n, { name: 'plain' })], orders: [] })
        assert.deepEqual(await store.catalog.getPet(1n), { id: 1n, name: 'plain', status: 'available' })
      })

      test('a re-import of a pet without a quantity keeps its stock entry as it is', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 })], orders: [] })
        await setStock(store, 1n, 9)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        assert.deepEqual(await store.stock.listInventory(), [{ petId: 1n, quantity: 9, status: 'sold' }])
      })

      test('importing the same data twice leaves the same state', async (t) => {
        const store = await open(t)
        const data = {
          pets: [pet(-5n, { quantity: 3 }), pet(2n, { quantity: undefined, tags: [{ id: 1n, name: 't' }] }), pet(INT64_MAX, { quantity: 1 })],
          orders: [order(1n), order(ABOVE_2_53, { status: 'approved' })]
        }
        await importData(store, data)
        const once = await snapshot(store, [-5n, 2n, INT64_MAX])
        await importData(store, data)
        assert.deepEqual(await snapshot(store, [-5n, 2n, INT64_MAX]), once)
      })

      test('an import that fails on a later pet rejects and leaves nothing of itself behind', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { name: 'kept', quantity: 4 })], orders: [order(1n)] })
        const ids = [1n, 2n, 3n, INT64_MAX]
        const before = await snapshot(store, ids)
        await assert.rejects(importData(store, {
          pets: [
            pet(1n, { name: 'changed', status: 'sold', quantity: 99 }),
            pet(2n, { quantity: 5 }),
            pet(INT64_MAX, { quantity: undefined }),
            pet(3n, { status: 'lost' as any }) // eslint-disable-line @typescript-eslint/no-explicit-any
          ],
          orders: [order(1n, { status: 'delivered' }), order(2n)]
        }))
        assert.deepEqual(await snapshot(store, ids), before)
        // The store still works after the failed import.
        assert.deepEqual(await importData(store, { pets: [pet(2n)], orders: [] }), { pets: 1, orders: 0 })
        assert.equal(await store.catalog.countPets(), 2)
      })

      test('an import that fails on a later order rejects and leaves nothing of itself behind', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 })], orders: [order(1n)] })
        const ids = [1n, 2n]
        const before = await snapshot(store, ids)
        await assert.rejects(importData(store, {
          pets: [pet(1n, { name: 'changed', quantity: 0 }), pet(2n)],
          orders: [order(1n, { complete: true }), order(5n), order(6n, { status: 'lost' as any })] // eslint-disable-line @typescript-eslint/no-explicit-any
        }))
        assert.deepEqual(await snapshot(store, ids), before)
      })
    })

    describe('orders', () => {
      const ids = [INT64_MIN, -3n, 1n, 2n, 10n, ABOVE_2_53, INT64_MAX]

      test('listOrders is empty on a new store', async (t) => {
        const store = await open(t)
        assert.deepEqual(await store.catalog.listOrders({ afterId: null, limit: 10, status: null }), { orders: [], hasMore: false })
      })

      test('listOrders returns orders by numeric id ascending with every field exact', async (t) => {
        const store = await open(t)
        const orders = [
          order(10n, { petId: -1n, quantity: 2_147_483_647, shipDate: '2026-01-01T00:00:00.123456+05:30', status: 'approved', complete: true }),
          order(INT64_MAX, { petId: INT64_MAX, complete: true }),
          order(-3n, { petId: INT64_MIN, shipDate: '2026-11-20T10:00:00.5Z', status: 'delivered' }),
          order(ABOVE_2_53, { petId: ABOVE_2_53, shipDate: '2026-11-20T23:59:59-08:00' }),
          order(1n),
          order(INT64_MIN, { complete: true }),
          order(2n, { complete: false })
        ]
        await importData(store, { pets: [], orders })
        const page = await store.catalog.listOrders({ afterId: null, limit: 100, status: null })
        const byId = [...orders].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
        assert.deepEqual(page, { orders: byId, hasMore: false })
        for (const o of page.orders) {
          assert.equal(typeof o.id, 'bigint')
          assert.equal(typeof o.petId, 'bigint')
          assert.equal(typeof o.complete, 'boolean')
          assert.equal(typeof o.shipDate, 'string')
        }
      })

      test('listOrders pages with limit and afterId; hasMore is true until the last page', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [], orders: ids.map((id) => order(id)) })
        assert.deepEqual(await allPages(store, 3), [
          { ids: [INT64_MIN, -3n, 1n], hasMore: true },
          { ids: [2n, 10n, ABOVE_2_53], hasMore: true },
          { ids: [INT64_MAX], hasMore: false }
        ])
        assert.deepEqual(await allPages(store, 1), ids.map((id, i) => ({ ids: [id], hasMore: i < ids.length - 1 })))
        assert.deepEqual(await allPages(store, 7), [{ ids, hasMore: false }])
        assert.deepEqual(await allPages(store, 100), [{ ids, hasMore: false }])
      })

      test('listOrders says hasMore false when the last page is exactly full', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [], orders: ids.slice(1).map((id) => order(id)) })
        assert.deepEqual(await allPages(store, 3), [
          { ids: [-3n, 1n, 2n], hasMore: true },
          { ids: [10n, ABOVE_2_53, INT64_MAX], hasMore: false }
        ])
      })

      test('listOrders afterId is exclusive and need not be an existing id', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [], orders: ids.map((id) => order(id)) })
        const after = async (afterId: bigint, limit = 10) =>
          (await store.catalog.listOrders({ afterId, limit, status: null })).orders.map((o) => o.id)
        assert.deepEqual(await after(2n), [10n, ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(3n), [10n, ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(-4n), [-3n, 1n, 2n, 10n, ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(INT64_MIN), [-3n, 1n, 2n, 10n, ABOVE_2_53, INT64_MAX])
        // 2^53 + 1 and 2^53 are one double apart: comparisons must be exact.
        assert.deepEqual(await after(ABOVE_2_53 - 1n), [ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(ABOVE_2_53), [INT64_MAX])
        assert.deepEqual(await store.catalog.listOrders({ afterId: INT64_MAX, limit: 10, status: null }), { orders: [], hasMore: false })
        assert.deepEqual(await store.catalog.listOrders({ afterId: 10n, limit: 1, status: null }), { orders: [order(ABOVE_2_53)], hasMore: true })
      })

      test('listOrders filters by status, combined with paging', async (t) => {
        const store = await open(t)
        const statuses: OrderStatus[] = ['approved', 'placed', 'approved', 'delivered', 'approved', 'approved', 'placed']
        await importData(store, { pets: [], orders: ids.map((id, i) => order(id, { status: statuses[i] })) })
        assert.deepEqual(await allPages(store, 2, 'approved'), [
          { ids: [INT64_MIN, 1n], hasMore: true },
          { ids: [10n, ABOVE_2_53], hasMore: false }
        ])
        assert.deepEqual(await allPages(store, 1, 'placed'), [
          { ids: [-3n], hasMore: true },
          { ids: [INT64_MAX], hasMore: false }
        ])
        assert.deepEqual(await allPages(store, 5, 'delivered'), [{ ids: [2n], hasMore: false }])
        const approved = await store.catalog.listOrders({ afterId: 1n, limit: 10, status: 'approved' })
        assert.deepEqual(approved, { orders: [order(10n, { status: 'approved' }), order(ABOVE_2_53, { status: 'approved' })], hasMore: false })
        // hasMore counts only orders of the status: the placed order after the last approved one does not count.
        assert.equal((await store.catalog.listOrders({ afterId: 10n, limit: 1, status: 'approved' })).hasMore, false)
      })

      test('listOrders status filter with no match returns an empty page', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [], orders: [order(1n), order(2n)] })
        assert.deepEqual(await store.catalog.listOrders({ afterId: null, limit: 10, status: 'delivered' }), { orders: [], hasMore: false })
      })
    })
  })
}
