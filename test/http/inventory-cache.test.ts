/**
 * The listing cache on its own, over a store double that counts its calls: the bytes it serves are always what
 * the response schema serializes for the store's entries, it asks the store only when a change may have
 * happened (per freshness mechanism), a local change re-serializes one chunk, and a rebuild lets the event loop
 * run between chunks.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import fastJson from 'fast-json-stringify'
import { Type } from 'typebox'
import { InventoryItem as ItemSchema } from '../../src/domain/entities.js'
import type { InventoryItem, PetStatus, StockEntry } from '../../src/model.js'
import { ChangeWatch } from '../../src/changes/watch.js'
import { InventoryCache, LISTING_MAX_AGE_MS, type InventoryCacheOptions, type InventoryView } from '../../src/http/inventory-cache.js'
import { feedCursor } from '../../src/domain/feed.js'
import type { FeedPlace, InventoryPage } from '../../src/store/stock/types.js'

const serializeList = fastJson(Type.Array(ItemSchema))
const serialize = (items: InventoryItem[]): string => serializeList(items)
const STATUSES: PetStatus[] = ['available', 'pending', 'sold']

/** A store double: entries by petId, a version and the feed's last change, with call counts. */
class FakeStore {
  readonly entries = new Map<bigint, InventoryItem>()
  version = 1n
  head: FeedPlace = { order: 0n, id: 1n, epoch: '00000000000000aa' }
  calls = { version: 0, pages: 0 }
  other = false

  constructor (count: number, step = 3n) {
    for (let i = 0; i < count; i++) {
      const petId = BigInt(i) * step - 50n
      this.entries.set(petId, { petId, quantity: i % 17, status: STATUSES[i % 3] as PetStatus })
    }
  }

  sorted (): InventoryItem[] {
    return [...this.entries.values()].sort((a, b) => (a.petId < b.petId ? -1 : a.petId > b.petId ? 1 : 0))
  }

  /** A change as the store makes it: the entry, the version after it and its place in the feed. */
  change (petId: bigint, quantity: number): { entry: StockEntry, version: bigint, feed: FeedPlace } {
    const current = this.entries.get(petId)
    assert.ok(current !== undefined)
    const item = { ...current, quantity }
    this.entries.set(petId, item)
    this.version++
    this.head = { ...this.head, id: this.head.id + 1n }
    return { entry: { ...item, revision: 1n }, version: this.version, feed: this.head }
  }

  async inventoryVersion (): Promise<bigint> {
    this.calls.version++
    return this.version
  }

  async * inventoryPages (size: number): AsyncGenerator<InventoryPage> {
    this.calls.pages++
    const version = this.version
    const feed = this.head
    const items = this.sorted()
    for (let i = 0; i < items.length || i === 0; i += size) yield { version, feed, items: items.slice(i, i + size) }
  }
}

function cache (t: TestContext, store: FakeStore, options: Partial<InventoryCacheOptions> & { local?: boolean } = {}): InventoryCache {
  const { local = false, ...rest } = options
  const storeView: InventoryCacheOptions['store'] = {
    stock: {
      inventoryVersion: () => store.inventoryVersion(),
      inventoryPages: (size) => store.inventoryPages(size)
    }
  }
  if (local) {
    storeView.stock.changedElsewhere = () => {
      const changed = store.other
      store.other = false
      return changed
    }
  }
  const created = new InventoryCache({ store: storeView, serialize, chunkSize: 7, ...rest })
  t.after(() => { created.close() })
  return created
}

const bytes = (view: InventoryView): Buffer => Buffer.isBuffer(view.body) ? view.body : Buffer.concat(view.body)

async function assertServes (listing: InventoryCache, store: FakeStore): Promise<InventoryView> {
  const view = await listing.current()
  const body = bytes(view)
  assert.equal(body.toString(), serialize(store.sorted()))
  assert.equal(view.length, body.length)
  assert.equal(view.etag, `"inv-${store.version}"`)
  assert.equal(view.feed, feedCursor(store.head), 'the feed cursor of the last change in the listing')
  return view
}

