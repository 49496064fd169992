/**
 * The Store contract: one suite of behaviours every Store implementation must show. Each implementation's test
 * file calls storeContract() with a function that opens a fresh, migrated, empty store for one test (and
 * registers its cleanup on that test's context). Every test makes its own data; nothing is shared.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { MAX_QUANTITY, type ApiKeyRecord, type Ban, type InventoryItem, type Order, type OrderStatus, type Pet, type PetImport } from '../../src/domain/model.js'
import type { BatchChange, FeedChange, FeedPosition, IdempotencyClaim, NewApiKey, StockAdjustment, StockBatch, StockChange, Store } from '../../src/store/types.js'
import { importData } from '../../src/domain/import.js'

const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)
/** The first integer a double cannot hold: 2^53 + 1. */
const ABOVE_2_53 = 2n ** 53n + 1n

function pet (id: bigint, overrides: Partial<PetImport> = {}): PetImport {
  return { id, name: `pet ${id}`, status: 'available', quantity: 1, ...overrides }
}

function order (id: bigint, overrides: Partial<Order> = {}): Order {
  return { id, petId: 1n, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false, ...overrides }
}

/** The pet as getPet returns it: the import without its stock quantity. */
function asPet (imported: PetImport): Pet {
  const result: PetImport = { ...imported }
  delete result.quantity
  return result
}

function newKey (id: string, overrides: Partial<NewApiKey> = {}): NewApiKey {
  return {
    id,
    keyHash: `hash-of-${id}`,
    name: `key ${id}`,
    plan: 'free',
    perMinute: null,
    perDay: null,
    createdAt: new Date('2026-11-22T12:00:00.123Z'),
    ...overrides
  }
}

/** The record findApiKeyByHash/listApiKeys return for a new key: no hash, not revoked. */
function asRecord (key: NewApiKey, revokedAt: Date | null = null, ban: Ban | null = null): ApiKeyRecord {
  return {
    id: key.id,
    name: key.name,
    plan: key.plan,
    perMinute: key.perMinute,
    perDay: key.perDay,
    createdAt: key.createdAt,
    revokedAt,
    ban,
    scope: key.scope ?? 'write',
    expiresAt: key.expiresAt ?? null,
    quotaId: key.quotaId ?? key.id,
    replacedBy: null,
    lastUsedAt: null,
    lastDeprecatedUseAt: null
  }
}

const CHANGED_AT = new Date('2026-11-22T12:00:00.250Z')

/** A stock change as a plain PATCH makes it (no If-Match, reason adjustment), with overrides. */
export function stockChange (petId: bigint, quantity: number, overrides: Partial<StockChange> = {}): StockChange {
  return { petId, quantity, expectedRevisions: null, reason: 'adjustment', note: null, keyId: 'key_test', requestId: 'req-test', at: CHANGED_AT, ...overrides }
}

/** A relative stock change as a plain adjustment makes it (no If-Match, reason adjustment, 0..MAX_QUANTITY), with overrides. */
export function stockAdjustment (petId: bigint, delta: number, overrides: Partial<StockAdjustment> = {}): StockAdjustment {
  return {
    petId, delta, expectedRevisions: null, reason: 'adjustment', note: null, keyId: 'key_test', requestId: 'req-test', at: CHANGED_AT,
    allowed: { min: 0, max: MAX_QUANTITY }, ...overrides
  }
}

/** An unconditional stock change: the updated item (without its revision), or null when the store answers not_found. */
export async function setStock (store: Store, petId: bigint, quantity: number): Promise<InventoryItem | null> {
  const result = await store.setQuantity(stockChange(petId, quantity))
  if (result.status === 'not_found') return null
  if (result.status !== 'updated') throw new Error(`an unconditional change without an idempotency key cannot be ${result.status}`)
  const { petId: id, quantity: stored, status } = result.entry
  return { petId: id, quantity: stored, status }
}

/** Everything observable in a store, for "nothing changed" checks. */
async function snapshot (store: Store, petIds: bigint[]): Promise<unknown> {
  return {
    inventory: await store.listInventory(),
    entries: await Promise.all(petIds.map((id) => store.getStockEntry(id))),
    history: await Promise.all(petIds.map((id) => store.stockHistory(id, 1000))),
    count: await store.countPets(),
    pets: await Promise.all(petIds.map((id) => store.getPet(id))),
    orders: await store.listOrders({ afterId: null, limit: 1000, status: null })
  }
}

/** Pages through all orders matching status with the given page size; returns the pages. */
async function allPages (store: Store, limit: number, status: OrderStatus | null = null): Promise<Array<{ ids: bigint[], hasMore: boolean }>> {
  const pages: Array<{ ids: bigint[], hasMore: boolean }> = []
  let afterId: bigint | null = null
  for (;;) {
    const page = await store.listOrders({ afterId, limit, status })
    pages.push({ ids: page.orders.map((o) => o.id), hasMore: page.hasMore })
    const last = page.orders.at(-1)
    if (!page.hasMore || last === undefined || pages.length > 100) return pages
    afterId = last.id
  }
}

