/**
 * The stock ledger's event rows (holds, low stock; src/store/selling/types.ts) as the stock area reads them, on SQLite and
 * on PostgreSQL: the feed serves them only when asked for by type, in commit order among the stock changes, with pages
 * that stay full and positions that never skip or repeat; a pet's history never shows them. The rows are written with
 * SQL, as the selling area writes them.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { importData } from '../../src/domain/import.js'
import { CHANGE_TYPES, type ChangeType } from '../../src/model.js'
import type { FeedChange, FeedPosition } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'
import { holdEventSql, lowStockSql } from '../helpers/ledger-events.js'
import { requirePostgres } from '../helpers/postgres.js'
import { postgresHarness, sqliteHarness, threadedSqliteHarness, type Open } from './harness.js'
import { pet, stockChange } from './helpers.js'
import { newHold } from './selling.contract.js'

const HOLD = 'hold_AAAAAAAAAAAAAAAAAAAA'
const AT = new Date('2026-11-27T10:00:00.000Z')

/** Stock changes and events interleaved: what each row is, in commit order (a stock change by its reason). */
async function mixedLedger (t: TestContext, open: Open): Promise<{ store: Store, kinds: string[] }> {
  const { store, run } = await open(t)
  await importData(store, { pets: [pet(1n, { quantity: 10 }), pet(2n, { quantity: 5 })], orders: [] })
  await run(holdEventSql({ petId: 1, event: 'hold.placed', holdId: HOLD, reference: 'cart 7', quantity: 10, held: 3, at: AT }))
  assert.equal((await store.stock.setQuantity(stockChange(2n, 4, { reason: 'sale' }))).status, 'updated')
  await run(lowStockSql({ petId: 2, quantity: 4, reorderPoint: 4, at: AT }))
  await run(holdEventSql({ petId: 1, event: 'hold.confirmed', holdId: HOLD, reference: 'cart 7', quantity: 7, held: 0, at: AT }))
  await run(holdEventSql({ petId: 2, event: 'hold.expired', holdId: 'hold_BBBBBBBBBBBBBBBBBBBB', quantity: 4, held: 0, at: AT }))
  assert.equal((await store.stock.setQuantity(stockChange(1n, 8, { reason: 'arrival' }))).status, 'updated')
  return { store, kinds: ['import', 'import', 'hold.placed', 'sale', 'inventory.low_stock', 'hold.confirmed', 'hold.expired', 'arrival'] }
}

const kind = (change: FeedChange): string => change.event ?? change.reason

/** Every entry of `types`, `size` a page, each page starting after the last one's last entry. */
async function paged (store: Store, size: number, types?: readonly ChangeType[]): Promise<FeedChange[][]> {
  const pages: FeedChange[][] = []
  let after: FeedPosition | null = null
  for (;;) {
    const page: FeedChange[] = await store.stock.listChanges(after, size, types)
    if (page.length === 0) return pages
    pages.push(page)
    after = (page.at(-1) as FeedChange).position
  }
}