describe('InventoryCache', () => {
  test('when this process changes entries, then each change re-serializes its chunk, the bytes stay what the schema serializes and the feed cursor moves to the change', async (t) => {
    const store = new FakeStore(50)
    const listing = cache(t, store, { local: true })
    await assertServes(listing, store)
    const ids = [...store.entries.keys()]
    for (let i = 0; i < 40; i++) {
      const { entry, version, feed } = store.change(ids[(i * 13) % ids.length] as bigint, 1_000_000_000 - i)
      listing.applied(entry, version, feed)
      await assertServes(listing, store)
    }
    assert.deepEqual(store.calls, { version: 1, pages: 1 }, 'one build, then no store call at all')
  })

  test('when a change does not follow the cached version, then the next read checks the store and rebuilds', async (t) => {
    const store = new FakeStore(20)
    const listing = cache(t, store, { local: true })
    await listing.current()
    const ids = [...store.entries.keys()]
    store.change(ids[1] as bigint, 5)
    const { entry, version, feed } = store.change(ids[2] as bigint, 6)
    listing.applied(entry, version, feed)
    await assertServes(listing, store)
    assert.deepEqual(store.calls, { version: 2, pages: 2 })
  })

  test('when the changed entry is not in the listing, then the next read rebuilds', async (t) => {
    const store = new FakeStore(20)
    const listing = cache(t, store, { local: true })
    await listing.current()
    store.entries.set(1000n, { petId: 1000n, quantity: 1, status: 'sold' })
    const { entry, version, feed } = store.change(1000n, 2)
    listing.applied(entry, version, feed)
    await assertServes(listing, store)
    assert.equal(store.calls.pages, 2)
  })

  test('local: another process\'s commit is noticed by the timer, never by a request, and read once', async (t) => {
    const store = new FakeStore(10)
    const listing = cache(t, store, { local: true, pollMs: 10 })
    await listing.current()
    for (let i = 0; i < 5; i++) await listing.current()
    assert.deepEqual(store.calls, { version: 1, pages: 1 })
    store.change([...store.entries.keys()][3] as bigint, 77)
    store.other = true
    await sleep(60)
    await assertServes(listing, store)
    await listing.current()
    assert.deepEqual(store.calls, { version: 2, pages: 2 })
  })

  test('signal: the store is checked once per new change count, and on every read while the count is unknown', async (t) => {
    const store = new FakeStore(10)
    const watch = new ChangeWatch()
    const listing = cache(t, store, { watch })
    watch.observe(4)
    await listing.current()
    for (let i = 0; i < 5; i++) await listing.current()
    assert.deepEqual(store.calls, { version: 1, pages: 1 }, 'same count: no store call')

    store.change([...store.entries.keys()][0] as bigint, 9)
    watch.observe(5)
    await assertServes(listing, store)
    await listing.current()
    assert.deepEqual(store.calls, { version: 2, pages: 2 }, 'a new count: one check, one rebuild')

    watch.observe(undefined)
    await listing.current()
    await listing.current()
    assert.equal(store.calls.version, 4, 'no count (the shared limiter is away): every read checks')
    watch.observe(5)
    await listing.current()
    await listing.current()
    assert.equal(store.calls.version, 5, 'the count is back: one check (it may have missed changes meanwhile), then none')
    assert.equal(store.calls.pages, 2, 'nothing changed: no rebuild')
  })

  test('signal: a lower count (the counter was lost and started again) is a gap, so the listing checks the store', async (t) => {
    const store = new FakeStore(5)
    const watch = new ChangeWatch()
    const listing = cache(t, store, { watch })
    watch.observe(7)
    await listing.current()
    assert.equal(store.calls.version, 1)
    // Decisions reach the watch in the order they were sent (one connection answers in order): lower means lost.
    watch.observe(6)
    assert.deepEqual(watch.mark, { latest: 6, gaps: 1 })
    store.change([...store.entries.keys()][0] as bigint, 2)
    await assertServes(listing, store)
    assert.equal(store.calls.version, 2, 'checked once')
    watch.observe(7)
    await listing.current()
    assert.equal(store.calls.version, 3, 'a count back at the old value is a new count, not the old one')
  })

  test('signal without local: the store is checked again after LISTING_MAX_AGE_MS even when the count stands still', async (t) => {
    const store = new FakeStore(5)
    const watch = new ChangeWatch()
    const clock = { now: 1_000_000 }
    const listing = cache(t, store, { watch, clock: () => clock.now })
    watch.observe(1)
    await listing.current()
    clock.now += LISTING_MAX_AGE_MS - 1
    await listing.current()
    assert.equal(store.calls.version, 1)
    clock.now += 2
    await listing.current()
    assert.equal(store.calls.version, 2)
  })

  test('poll (no signal, no local check): every read asks the store for its version, and rebuilds only on a change', async (t) => {
    const store = new FakeStore(5)
    const listing = cache(t, store)
    assert.equal(listing.freshness, 'poll')
    for (let i = 0; i < 4; i++) await listing.current()
    assert.deepEqual(store.calls, { version: 4, pages: 1 })
    store.change([...store.entries.keys()][4] as bigint, 3)
    await assertServes(listing, store)
    assert.deepEqual(store.calls, { version: 5, pages: 2 })
  })

  test('concurrent reads while the listing is built share one build', async (t) => {
    const store = new FakeStore(100)
    const listing = cache(t, store)
    const views = await Promise.all(Array.from({ length: 10 }, () => listing.current()))
    assert.equal(store.calls.pages, 1)
    assert.ok(views.every((view) => bytes(view).equals(bytes(views[0] as InventoryView))))
  })

  test('a rebuild lets other work run between chunks', async (t) => {
    const store = new FakeStore(2000)
    const listing = cache(t, store, { chunkSize: 100 })
    let turns = 0
    let building = true
    const tick = (): void => {
      turns++
      if (building) setImmediate(tick)
    }
    setImmediate(tick)
    await listing.current()
    building = false
    assert.ok(turns >= 10, `the event loop turned ${turns} times during a 20-chunk build`)
  })

  test('a listing above 64 KiB is sent as its chunks\' buffers, never copied into one', async (t) => {
    const store = new FakeStore(5000)
    const listing = cache(t, store, { chunkSize: 512 })
    const view = await assertServes(listing, store)
    assert.ok(Array.isArray(view.body))
    assert.ok(view.length > 64 * 1024)
  })

  test('an empty listing is []', async (t) => {
    const store = new FakeStore(0)
    const view = await assertServes(cache(t, store), store)
    assert.equal(bytes(view).toString(), '[]')
  })

  test('pages follow petId order across chunk boundaries and say whether more follow', async (t) => {
    const store = new FakeStore(30)
    const listing = cache(t, store, { local: true })
    const all = store.sorted()
    const seen: InventoryItem[] = []
    let after: bigint | null = null
    for (;;) {
      const page = await listing.page(after, 4)
      const items = JSON.parse(page.body.toString()) as Array<{ petId: number, quantity: number, status: PetStatus }>
      seen.push(...items.map((item) => ({ ...item, petId: BigInt(item.petId) })))
      if (!page.more) break
      after = page.last
    }
    assert.deepEqual(seen, all)
    const fromMiddle = await listing.page((all[10] as InventoryItem).petId + 1n, 2)
    assert.deepEqual(JSON.parse(fromMiddle.body.toString()).map((item: { petId: number }) => BigInt(item.petId)), [all[11]?.petId, all[12]?.petId])
    const pastEnd = await listing.page((all.at(-1) as InventoryItem).petId, 5)
    assert.deepEqual([pastEnd.body.toString(), pastEnd.more, pastEnd.last], ['[]', false, null])
  })
})