export function storeContract (name: string, open: (t: TestContext) => Promise<Store>): void {
  describe(name, () => {
    describe('lifecycle', () => {
      test('migrate on a migrated store applies nothing and returns 0', async (t) => {
        const store = await open(t)
        assert.equal(await store.migrate(), 0)
        assert.equal(await store.migrate(), 0)
      })

      test('ping resolves', async (t) => {
        const store = await open(t)
        assert.equal(await store.ping(), undefined)
      })

      test('kind is a non-empty name', async (t) => {
        const store = await open(t)
        assert.equal(typeof store.kind, 'string')
        assert.ok(store.kind.length > 0)
      })
    })

    describe('inventory', () => {
      test('inventoryVersion changes with every stock write and pet status change, and only then', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 1 }), pet(2n, { quantity: 2 })], orders: [] })
        const seen = [await store.inventoryVersion()]
        const changed = async (what: string): Promise<void> => {
          const version = await store.inventoryVersion()
          assert.ok(!seen.includes(version), `${what} must change the version`)
          seen.push(version)
        }
        const unchanged = async (what: string): Promise<void> => {
          assert.equal(await store.inventoryVersion(), seen.at(-1), `${what} must not change the version`)
        }
        await setStock(store, 1n, 5)
        await changed('setQuantity')
        await importData(store, { pets: [pet(1n, { status: 'sold', quantity: undefined })], orders: [] })
        await changed('a pet status change')
        await importData(store, { pets: [pet(3n, { quantity: 3 })], orders: [] })
        await changed('a new stock entry')
        await importData(store, { pets: [pet(3n, { quantity: 4 })], orders: [] })
        await changed('a re-import changing a stock entry')
        await store.listInventory()
        await store.getPet(1n)
        await store.listOrders({ afterId: null, limit: 10, status: null })
        await unchanged('reads')
        await importData(store, { pets: [], orders: [order(1n)] })
        await unchanged('an orders-only import')
        await store.createApiKey(newKey('key_v'))
        await unchanged('a new API key')
      })

      test('listInventory is empty on a new store', async (t) => {
        const store = await open(t)
        assert.deepEqual(await store.listInventory(), [])
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
        const items = await store.listInventory()
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
        for await (const page of store.inventoryPages(size)) pages.push(page)
        return pages
      }

      test('inventoryPages lists what listInventory lists, size entries a page, each page with the version of exactly these entries', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [5n, -3n, 9007199254740993n, 2n, 8n].map((id) => pet(id, { quantity: Number(id % 100n) + 100 })), orders: [] })
        const pages = await allPages(store, 2)
        assert.deepEqual(pages.map((page) => page.items.length), [2, 2, 1])
        assert.deepEqual(pages.flatMap((page) => page.items), await store.listInventory())
        const version = await store.inventoryVersion()
        assert.deepEqual(pages.map((page) => page.version), [version, version, version])
      })

      test('inventoryPages of an empty store is one empty page with the store version', async (t) => {
        const store = await open(t)
        assert.deepEqual(await allPages(store, 10), [{ version: await store.inventoryVersion(), feed: null, items: [] }])
      })

      test('inventoryPages carries the feed position of its snapshot: the last change in it, on every page', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 1 }), pet(2n, { quantity: 2 }), pet(3n, { quantity: 3 })], orders: [] })
        await store.setQuantity(stockChange(2n, 20))
        const changes = await store.listChanges(null, 100)
        const pages = await allPages(store, 2)
        assert.equal(pages.length, 2)
        const last = changes.at(-1)
        for (const page of pages) assert.deepEqual(page.feed, last === undefined ? null : { ...last.position, epoch: last.epoch })
        // Nothing after that position: following the feed from it yields exactly the changes made since.
        assert.deepEqual(await store.listChanges(pages[0]?.feed ?? null, 100), [])
        await store.setQuantity(stockChange(3n, 30))
        assert.deepEqual((await store.listChanges(pages[0]?.feed ?? null, 100)).map((c) => [c.petId, c.quantity]), [[3n, 30]])
      })

      test('a change committed while inventoryPages is between pages shows neither in its entries nor in its version', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n), pet(2n), pet(3n)], orders: [] })
        const before = await store.inventoryVersion()
        const pages = []
        for await (const page of store.inventoryPages(1)) {
          pages.push(page)
          if (pages.length === 1) assert.notEqual(await setStock(store, 3n, 99), null)
        }
        assert.deepEqual(pages.map((page) => page.items[0]?.quantity), [1, 1, 1])
        assert.deepEqual(pages.map((page) => page.version), [before, before, before])
        assert.ok(await store.inventoryVersion() > before)
        assert.equal((await allPages(store, 10))[0]?.items[2]?.quantity, 99)
      })

      test('an inventoryPages iteration stopped early leaves the store usable for writes and listings', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n), pet(2n)], orders: [] })
        for (let i = 0; i < 3; i++) {
          for await (const page of store.inventoryPages(1)) {
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
        const result = await store.setQuantity(stockChange(1n, 5))
        assert.equal(result.status, 'updated')
        if (result.status === 'updated' && result.version !== undefined) assert.equal(result.version, await store.inventoryVersion())
      })

      test('setQuantity updates the entry and returns the updated item', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 }), pet(2n, { quantity: 9 })], orders: [] })
        assert.deepEqual(await setStock(store, 1n, 12), { petId: 1n, quantity: 12, status: 'available' })
        assert.deepEqual(await store.listInventory(), [
          { petId: 1n, quantity: 12, status: 'available' },
          { petId: 2n, quantity: 9, status: 'available' }
        ])
      })

      test('setQuantity accepts 0 and 1000000000', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 })], orders: [] })
        assert.deepEqual(await setStock(store, 1n, 0), { petId: 1n, quantity: 0, status: 'available' })
        assert.deepEqual(await store.listInventory(), [{ petId: 1n, quantity: 0, status: 'available' }])
        assert.deepEqual(await setStock(store, 1n, 1_000_000_000), { petId: 1n, quantity: 1_000_000_000, status: 'available' })
        assert.deepEqual(await store.listInventory(), [{ petId: 1n, quantity: 1_000_000_000, status: 'available' }])
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
        assert.deepEqual((await store.listInventory()).map((i) => [i.petId, i.quantity]), [
          [INT64_MIN, 100], [ABOVE_2_53, 101], [INT64_MAX, 102]
        ])
      })

      test('setQuantity does not change the pet status', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { status: 'sold', quantity: 0 }), pet(2n, { status: 'pending', quantity: 1 })], orders: [] })
        assert.deepEqual(await setStock(store, 1n, 5), { petId: 1n, quantity: 5, status: 'sold' })
        assert.deepEqual(await setStock(store, 2n, 0), { petId: 2n, quantity: 0, status: 'pending' })
        assert.equal((await store.getPet(1n))?.status, 'sold')
        assert.equal((await store.getPet(2n))?.status, 'pending')
      })

      test('setQuantity answers not_found and changes nothing for a pet without a stock entry', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 }), pet(2n, { quantity: undefined })], orders: [] })
        const before = await snapshot(store, [1n, 2n])
        assert.equal(await setStock(store, 2n, 7), null)
        assert.deepEqual(await snapshot(store, [1n, 2n]), before)
        assert.deepEqual(await store.listInventory(), [{ petId: 1n, quantity: 4, status: 'available' }])
      })

      test('setQuantity answers not_found and changes nothing for an unknown pet', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 })], orders: [] })
        const before = await snapshot(store, [1n, 99n])
        assert.equal(await setStock(store, 99n, 7), null)
        assert.equal(await setStock(store, INT64_MAX, 7), null)
        assert.deepEqual(await snapshot(store, [1n, 99n]), before)
        assert.equal(await store.getPet(99n), null)
      })

      test('concurrent setQuantity calls on one pet all land and the final value is one of them', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(7n, { quantity: 0, status: 'pending' })], orders: [] })
        const written = Array.from({ length: 50 }, (_, i) => i + 1)
        const results = await Promise.all(written.map((q) => setStock(store, 7n, q)))
        // Every call found the entry and reports its own write.
        results.forEach((item, i) => assert.deepEqual(item, { petId: 7n, quantity: written[i], status: 'pending' }))
        const inventory = await store.listInventory()
        assert.equal(inventory.length, 1)
        const final = inventory[0]
        assert.ok(final !== undefined)
        assert.ok(written.includes(final.quantity), `final quantity ${final.quantity} was never written`)
        assert.equal(final.petId, 7n)
        assert.equal(final.status, 'pending')
        // A later read agrees with the first one.
        assert.deepEqual(await store.listInventory(), inventory)
      })

      test('concurrent setQuantity calls on different pets all land', async (t) => {
        const store = await open(t)
        const ids = Array.from({ length: 40 }, (_, i) => BigInt(i + 1))
        await importData(store, { pets: ids.map((id) => pet(id, { quantity: 0 })), orders: [] })
        const results = await Promise.all(ids.map((id) => setStock(store, id, Number(id) * 10)))
        assert.deepEqual(results, ids.map((id) => ({ petId: id, quantity: Number(id) * 10, status: 'available' })))
        assert.deepEqual(await store.listInventory(), results)
      })
    })

    describe('relative stock changes (adjustQuantity)', () => {
      test('an adjustment adds its delta to the quantity, grows the revision and records previous and new quantity in the ledger', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(ABOVE_2_53, { quantity: 4, status: 'pending' })], orders: [] })
        const before = await store.getStockEntry(ABOVE_2_53)
        assert.ok(before !== null)
        const added = await store.adjustQuantity(stockAdjustment(ABOVE_2_53, 3, { reason: 'arrival', note: 'Three more', keyId: 'key_a', requestId: 'req-1' }))
        assert.deepEqual(added.status === 'updated' && added.entry, { petId: ABOVE_2_53, quantity: 7, status: 'pending', revision: before.revision + 1n })
        const taken = await store.adjustQuantity(stockAdjustment(ABOVE_2_53, -7))
        assert.equal(taken.status === 'updated' && taken.entry.quantity, 0)
        const history = await store.stockHistory(ABOVE_2_53, 10)
        assert.deepEqual(history.slice(1).map((e) => [e.previousQuantity, e.quantity, e.reason, e.note, e.keyId, e.requestId]),
          [[4, 7, 'arrival', 'Three more', 'key_a', 'req-1'], [7, 0, 'adjustment', null, 'key_test', 'req-test']])
        assert.equal((await store.listInventory())[0]?.quantity, 0)
      })

      test('an adjustment whose result leaves the allowed quantities changes nothing and returns the current entry', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 2 }), pet(2n, { quantity: MAX_QUANTITY - 1 })], orders: [] })
        const before = await snapshot(store, [1n, 2n])
        const below = await store.adjustQuantity(stockAdjustment(1n, -3))
        assert.equal(below.status, 'out_of_range')
        assert.equal(below.status === 'out_of_range' && below.current.quantity, 2)
        const above = await store.adjustQuantity(stockAdjustment(2n, 2))
        assert.equal(above.status, 'out_of_range')
        assert.equal(above.status === 'out_of_range' && above.current.quantity, MAX_QUANTITY - 1)
        assert.deepEqual(await snapshot(store, [1n, 2n]), before)
        const edge = await store.adjustQuantity(stockAdjustment(2n, 1))
        assert.equal(edge.status === 'updated' && edge.entry.quantity, MAX_QUANTITY, 'the bound itself is allowed')
      })

      test('an adjustment with a stale expected revision changes nothing; an unknown pet is not_found', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const current = await store.getStockEntry(1n)
        assert.ok(current !== null)
        const before = await snapshot(store, [1n])
        const stale = await store.adjustQuantity(stockAdjustment(1n, 1, { expectedRevisions: [current.revision + 5n] }))
        assert.deepEqual(stale, { status: 'stale', current })
        // Stale wins over out of range: the client learns to read the entry again first.
        assert.equal((await store.adjustQuantity(stockAdjustment(1n, -10, { expectedRevisions: [current.revision + 5n] }))).status, 'stale')
        assert.deepEqual(await snapshot(store, [1n]), before)
        const fresh = await store.adjustQuantity(stockAdjustment(1n, 1, { expectedRevisions: [current.revision] }))
        assert.equal(fresh.status === 'updated' && fresh.entry.quantity, 4)
        assert.deepEqual(await store.adjustQuantity(stockAdjustment(INT64_MAX, 1)), { status: 'not_found' })
      })

      test('a refused change (stale, out of range, unknown pet) and a re-import of the same catalogue leave the inventory version as it is', async (t) => {
        const store = await open(t)
        const catalogue = { pets: [pet(1n, { quantity: 3, status: 'pending' }), pet(2n, { quantity: 4 })], orders: [] }
        await importData(store, catalogue)
        const version = await store.inventoryVersion()
        assert.equal((await store.setQuantity(stockChange(1n, 9, { expectedRevisions: [12345n] }))).status, 'stale')
        assert.equal((await store.adjustQuantity(stockAdjustment(1n, 9, { expectedRevisions: [12345n] }))).status, 'stale')
        assert.equal((await store.adjustQuantity(stockAdjustment(1n, -4))).status, 'out_of_range')
        assert.equal((await store.setQuantity(stockChange(INT64_MAX, 1))).status, 'not_found')
        assert.equal((await store.adjustQuantity(stockAdjustment(INT64_MAX, 1))).status, 'not_found')
        await importData(store, catalogue)
        assert.equal(await store.inventoryVersion(), version)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'sold' })], orders: [] })
        assert.ok(await store.inventoryVersion() > version, 'a status that changes moves it')
      })

      test('concurrent adjustments and absolute changes of one entry never lose one another', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 100 })], orders: [] })
        const results = await Promise.all(Array.from({ length: 60 }, (_, i) =>
          i % 20 === 19 ? store.setQuantity(stockChange(1n, 100)) : store.adjustQuantity(stockAdjustment(1n, i % 2 === 0 ? 2 : -1))))
        assert.ok(results.every((r) => r.status === 'updated'))
        // Every ledger row starts from the quantity the previous row left: each change saw the one before it.
        const history = (await store.stockHistory(1n, 100)).slice(1)
        assert.equal(history.length, 60)
        for (let i = 1; i < history.length; i++) assert.equal(history[i]?.previousQuantity, history[i - 1]?.quantity)
        assert.equal((await store.getStockEntry(1n))?.quantity, history.at(-1)?.quantity)
      })
    })

    describe('idempotency records (a change sent with an idempotency key)', () => {
      const EXPIRES = new Date(CHANGED_AT.getTime() + 86_400_000)
      const claim = (key: string, overrides: Partial<IdempotencyClaim> = {}): IdempotencyClaim =>
        ({ scope: 'key_a', key, fingerprint: `fp-${key}`, expiresAt: EXPIRES, ...overrides })

      test('a keyed change writes its record with the entry it left; the same key again changes nothing and answers recorded', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(ABOVE_2_53, { quantity: 4, status: 'pending' }), pet(2n, { quantity: 1 })], orders: [] })
        const first = await store.adjustQuantity(stockAdjustment(ABOVE_2_53, 3, { idempotency: claim('k1') }))
        assert.equal(first.status, 'updated')
        const entry = first.status === 'updated' ? first.entry : null
        assert.deepEqual(await store.findIdempotencyRecord('key_a', 'k1', CHANGED_AT),
          { fingerprint: 'fp-k1', entries: [entry], createdAt: CHANGED_AT, expiresAt: EXPIRES })
        const before = await snapshot(store, [ABOVE_2_53, 2n])
        assert.deepEqual(await store.adjustQuantity(stockAdjustment(ABOVE_2_53, 3, { idempotency: claim('k1') })), { status: 'recorded' })
        // Whatever the second change asks, and however it would end, the recorded key stops it first.
        assert.deepEqual(await store.setQuantity(stockChange(2n, 9, { idempotency: claim('k1', { fingerprint: 'other' }) })), { status: 'recorded' })
        assert.deepEqual(await store.adjustQuantity(stockAdjustment(ABOVE_2_53, -100, { idempotency: claim('k1') })), { status: 'recorded' })
        assert.deepEqual(await store.setQuantity(stockChange(ABOVE_2_53, 1, { expectedRevisions: [0n], idempotency: claim('k1') })), { status: 'recorded' })
        assert.deepEqual(await store.setQuantity(stockChange(INT64_MAX, 1, { idempotency: claim('k1') })), { status: 'recorded' })
        assert.deepEqual(await snapshot(store, [ABOVE_2_53, 2n]), before)
      })

      test('a change that applies nothing (unknown pet, stale revision, out of range) writes no record', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 2 })], orders: [] })
        assert.equal((await store.setQuantity(stockChange(INT64_MAX, 1, { idempotency: claim('k1') }))).status, 'not_found')
        assert.equal((await store.setQuantity(stockChange(1n, 5, { expectedRevisions: [999n], idempotency: claim('k2') }))).status, 'stale')
        assert.equal((await store.adjustQuantity(stockAdjustment(1n, -3, { idempotency: claim('k3') }))).status, 'out_of_range')
        for (const key of ['k1', 'k2', 'k3']) assert.equal(await store.findIdempotencyRecord('key_a', key, CHANGED_AT), null)
        assert.equal((await store.adjustQuantity(stockAdjustment(1n, -2, { idempotency: claim('k3') }))).status, 'updated', 'the key is still free')
      })

      test('keys are scoped: the same key of another scope is another key', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 })], orders: [] })
        assert.equal((await store.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('same') }))).status, 'updated')
        assert.equal((await store.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('same', { scope: 'key_b' }) }))).status, 'updated')
        assert.equal((await store.getStockEntry(1n))?.quantity, 2)
        assert.equal((await store.findIdempotencyRecord('key_b', 'same', CHANGED_AT))?.entries[0]?.quantity, 2)
      })

      test('an expired record is not found, and a change with its key applies and records it anew', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 })], orders: [] })
        const expiry = new Date(CHANGED_AT.getTime() + 60_000)
        await store.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('k', { expiresAt: expiry }) }))
        assert.notEqual(await store.findIdempotencyRecord('key_a', 'k', new Date(expiry.getTime() - 1)), null)
        assert.equal(await store.findIdempotencyRecord('key_a', 'k', expiry), null, 'expired at its expiry')
        const later = new Date(expiry.getTime() + 1000)
        const again = await store.adjustQuantity(stockAdjustment(1n, 1, { at: later, idempotency: claim('k', { fingerprint: 'new', expiresAt: EXPIRES }) }))
        assert.equal(again.status, 'updated')
        assert.deepEqual(await store.findIdempotencyRecord('key_a', 'k', later),
          { fingerprint: 'new', entries: [again.status === 'updated' && again.entry], createdAt: later, expiresAt: EXPIRES })
      })

      test('purging deletes expired records only, at most the number asked for', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 })], orders: [] })
        for (let i = 0; i < 5; i++) {
          await store.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim(`old-${i}`, { expiresAt: new Date(CHANGED_AT.getTime() + 1000 + i) }) }))
        }
        await store.adjustQuantity(stockAdjustment(1n, 1, { idempotency: claim('live') }))
        const now = new Date(CHANGED_AT.getTime() + 10_000)
        assert.equal(await store.purgeIdempotencyRecords(now, 3), 3)
        assert.equal(await store.purgeIdempotencyRecords(now, 3), 2)
        assert.equal(await store.purgeIdempotencyRecords(now, 3), 0)
        assert.notEqual(await store.findIdempotencyRecord('key_a', 'live', now), null)
        assert.equal((await store.stockHistory(1n, 10)).length, 7, 'the changes themselves stay in the ledger')
      })

      test('the same key sent many times at once applies once; every other attempt answers recorded', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 }), pet(2n, { quantity: 0 })], orders: [] })
        const results = await Promise.all(Array.from({ length: 30 }, (_, i) =>
          // Different pets too: the key, not the entry's lock, is what makes them one request.
          store.adjustQuantity(stockAdjustment(i % 3 === 0 ? 2n : 1n, 1, { idempotency: claim('once') }))))
        assert.equal(results.filter((r) => r.status === 'updated').length, 1)
        assert.equal(results.filter((r) => r.status === 'recorded').length, 29)
        const total = ((await store.getStockEntry(1n))?.quantity ?? 0) + ((await store.getStockEntry(2n))?.quantity ?? 0)
        assert.equal(total, 1)
        assert.equal((await store.stockHistory(1n, 100)).length + (await store.stockHistory(2n, 100)).length, 3, 'two imports and one change')
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
        const before = await store.getStockEntry(3n)
        assert.ok(before !== null)
        const version = await store.inventoryVersion()
        const result = await store.applyBatch(batchOf([add(ABOVE_2_53, 3), set(1n, 0, { note: 'sold out' }), add(3n, -4, { expectedRevisions: [before.revision] })]))
        assert.equal(result.status, 'updated')
        const entries = result.status === 'updated' ? result.entries : []
        assert.deepEqual(entries.map((e) => [e.petId, e.quantity, e.status]), [[ABOVE_2_53, 5, 'sold'], [1n, 0, 'available'], [3n, 5, 'available']])
        assert.deepEqual(await Promise.all(entries.map((e) => store.getStockEntry(e.petId))), entries)
        assert.ok(await store.inventoryVersion() > version)
        const rows = (await Promise.all([ABOVE_2_53, 1n, 3n].map((id) => store.stockHistory(id, 10)))).map((h) => h.at(-1))
        assert.deepEqual(rows.map((r) => [r?.previousQuantity, r?.quantity, r?.reason, r?.note, r?.keyId, r?.requestId, r?.batchId]), [
          [2, 5, 'adjustment', null, 'key_a', 'req-b', 'batch-1'],
          [5, 0, 'arrival', 'sold out', 'key_a', 'req-b', 'batch-1'],
          [9, 5, 'adjustment', null, 'key_a', 'req-b', 'batch-1']
        ])
        assert.equal((await store.stockHistory(1n, 10))[0]?.batchId, null, 'a change made alone has no batch')
      })

      test('when any change cannot apply, then nothing changes and every failing change is listed with why', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 5 }), pet(2n, { quantity: 1 }), pet(3n, { quantity: 9 })], orders: [] })
        const current2 = await store.getStockEntry(2n)
        const current3 = await store.getStockEntry(3n)
        const before = await snapshot(store, [1n, 2n, 3n])
        const result = await store.applyBatch(batchOf([add(1n, 1), add(2n, -2), set(INT64_MAX, 1), add(3n, 1, { expectedRevisions: [999n] }), set(1n + 10n, 1)]))
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
        const first = await store.applyBatch(batchOf([add(1n, 1), add(2n, 1)], { idempotency }))
        assert.equal(first.status, 'updated')
        assert.deepEqual((await store.findIdempotencyRecord('key_a', 'b1', CHANGED_AT))?.entries, first.status === 'updated' ? first.entries : null)
        const before = await snapshot(store, [1n, 2n])
        assert.deepEqual(await store.applyBatch(batchOf([add(1n, 1), add(2n, 1)], { idempotency })), { status: 'recorded' })
        assert.deepEqual(await store.adjustQuantity(stockAdjustment(1n, 1, { idempotency })), { status: 'recorded' }, 'one key, whatever the write')
        assert.deepEqual(await snapshot(store, [1n, 2n]), before)
        const refused = await store.applyBatch(batchOf([add(1n, -100)], { idempotency: { ...idempotency, key: 'b2' } }))
        assert.equal(refused.status, 'refused')
        assert.equal(await store.findIdempotencyRecord('key_a', 'b2', CHANGED_AT), null, 'a refused batch records nothing')
      })

      test('concurrent batches over the same pets in different orders all apply, none lost, without deadlock', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 }), pet(2n, { quantity: 0 }), pet(3n, { quantity: 0 })], orders: [] })
        const orders = [[1n, 2n, 3n], [3n, 2n, 1n], [2n, 3n, 1n]]
        const results = await Promise.all(Array.from({ length: 24 }, (_, i) =>
          store.applyBatch(batchOf((orders[i % 3] as bigint[]).map((id) => add(id, 1)), { batchId: `b${i}` }))))
        assert.ok(results.every((r) => r.status === 'updated'))
        for (const id of [1n, 2n, 3n]) {
          assert.equal((await store.getStockEntry(id))?.quantity, 24)
          const history = (await store.stockHistory(id, 100)).slice(1)
          for (let i = 1; i < history.length; i++) assert.equal(history[i]?.previousQuantity, history[i - 1]?.quantity)
        }
      })
    })

    describe('the change feed (listChanges)', () => {
      /** Every change, page after page of `size`, following each page's last position. */
      async function readFeed (store: Store, size: number, after: FeedPosition | null = null): Promise<FeedChange[]> {
        const all: FeedChange[] = []
        for (;;) {
          const page = await store.listChanges(after, size)
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
        for (let tries = 0; tries < 400 && (await store.listChanges(null, count)).length < count; tries++) {
          await new Promise((resolve) => setTimeout(resolve, 25))
        }
      }

      test('paging the feed serves every ledger entry once, imports included, each with its place', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 5 }), pet(ABOVE_2_53, { quantity: 2 })], orders: [] })
        await store.setQuantity(stockChange(1n, 7, { note: 'recount' }))
        await store.adjustQuantity(stockAdjustment(ABOVE_2_53, 3))
        await store.applyBatch({
          changes: [{ petId: 1n, delta: -1, expectedRevisions: null, reason: 'adjustment', note: null }, { petId: ABOVE_2_53, quantity: 0, expectedRevisions: null, reason: 'return', note: null }],
          allowed: { min: 0, max: MAX_QUANTITY }, batchId: 'b-feed', keyId: 'key_a', requestId: 'req-b', at: CHANGED_AT
        })
        const ledger = [...await store.stockHistory(1n, 100), ...await store.stockHistory(ABOVE_2_53, 100)]
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
        assert.deepEqual(await store.listChanges(feed.at(-1)?.position ?? null, 10), [], 'nothing after the last')
        assert.deepEqual((await store.listChanges(feed[2]?.position ?? null, 2)).map((c) => c.id), feed.slice(3, 5).map((c) => c.id))
      })

      test('concurrent writers and a reader paging all the while: the reader sees every change exactly once', async (t) => {
        const store = await open(t)
        await importData(store, { pets: Array.from({ length: 5 }, (_, i) => pet(BigInt(i + 1), { quantity: 1000 })), orders: [] })
        let writing = true
        const writers = Array.from({ length: 4 }, async (_, w) => {
          for (let i = 0; i < 25; i++) await store.adjustQuantity(stockAdjustment(BigInt((w + i) % 5 + 1), i % 2 === 0 ? 1 : -1, { requestId: `w${w}-${i}` }))
        })
        const seen: FeedChange[] = []
        const reader = (async () => {
          let after: FeedPosition | null = null
          // Until every change was seen, or well after the writers stopped (a transaction elsewhere may hold the
          // feed back for a moment: it serves only what can no longer be overtaken).
          let deadline = Number.POSITIVE_INFINITY
          while (seen.length < 105 && Date.now() < deadline) {
            const page = await store.listChanges(after, 3)
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
        for (const [petId, quantity] of last) assert.equal((await store.getStockEntry(petId))?.quantity, quantity, 'a copy that applies the feed ends where the store is')
      })
    })

    describe('stock ledger and revisions', () => {
      test('setQuantity records the change in the ledger with previous and new quantity, reason, note, key, request and time', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(ABOVE_2_53, { quantity: 4, status: 'pending' })], orders: [] }, { at: new Date('2026-11-22T11:00:00Z') })
        const before = await store.getStockEntry(ABOVE_2_53)
        assert.ok(before !== null)
        const result = await store.setQuantity(stockChange(ABOVE_2_53, 15, { reason: 'arrival', note: 'Truck 42 — 11 puppies', keyId: 'key_a', requestId: 'req-1' }))
        assert.equal(result.status, 'updated')
        assert.deepEqual(result.status === 'updated' && result.entry, { petId: ABOVE_2_53, quantity: 15, status: 'pending', revision: before.revision + 1n })
        const history = await store.stockHistory(ABOVE_2_53, 10)
        assert.equal(history.length, 2)
        const [imported, arrival] = history
        assert.deepEqual({ ...imported, id: 0n }, {
          id: 0n, petId: ABOVE_2_53, previousQuantity: null, quantity: 4, reason: 'import', note: null, keyId: null, requestId: null, batchId: null,
          status: 'pending', previousStatus: null, at: new Date('2026-11-22T11:00:00Z')
        })
        assert.deepEqual({ ...arrival, id: 0n }, {
          id: 0n, petId: ABOVE_2_53, previousQuantity: 4, quantity: 15, reason: 'arrival', note: 'Truck 42 — 11 puppies', keyId: 'key_a', requestId: 'req-1', batchId: null,
          status: null, previousStatus: null, at: CHANGED_AT
        })
        assert.ok((arrival?.id ?? 0n) > (imported?.id ?? 0n))
        assert.equal(typeof arrival?.petId, 'bigint')
      })

      test('getStockEntry returns the entry with its revision, and null for a pet without stock or an unknown pet', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'sold' }), pet(2n, { quantity: undefined })], orders: [] })
        const entry = await store.getStockEntry(1n)
        assert.deepEqual({ ...entry, revision: 0n }, { petId: 1n, quantity: 3, status: 'sold', revision: 0n })
        assert.equal(typeof entry?.revision, 'bigint')
        assert.equal(await store.getStockEntry(2n), null)
        assert.equal(await store.getStockEntry(INT64_MAX), null)
      })

      test('every change grows the revision, and setting the same quantity again is still a recorded change', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const revisions = [(await store.getStockEntry(1n))?.revision]
        for (const quantity of [5, 5, 0]) {
          await store.setQuantity(stockChange(1n, quantity))
          revisions.push((await store.getStockEntry(1n))?.revision)
        }
        assert.equal(new Set(revisions).size, 4)
        assert.deepEqual((await store.stockHistory(1n, 10)).map((e) => [e.previousQuantity, e.quantity]), [[null, 3], [3, 5], [5, 5], [5, 0]])
      })

      test('with expectedRevisions holding the current revision, the change applies', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const current = await store.getStockEntry(1n)
        assert.ok(current !== null)
        const result = await store.setQuantity(stockChange(1n, 8, { expectedRevisions: [current.revision - 1n, current.revision] }))
        assert.equal(result.status, 'updated')
        assert.equal((await store.getStockEntry(1n))?.quantity, 8)
      })

      test('with a stale expected revision, nothing changes (stock, revision, ledger) and the current entry is returned', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'pending' })], orders: [] })
        const seen = await store.getStockEntry(1n)
        assert.ok(seen !== null)
        await store.setQuantity(stockChange(1n, 4))
        const before = await snapshot(store, [1n])
        const result = await store.setQuantity(stockChange(1n, 9, { expectedRevisions: [seen.revision] }))
        assert.deepEqual(result, { status: 'stale', current: { petId: 1n, quantity: 4, status: 'pending', revision: seen.revision + 1n } })
        assert.deepEqual(await snapshot(store, [1n]), before)
        assert.equal((await store.setQuantity(stockChange(1n, 9, { expectedRevisions: [] }))).status, 'stale')
      })

      test('without a stock entry the answer is not_found, whatever the expected revisions', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(2n, { quantity: undefined })], orders: [] })
        assert.deepEqual(await store.setQuantity(stockChange(2n, 1, { expectedRevisions: [1n] })), { status: 'not_found' })
        assert.deepEqual(await store.setQuantity(stockChange(99n, 1, { expectedRevisions: [] })), { status: 'not_found' })
        assert.deepEqual(await store.stockHistory(2n, 10), [])
      })

      test('a change the database refuses writes no ledger row', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const before = await snapshot(store, [1n])
        await assert.rejects(store.setQuantity(stockChange(1n, -5)))
        assert.deepEqual(await snapshot(store, [1n]), before)
      })

      test('concurrent changes of one pet form an unbroken chain in the ledger', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(7n, { quantity: 0 })], orders: [] })
        const start = await store.getStockEntry(7n)
        const written = Array.from({ length: 30 }, (_, i) => i + 1)
        await Promise.all(written.map((q) => store.setQuantity(stockChange(7n, q, { note: `write ${q}` }))))
        const history = (await store.stockHistory(7n, 1000)).slice(1)
        assert.equal(history.length, written.length)
        // Each change replaced exactly the quantity the previous one left: no change was lost or reordered.
        history.forEach((entry, i) => assert.equal(entry.previousQuantity, i === 0 ? 0 : history[i - 1]?.quantity))
        assert.deepEqual(history.map((e) => e.quantity).sort((a, b) => a - b), written)
        const final = await store.getStockEntry(7n)
        assert.equal(final?.quantity, history.at(-1)?.quantity)
        assert.equal(final?.revision, (start?.revision ?? 0n) + BigInt(written.length))
      })

      test('concurrent compare-and-set changes from one revision: exactly one applies', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(7n, { quantity: 0 })], orders: [] })
        const seen = await store.getStockEntry(7n)
        assert.ok(seen !== null)
        const results = await Promise.all([1, 2, 3, 4, 5, 6].map((q) => store.setQuantity(stockChange(7n, q, { expectedRevisions: [seen.revision] }))))
        assert.equal(results.filter((r) => r.status === 'updated').length, 1)
        assert.equal(results.filter((r) => r.status === 'stale').length, 5)
        assert.equal((await store.stockHistory(7n, 100)).length, 2)
      })

      test('an import records new and changed quantities, and leaves unchanged ones alone (revision and ledger)', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 }), pet(2n, { quantity: 5 })], orders: [] })
        const [one, two] = [await store.getStockEntry(1n), await store.getStockEntry(2n)]
        await importData(store, { pets: [pet(1n, { quantity: 3 }), pet(2n, { quantity: 6 }), pet(3n, { quantity: 0 })], orders: [] })
        assert.equal((await store.getStockEntry(1n))?.revision, one?.revision, 'an unchanged quantity keeps its revision')
        assert.equal((await store.getStockEntry(2n))?.revision, (two?.revision ?? 0n) + 1n)
        assert.deepEqual((await store.stockHistory(1n, 10)).map((e) => [e.reason, e.previousQuantity, e.quantity]), [['import', null, 3]])
        assert.deepEqual((await store.stockHistory(2n, 10)).map((e) => [e.reason, e.previousQuantity, e.quantity]), [['import', null, 5], ['import', 5, 6]])
        assert.deepEqual((await store.stockHistory(3n, 10)).map((e) => [e.reason, e.previousQuantity, e.quantity]), [['import', null, 0]])
      })

      test('an import that changes a listed pet\'s status grows the entry revision once and records the change with both statuses', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
        const before = await store.getStockEntry(1n)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'available' })], orders: [] })
        assert.equal((await store.getStockEntry(1n))?.revision, before?.revision, 'the same status is no change')
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        assert.deepEqual(await store.getStockEntry(1n), { petId: 1n, quantity: 3, status: 'sold', revision: (before?.revision ?? 0n) + 1n })
        const history = await store.stockHistory(1n, 10)
        assert.deepEqual(history.map((e) => [e.reason, e.previousQuantity, e.quantity, e.previousStatus, e.status]),
          [['import', null, 3, null, 'available'], ['import', 3, 3, 'available', 'sold']])
        // With the same quantity and status again: nothing.
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'sold' })], orders: [] })
        assert.equal((await store.stockHistory(1n, 10)).length, 2)
      })

      test('an import that changes a status and a quantity at once records one change with both, and grows the revision once', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 3, status: 'available' })], orders: [] })
        const before = await store.getStockEntry(1n)
        await importData(store, { pets: [pet(1n, { quantity: 0, status: 'sold' })], orders: [] })
        assert.deepEqual((await store.stockHistory(1n, 10)).slice(1).map((e) => [e.previousQuantity, e.quantity, e.previousStatus, e.status]),
          [[3, 0, 'available', 'sold']])
        assert.equal((await store.getStockEntry(1n))?.revision, (before?.revision ?? 0n) + 1n)
        // A quantity alone: once too.
        await importData(store, { pets: [pet(1n, { quantity: 4, status: 'sold' })], orders: [] })
        assert.equal((await store.getStockEntry(1n))?.revision, (before?.revision ?? 0n) + 2n)
      })

      test('an import that changes the status of a pet without stock records nothing: the listing does not show it', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'available' })], orders: [] })
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        assert.deepEqual(await store.listChanges(null, 10), [])
        // Its first stock creates the entry with the status it has.
        await importData(store, { pets: [pet(1n, { quantity: 2, status: 'sold' })], orders: [] })
        assert.deepEqual((await store.listChanges(null, 10)).map((e) => [e.previousQuantity, e.quantity, e.previousStatus, e.status]), [[null, 2, null, 'sold']])
      })

      test('stockHistory returns the newest entries of that pet only, oldest first', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 0 }), pet(2n, { quantity: 0 })], orders: [] })
        for (const quantity of [1, 2, 3, 4]) {
          await store.setQuantity(stockChange(1n, quantity))
          await store.setQuantity(stockChange(2n, quantity * 10))
        }
        assert.deepEqual((await store.stockHistory(1n, 3)).map((e) => e.quantity), [2, 3, 4])
        assert.deepEqual((await store.stockHistory(2n, 100)).map((e) => e.quantity), [0, 10, 20, 30, 40])
        assert.deepEqual(await store.stockHistory(99n, 10), [])
      })
    })

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
        const got = await store.getPet(ABOVE_2_53)
        assert.deepEqual(got, asPet(full))
        assert.equal(typeof got?.category?.id, 'bigint')
        for (const tag of got?.tags ?? []) assert.equal(typeof tag.id, 'bigint')
      })

      test('getPet omits absent optional fields instead of returning undefined-valued keys', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        const got = await store.getPet(1n)
        assert.deepEqual(got, { id: 1n, name: 'pet 1', status: 'sold' })
        assert.deepEqual(Object.keys(got ?? {}).sort(), ['id', 'name', 'status'])
      })

      test('getPet keeps empty tags and photoUrls arrays as empty arrays', async (t) => {
        const store = await open(t)
        const bare = pet(1n, { tags: [], photoUrls: [] })
        await importData(store, { pets: [bare], orders: [] })
        assert.deepEqual(await store.getPet(1n), asPet(bare))
      })

      test('getPet returns pets at both int64 extremes', async (t) => {
        const store = await open(t)
        const low = pet(INT64_MIN, { category: { id: INT64_MIN, name: 'low' } })
        const high = pet(INT64_MAX, { tags: [{ id: INT64_MAX, name: 'high' }] })
        await importData(store, { pets: [low, high], orders: [] })
        assert.deepEqual(await store.getPet(INT64_MIN), asPet(low))
        assert.deepEqual(await store.getPet(INT64_MAX), asPet(high))
      })

      test('getPet returns null for an unknown id', async (t) => {
        const store = await open(t)
        assert.equal(await store.getPet(1n), null)
        await importData(store, { pets: [pet(ABOVE_2_53)], orders: [] })
        assert.equal(await store.getPet(1n), null)
        assert.equal(await store.getPet(ABOVE_2_53 - 1n), null)
        assert.equal(await store.getPet(INT64_MAX), null)
        assert.equal(await store.getPet(INT64_MIN), null)
      })

      test('countPets counts every pet, with or without a stock entry', async (t) => {
        const store = await open(t)
        assert.equal(await store.countPets(), 0)
        await importData(store, {
          pets: [pet(1n), pet(2n, { quantity: undefined }), pet(INT64_MAX), pet(INT64_MIN, { quantity: undefined })],
          orders: [order(1n)]
        })
        assert.equal(await store.countPets(), 4)
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

        assert.equal(await store.countPets(), 2)
        assert.deepEqual(await store.getPet(1n), asPet(renamed))
        assert.deepEqual(await store.getPet(INT64_MAX), asPet(pet(INT64_MAX, { name: 'big', quantity: 2 })))
        assert.deepEqual(await store.listInventory(), [
          { petId: 1n, quantity: 9, status: 'sold' },
          { petId: INT64_MAX, quantity: 2, status: 'available' }
        ])
        assert.deepEqual(await store.listOrders({ afterId: null, limit: 10, status: null }), {
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
        assert.deepEqual(await store.getPet(1n), { id: 1n, name: 'plain', status: 'available' })
      })

      test('a re-import of a pet without a quantity keeps its stock entry as it is', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [pet(1n, { quantity: 4 })], orders: [] })
        await setStock(store, 1n, 9)
        await importData(store, { pets: [pet(1n, { quantity: undefined, status: 'sold' })], orders: [] })
        assert.deepEqual(await store.listInventory(), [{ petId: 1n, quantity: 9, status: 'sold' }])
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
        assert.equal(await store.countPets(), 2)
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
        assert.deepEqual(await store.listOrders({ afterId: null, limit: 10, status: null }), { orders: [], hasMore: false })
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
        const page = await store.listOrders({ afterId: null, limit: 100, status: null })
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
          (await store.listOrders({ afterId, limit, status: null })).orders.map((o) => o.id)
        assert.deepEqual(await after(2n), [10n, ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(3n), [10n, ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(-4n), [-3n, 1n, 2n, 10n, ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(INT64_MIN), [-3n, 1n, 2n, 10n, ABOVE_2_53, INT64_MAX])
        // 2^53 + 1 and 2^53 are one double apart: comparisons must be exact.
        assert.deepEqual(await after(ABOVE_2_53 - 1n), [ABOVE_2_53, INT64_MAX])
        assert.deepEqual(await after(ABOVE_2_53), [INT64_MAX])
        assert.deepEqual(await store.listOrders({ afterId: INT64_MAX, limit: 10, status: null }), { orders: [], hasMore: false })
        assert.deepEqual(await store.listOrders({ afterId: 10n, limit: 1, status: null }), { orders: [order(ABOVE_2_53)], hasMore: true })
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
        const approved = await store.listOrders({ afterId: 1n, limit: 10, status: 'approved' })
        assert.deepEqual(approved, { orders: [order(10n, { status: 'approved' }), order(ABOVE_2_53, { status: 'approved' })], hasMore: false })
        // hasMore counts only orders of the status: the placed order after the last approved one does not count.
        assert.equal((await store.listOrders({ afterId: 10n, limit: 1, status: 'approved' })).hasMore, false)
      })

      test('listOrders status filter with no match returns an empty page', async (t) => {
        const store = await open(t)
        await importData(store, { pets: [], orders: [order(1n), order(2n)] })
        assert.deepEqual(await store.listOrders({ afterId: null, limit: 10, status: 'delivered' }), { orders: [], hasMore: false })
      })
    })

    describe('api keys', () => {
      test('banApiKey records the ban on the key; unbanApiKey ends it early and keeps its length', async (t) => {
        const store = await open(t)
        const key = newKey('key_ban')
        await store.createApiKey(key)
        const ban = { since: new Date('2026-11-22T12:00:00.000Z'), until: new Date('2026-11-22T12:15:00.000Z'), seconds: 900 }
        assert.equal(await store.banApiKey(key.id, ban), true)
        assert.deepEqual((await store.findApiKeyByHash(key.keyHash))?.ban, ban)
        assert.deepEqual((await store.listApiKeys())[0]?.ban, ban)
        const liftedAt = new Date('2026-11-22T12:05:00.000Z')
        assert.equal(await store.unbanApiKey(key.id, liftedAt), true)
        assert.deepEqual((await store.findApiKeyByHash(key.keyHash))?.ban, { ...ban, until: liftedAt })
        // Lifting again later changes nothing: the ban already ended.
        assert.equal(await store.unbanApiKey(key.id, new Date('2026-11-22T12:10:00.000Z')), true)
        assert.deepEqual((await store.findApiKeyByHash(key.keyHash))?.ban, { ...ban, until: liftedAt })
      })

      test('a key keeps its scope and expiry; keys created without them have scope write and never expire', async (t) => {
        const store = await open(t)
        const reader = newKey('key_reader', { scope: 'read', expiresAt: new Date('2027-02-20T00:00:00.000Z') })
        const plain = newKey('key_plain')
        await store.createApiKey(reader)
        await store.createApiKey(plain)
        const found = await store.findApiKeyByHash(reader.keyHash)
        assert.deepEqual(found, asRecord(reader))
        assert.equal(found?.scope, 'read')
        assert.deepEqual(found?.expiresAt, new Date('2027-02-20T00:00:00.000Z'))
        const other = await store.findApiKeyByHash(plain.keyHash)
        assert.equal(other?.scope, 'write')
        assert.equal(other?.expiresAt, null)
        assert.equal(other?.quotaId, 'key_plain')
      })

      test('rotateApiKey creates the replacement with the old quota and ends the old key at the sooner of the overlap and its expiry', async (t) => {
        const store = await open(t)
        const at = new Date('2026-11-23T10:00:00.000Z')
        const ban = { since: new Date('2026-11-23T09:00:00.000Z'), until: new Date('2026-11-23T09:15:00.000Z'), seconds: 900 }
        await store.createApiKey(newKey('key_old', { scope: 'read' }))
        await store.banApiKey('key_old', ban)
        const replacement = newKey('key_new', { scope: 'read', quotaId: 'key_old', createdAt: at })
        const endsAt = new Date('2026-11-24T10:00:00.000Z')
        assert.equal(await store.rotateApiKey('key_old', { ...replacement, quotaId: 'key_old' }, endsAt), 'rotated')
        const keys = new Map((await store.listApiKeys()).map((key) => [key.id, key]))
        assert.deepEqual(keys.get('key_new'), asRecord(replacement, null, ban), 'the old key\'s ban carries over')
        assert.equal(keys.get('key_new')?.quotaId, 'key_old')
        assert.deepEqual(keys.get('key_old')?.expiresAt, endsAt)
        assert.equal(keys.get('key_old')?.replacedBy, 'key_new')
        // The replaced key cannot be rotated again (the lineage never forks); the new one can.
        assert.equal(await store.rotateApiKey('key_old', { ...newKey('key_fork', { createdAt: at }), quotaId: 'key_old' }, endsAt), 'replaced')
        const sooner = new Date('2026-11-23T12:00:00.000Z')
        await store.createApiKey(newKey('key_short', { expiresAt: sooner }))
        assert.equal(await store.rotateApiKey('key_short', { ...newKey('key_short2', { createdAt: at }), quotaId: 'key_short' }, endsAt), 'rotated')
        assert.deepEqual((await store.listApiKeys()).find((key) => key.id === 'key_short')?.expiresAt, sooner)
        assert.equal((await store.listApiKeys()).some((key) => key.id === 'key_fork'), false, 'a refused rotation creates nothing')
      })

      test('rotateApiKey gives the replacement the ban the old key has in the store when it rotates (one recorded after the caller read the key too)', async (t) => {
        const store = await open(t)
        const at = new Date('2026-11-23T10:00:00.000Z')
        await store.createApiKey(newKey('key_banned'))
        // Banned after the caller read the key (which had no ban then).
        const ban = { since: new Date('2026-11-23T09:59:00.000Z'), until: new Date('2026-11-23T10:14:00.000Z'), seconds: 900 }
        await store.banApiKey('key_banned', ban)
        assert.equal(await store.rotateApiKey('key_banned', { ...newKey('key_heir', { createdAt: at }), quotaId: 'key_banned' },
          new Date('2026-11-24T10:00:00.000Z')), 'rotated')
        assert.deepEqual((await store.listApiKeys()).find((key) => key.id === 'key_heir')?.ban, ban)
      })

      test('rotateApiKey refuses an unknown, revoked or expired key and creates nothing', async (t) => {
        const store = await open(t)
        const at = new Date('2026-11-23T10:00:00.000Z')
        const endsAt = new Date('2026-11-24T10:00:00.000Z')
        await store.createApiKey(newKey('key_revoked'))
        await store.revokeApiKey('key_revoked', new Date('2026-11-23T09:00:00.000Z'))
        await store.createApiKey(newKey('key_expired', { expiresAt: new Date('2026-11-23T09:59:59.999Z') }))
        assert.equal(await store.rotateApiKey('key_missing', { ...newKey('key_a', { createdAt: at }), quotaId: 'key_missing' }, endsAt), 'not_found')
        assert.equal(await store.rotateApiKey('key_revoked', { ...newKey('key_b', { createdAt: at }), quotaId: 'key_revoked' }, endsAt), 'inactive')
        assert.equal(await store.rotateApiKey('key_expired', { ...newKey('key_c', { createdAt: at }), quotaId: 'key_expired' }, endsAt), 'inactive')
        assert.deepEqual((await store.listApiKeys()).map((key) => key.id).sort(), ['key_expired', 'key_revoked'])
      })

      test('a ban and its lifting reach every key sharing the quota, and no other key', async (t) => {
        const store = await open(t)
        await store.createApiKey(newKey('key_first'))
        await store.createApiKey(newKey('key_second', { quotaId: 'key_first' }))
        await store.createApiKey(newKey('key_stranger'))
        const ban = { since: new Date('2026-11-23T10:00:00.000Z'), until: new Date('2026-11-23T10:15:00.000Z'), seconds: 900 }
        assert.equal(await store.banApiKey('key_second', ban), true)
        const bans = async () => new Map((await store.listApiKeys()).map((key) => [key.id, key.ban]))
        assert.deepEqual((await bans()).get('key_first'), ban)
        assert.deepEqual((await bans()).get('key_second'), ban)
        assert.equal((await bans()).get('key_stranger'), null)
        const liftedAt = new Date('2026-11-23T10:05:00.000Z')
        assert.equal(await store.unbanApiKey('key_first', liftedAt), true)
        assert.deepEqual((await bans()).get('key_second'), { ...ban, until: liftedAt })
      })

      test('recordKeyUse moves the last use times forward only, the deprecated one only when given', async (t) => {
        const store = await open(t)
        await store.createApiKey(newKey('key_used'))
        const t1 = new Date('2026-11-23T10:00:00.000Z')
        const t2 = new Date('2026-11-23T10:01:00.000Z')
        await store.recordKeyUse('key_used', t2, null)
        let key = await store.findApiKeyByHash('hash-of-key_used')
        assert.deepEqual([key?.lastUsedAt, key?.lastDeprecatedUseAt], [t2, null])
        // An instance that recorded earlier arrives late: nothing goes backwards.
        await store.recordKeyUse('key_used', t1, t1)
        key = await store.findApiKeyByHash('hash-of-key_used')
        assert.deepEqual([key?.lastUsedAt, key?.lastDeprecatedUseAt], [t2, t1])
        await store.recordKeyUse('key_used', t2, t2)
        key = await store.findApiKeyByHash('hash-of-key_used')
        assert.deepEqual([key?.lastUsedAt, key?.lastDeprecatedUseAt], [t2, t2])
        await store.recordKeyUse('key_missing', t2, null)
      })

      test('banApiKey and unbanApiKey answer false for an unknown key id', async (t) => {
        const store = await open(t)
        const ban = { since: new Date(), until: new Date(Date.now() + 1000), seconds: 1 }
        assert.equal(await store.banApiKey('key_missing', ban), false)
        assert.equal(await store.unbanApiKey('key_missing', new Date()), false)
      })

      test('createApiKey then findApiKeyByHash returns the record with Date fields and null limits for a non-enterprise key', async (t) => {
        const store = await open(t)
        const key = newKey('key_free', { plan: 'pro' })
        await store.createApiKey(key)
        const found = await store.findApiKeyByHash(key.keyHash)
        assert.deepEqual(found, asRecord(key))
        assert.ok(found?.createdAt instanceof Date)
        assert.equal(found.perMinute, null)
        assert.equal(found.perDay, null)
        assert.equal(found.revokedAt, null)
      })

      test('findApiKeyByHash returns numeric limits for an enterprise key and a null name when unnamed', async (t) => {
        const store = await open(t)
        const key = newKey('key_ent', { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000_000, name: null })
        await store.createApiKey(key)
        const found = await store.findApiKeyByHash(key.keyHash)
        assert.deepEqual(found, asRecord(key))
        assert.equal(typeof found?.perMinute, 'number')
        assert.equal(typeof found?.perDay, 'number')
      })

      test('findApiKeyByHash returns null for an unknown hash', async (t) => {
        const store = await open(t)
        assert.equal(await store.findApiKeyByHash('nope'), null)
        await store.createApiKey(newKey('key_1'))
        assert.equal(await store.findApiKeyByHash('nope'), null)
        assert.equal(await store.findApiKeyByHash('key_1'), null) // an id is not a hash
        assert.equal(await store.findApiKeyByHash('HASH-OF-KEY_1'), null) // hashes match exactly
      })

      test('listApiKeys returns every key and no hash field', async (t) => {
        const store = await open(t)
        assert.deepEqual(await store.listApiKeys(), [])
        const keys = [
          newKey('key_b', { plan: 'free', createdAt: new Date('2026-11-22T12:00:00.000Z') }),
          newKey('key_a', { plan: 'business', name: null, createdAt: new Date('2026-11-21T08:30:15.250Z') }),
          newKey('key_c', { plan: 'enterprise', perMinute: 10, perDay: 20, createdAt: new Date('2026-11-23T00:00:00.999Z') })
        ]
        for (const key of keys) await store.createApiKey(key)
        const listed = await store.listApiKeys()
        const byId = (a: ApiKeyRecord, b: ApiKeyRecord) => a.id.localeCompare(b.id)
        assert.deepEqual([...listed].sort(byId), keys.map((k) => asRecord(k)).sort(byId))
        for (const record of listed) {
          assert.deepEqual(Object.keys(record).filter((k) => /hash/i.test(k)), [])
          assert.ok(!Object.values(record).some((v) => typeof v === 'string' && v.startsWith('hash-of-')), 'a hash value leaked')
        }
      })

      test('revokeApiKey returns true and sets revokedAt', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        const other = newKey('key_2')
        await store.createApiKey(key)
        await store.createApiKey(other)
        const at = new Date('2026-12-01T09:00:00.456Z')
        assert.equal(await store.revokeApiKey('key_1', at), true)
        assert.deepEqual(await store.findApiKeyByHash(key.keyHash), asRecord(key, at))
        assert.deepEqual(await store.findApiKeyByHash(other.keyHash), asRecord(other))
      })

      test('revoking a key twice keeps the first revokedAt', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.createApiKey(key)
        const first = new Date('2026-12-01T09:00:00.456Z')
        assert.equal(await store.revokeApiKey('key_1', first), true)
        assert.equal(await store.revokeApiKey('key_1', new Date('2026-12-02T09:00:00.000Z')), true)
        assert.deepEqual(await store.findApiKeyByHash(key.keyHash), asRecord(key, first))
        assert.deepEqual(await store.listApiKeys(), [asRecord(key, first)])
      })

      test('revokeApiKey returns false for an unknown id and changes nothing', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.createApiKey(key)
        assert.equal(await store.revokeApiKey('key_unknown', new Date()), false)
        assert.equal(await store.revokeApiKey(key.keyHash, new Date()), false) // a hash is not an id
        assert.deepEqual(await store.listApiKeys(), [asRecord(key)])
      })

      test('createApiKey rejects a duplicate key hash and keeps the first key', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.createApiKey(key)
        await assert.rejects(store.createApiKey(newKey('key_2', { keyHash: key.keyHash, plan: 'enterprise', perMinute: 1, perDay: 1 })))
        assert.deepEqual(await store.findApiKeyByHash(key.keyHash), asRecord(key))
        assert.deepEqual(await store.listApiKeys(), [asRecord(key)])
      })

      test('createApiKey rejects a duplicate id', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.createApiKey(key)
        await assert.rejects(store.createApiKey(newKey('key_1', { keyHash: 'another-hash' })))
        assert.equal(await store.findApiKeyByHash('another-hash'), null)
        assert.deepEqual(await store.listApiKeys(), [asRecord(key)])
      })
    })
  })
}