function ledgerEventsContract (name: string, open: Open): void {
  describe(`${name}: the ledger's events`, () => {
    test('when events are in the ledger, then listChanges without types serves the stock changes alone, in pages that stay full', async (t) => {
      const { store } = await mixedLedger(t, open)
      assert.deepEqual((await store.stock.listChanges(null, 100)).map(kind), ['import', 'import', 'sale', 'arrival'])
      const pages = await paged(store, 2)
      assert.deepEqual(pages.map((page) => page.map(kind)), [['import', 'import'], ['sale', 'arrival']], 'no page is short while stock changes follow')
    })

    test('when types are named, then their rows come in commit order among the others, and paging by the last position never skips or repeats one', async (t) => {
      const { store, kinds } = await mixedLedger(t, open)
      const all = await store.stock.listChanges(null, 100, CHANGE_TYPES)
      assert.deepEqual(all.map(kind), kinds)
      const ids = all.map((change) => change.id)
      for (const size of [1, 2, 3]) {
        assert.deepEqual((await paged(store, size, CHANGE_TYPES)).flat().map((change) => change.id), ids, `pages of ${size}`)
      }
      const holds: ChangeType[] = ['hold.confirmed', 'hold.placed', 'inventory.changed']
      const chosen = all.filter((change) => holds.includes(change.event ?? 'inventory.changed'))
      const pages = await paged(store, 2, holds)
      assert.deepEqual(pages.map((page) => page.map(kind)), [['import', 'import'], ['hold.placed', 'sale'], ['hold.confirmed', 'arrival']])
      assert.deepEqual(pages.flat().map((change) => change.id), chosen.map((change) => change.id))
      assert.deepEqual((await paged(store, 2, ['hold.expired'])).flat().map(kind), ['hold.expired'])
    })

    test('when an event is read, then it carries its own fields and none of a stock change\'s', async (t) => {
      const { store } = await mixedLedger(t, open)
      const events = await store.stock.listChanges(null, 100, ['hold.placed', 'inventory.low_stock'])
      const [placed, low] = events
      const place = (change: FeedChange | undefined) => ({ id: change?.id, position: change?.position, epoch: change?.epoch })
      assert.deepEqual(placed, {
        ...place(placed),
        event: 'hold.placed', petId: 1n, quantity: 10, reference: 'cart 7', holdId: HOLD, held: 3, reorderPoint: null, keyId: null, requestId: null,
        previousQuantity: null, reason: null, note: null, batchId: null, status: null, previousStatus: null, at: AT
      })
      assert.deepEqual(low, {
        ...place(low),
        event: 'inventory.low_stock', petId: 2n, quantity: 4, reference: null, holdId: null, held: null, reorderPoint: 4, keyId: null, requestId: null,
        previousQuantity: null, reason: null, note: null, batchId: null, status: null, previousStatus: null, at: AT
      })
    })

    test('when holds are placed, confirmed and released through the selling area, then the typed feed shows each with what is available after it', async (t) => {
      const { store } = await open(t)
      await importData(store, { pets: [pet(1n, { quantity: 10 }), pet(2n, { quantity: 4 })], orders: [] })
      const head = await store.stock.feedHead()
      const sold = await store.selling.placeHold(newHold([{ petId: 1n, quantity: 3 }, { petId: 2n, quantity: 1 }], { reference: 'cart 7' }))
      const kept = await store.selling.placeHold(newHold([{ petId: 1n, quantity: 2 }]))
      assert.ok(sold.status === 'placed' && kept.status === 'placed')
      const actor = { quotaId: 'quota_a', keyId: 'key_a', requestId: 'req-2', at: new Date(sold.hold.createdAt.getTime() + 1000), ofOrder: false }
      assert.equal((await store.selling.endHold({ ...actor, id: sold.hold.id, ending: 'confirmed' })).status, 'ended')
      assert.equal((await store.selling.endHold({ ...actor, id: kept.hold.id, ending: 'released' })).status, 'ended')
      const view = (change: FeedChange) => [kind(change), change.petId, change.quantity, change.held, change.holdId === sold.hold.id ? 'sold' : 'kept']
      assert.deepEqual((await store.stock.listChanges(head, 100, CHANGE_TYPES)).map(view), [
        ['hold.placed', 1n, 10, 3, 'sold'], ['hold.placed', 2n, 4, 1, 'sold'],
        ['hold.placed', 1n, 10, 5, 'kept'],
        ['sale', 1n, 7, null, 'sold'], ['hold.confirmed', 1n, 7, 2, 'sold'], ['sale', 2n, 3, null, 'sold'], ['hold.confirmed', 2n, 3, 0, 'sold'],
        ['hold.released', 1n, 7, 0, 'kept']
      ])
      assert.deepEqual((await store.stock.listChanges(head, 100)).map(kind), ['sale', 'sale'], 'without types: the sales alone')
    })

    test('when a pet\'s ledger holds events, then its history shows its stock changes only, and the newest `limit` of them', async (t) => {
      const { store } = await mixedLedger(t, open)
      assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((entry) => [entry.reason, entry.quantity]), [['import', 10], ['arrival', 8]])
      assert.deepEqual((await store.stock.stockHistory(2n, 10)).map((entry) => [entry.reason, entry.quantity]), [['import', 5], ['sale', 4]])
      assert.deepEqual((await store.stock.stockHistory(1n, 1)).map((entry) => entry.reason), ['arrival'], 'an event is not counted against the limit')
    })
  })
}

ledgerEventsContract('SqliteStore', sqliteHarness)
ledgerEventsContract('SqliteStore (writer thread)', threadedSqliteHarness)
if (await requirePostgres('PostgreSQL ledger events contract tests')) ledgerEventsContract('PostgresStore', postgresHarness)
