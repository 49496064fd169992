/**
 * The selling contract (src/store/selling/types.ts): holds, their expiry, caps, sales, API orders, their idempotency
 * records and ledger rows, the same on every store. Each runner calls sellingContract() with a harness (./harness.ts)
 * that opens a fresh, migrated, empty store for one test; every test makes its own data.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import type { Hold, HoldLine } from '../../src/model.js'
import { importData } from '../../src/domain/import.js'
import { holdFromText, holdText, orderFromText, orderText } from '../../src/store/selling/rows.js'
import type { EndHold, ExtendHold, NewHold, OrderTransition, PlaceHoldResult } from '../../src/store/selling/types.js'
import type { Store } from '../../src/store/store.js'
import type { Open } from './harness.js'
import { ABOVE_2_53, INT64_MAX, INT64_MIN, order, pet, stockChange } from './helpers.js'

/** The instant the tests' writes happen at, and instants around it. */
export const AT = new Date('2026-11-27T12:00:00.000Z')
const later = (ms: number): Date => new Date(AT.getTime() + ms)
const MINUTE = 60_000

const holdId = (): string => `hold_${randomBytes(15).toString('base64url')}`

/** A hold as a checkout places it: 15 minutes, generous caps, quota_a's key, with overrides. */
export function newHold (lines: HoldLine[], overrides: Partial<NewHold> = {}): NewHold {
  return {
    id: holdId(),
    lines,
    reference: null,
    expiresAt: later(15 * MINUTE),
    caps: { activeHolds: 1000, heldUnits: 100_000 },
    quotaId: 'quota_a',
    keyId: 'key_a',
    requestId: 'req-1',
    at: AT,
    ...overrides
  }
}

const line = (petId: bigint, quantity: number): HoldLine => ({ petId, quantity })
const ending = (id: string, how: 'confirmed' | 'released', overrides: Partial<EndHold> = {}): EndHold =>
  ({ id, ending: how, ofOrder: false, quotaId: 'quota_a', keyId: 'key_a', requestId: 'req-2', at: later(MINUTE), ...overrides })
const extension = (id: string, expiresAt: Date, overrides: Partial<ExtendHold> = {}): ExtendHold =>
  ({ id, expiresAt, quotaId: 'quota_a', keyId: 'key_a', requestId: 'req-3', at: later(MINUTE), ...overrides })
const move = (orderId: bigint, to: OrderTransition['to'], overrides: Partial<OrderTransition> = {}): OrderTransition =>
  ({ orderId, to, quotaId: 'quota_a', keyId: 'key_a', requestId: 'req-4', at: later(MINUTE), ...overrides })
const claim = (key: string, fingerprint = `fp-${key}`) => ({ scope: 'key_a', key, fingerprint, expiresAt: later(24 * 60 * MINUTE) })

/** Pets with stock entries of the given quantities. */
async function stocked (store: Store, entries: Array<[bigint, number]>): Promise<void> {
  await importData(store, { pets: entries.map(([id, quantity]) => pet(id, { quantity })), orders: [] }, { at: new Date(AT.getTime() - MINUTE) })
}

/** The granted hold of a placement that must be granted. */
function placed (result: PlaceHoldResult): Hold {
  if (result.status !== 'placed') assert.fail(`expected placed, got ${JSON.stringify(result, (_k, v: unknown) => typeof v === 'bigint' ? String(v) : v)}`)
  return result.hold
}

/** What is held and available of one pet at `at`. */
async function availability (store: Store, petId: bigint, at: Date = AT): Promise<{ onHand: number, held: number, available: number } | undefined> {
  const [one] = await store.selling.availability([petId], at)
  return one === undefined ? undefined : { onHand: one.onHand, held: one.held, available: one.available }
}

/** The ledger rows of a pet as stored, oldest first, integers as numbers. */
async function ledgerOf (rows: (sql: string) => Promise<Array<Record<string, unknown>>>, petId: bigint) {
  const found = await rows(`SELECT id, previous_quantity, quantity, reason, reference, event, hold_id, held, key_id, request_id
    FROM stock_ledger WHERE pet_id = ${petId} ORDER BY id`)
  const n = (value: unknown): number | null => value === null || value === undefined ? null : Number(value)
  return found.map((row) => ({
    id: n(row.id),
    previousQuantity: n(row.previous_quantity),
    quantity: n(row.quantity),
    reason: row.reason,
    reference: row.reference,
    event: row.event,
    holdId: row.hold_id,
    held: n(row.held),
    keyId: row.key_id,
    requestId: row.request_id
  }))
}

export function sellingContract (name: string, open: Open): void {
  describe(`${name}: selling`, () => {
    describe('holds', () => {
      test('a granted hold is stored as placed, ordered by pet, and counts against what is available', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[2n, 5], [ABOVE_2_53, 3]])
        const hold = placed(await store.selling.placeHold(newHold([line(ABOVE_2_53, 2), line(2n, 1)], { reference: 'cart-1' })))
        assert.deepEqual({ ...hold, id: '' }, {
          id: '',
          state: 'active',
          lines: [line(2n, 1), line(ABOVE_2_53, 2)],
          reference: 'cart-1',
          quotaId: 'quota_a',
          keyId: 'key_a',
          createdAt: AT,
          expiresAt: later(15 * MINUTE),
          endedAt: null,
          orderId: null
        })
        assert.deepEqual(await store.selling.getHold(hold.id), hold)
        assert.deepEqual(await store.selling.availability([ABOVE_2_53, 2n, 77n], AT), [
          { petId: 2n, onHand: 5, held: 1, available: 4 },
          { petId: ABOVE_2_53, onHand: 3, held: 2, available: 1 }
        ])
        assert.deepEqual(await store.selling.availabilityAll(AT), await store.selling.availability([2n, ABOVE_2_53], AT))
        assert.equal(await store.selling.getHold('hold_unknown'), null)
      })

      test('the listing with availability is read a page at a time, with each pet\'s status, counting holds at the instant', async (t) => {
        const { store } = await open(t)
        await importData(store, {
          pets: [pet(1n, { quantity: 4 }), pet(2n, { quantity: 1, status: 'pending' }), pet(ABOVE_2_53, { quantity: 6, status: 'sold' })], orders: []
        }, { at: new Date(AT.getTime() - MINUTE) })
        placed(await store.selling.placeHold(newHold([line(1n, 3), line(ABOVE_2_53, 2)], { expiresAt: later(MINUTE) })))
        const all = [
          { petId: 1n, status: 'available', onHand: 4, held: 3, available: 1 },
          { petId: 2n, status: 'pending', onHand: 1, held: 0, available: 1 },
          { petId: ABOVE_2_53, status: 'sold', onHand: 6, held: 2, available: 4 }
        ]
        assert.deepEqual(await store.selling.availableEntries(null, null, AT), all)
        assert.deepEqual(await store.selling.availableEntries(null, 2, AT), all.slice(0, 2))
        assert.deepEqual(await store.selling.availableEntries(2n, 2, AT), all.slice(2))
        assert.deepEqual(await store.selling.availableEntries(ABOVE_2_53, 2, AT), [])
        assert.deepEqual((await store.selling.availableEntries(null, null, later(MINUTE))).map((entry) => entry.held), [0, 0, 0], 'expired at the instant')
      })

      test('pets at the int64 edges are held and read back exactly', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[INT64_MIN, 2], [INT64_MAX, 3]])
        const hold = placed(await store.selling.placeHold(newHold([line(INT64_MAX, 1), line(INT64_MIN, 2)])))
        assert.deepEqual(hold.lines, [line(INT64_MIN, 2), line(INT64_MAX, 1)])
        assert.deepEqual(await store.selling.availability([INT64_MAX, INT64_MIN], AT), [
          { petId: INT64_MIN, onHand: 2, held: 2, available: 0 },
          { petId: INT64_MAX, onHand: 3, held: 1, available: 2 }
        ])
        assert.deepEqual((await store.selling.listHolds({ at: AT, after: null, limit: 10, petId: INT64_MIN })).map((listed) => listed.id), [hold.id])
      })

      test('a hold asking for more than is available is refused whole, with every short line and what is available of it', async (t) => {
        const { store, count } = await open(t)
        await stocked(store, [[1n, 3], [2n, 1], [3n, 10]])
        placed(await store.selling.placeHold(newHold([line(1n, 2)])))
        const ledger = await count('stock_ledger')
        const result = await store.selling.placeHold(newHold([line(1n, 2), line(2n, 2), line(3n, 10)]))
        assert.deepEqual(result, { status: 'insufficient', shortages: [{ petId: 1n, requested: 2, available: 1 }, { petId: 2n, requested: 2, available: 1 }] })
        assert.deepEqual(await availability(store, 3n), { onHand: 10, held: 0, available: 10 }, 'all or none: the line that fitted holds nothing')
        assert.equal(await count('holds'), 1)
        assert.equal(await count('stock_ledger'), ledger, 'a refusal writes no ledger row')
      })

      test('a hold on a pet without a stock entry is refused not_found and holds nothing', async (t) => {
        const { store, count } = await open(t)
        await stocked(store, [[1n, 3]])
        assert.deepEqual(await store.selling.placeHold(newHold([line(1n, 1), line(INT64_MAX, 1)])), { status: 'not_found', petId: INT64_MAX })
        assert.equal(await count('holds'), 0)
        assert.deepEqual(await availability(store, 1n), { onHand: 3, held: 0, available: 3 })
      })

      test('a hold stops counting at the instant it expires, before anything records it; a placement that counts on it records it', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 4]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 4)], { expiresAt: later(MINUTE) })))
        assert.deepEqual(await availability(store, 1n, later(MINUTE - 1)), { onHand: 4, held: 4, available: 0 })
        assert.deepEqual(await availability(store, 1n, later(MINUTE)), { onHand: 4, held: 0, available: 4 })
        assert.equal((await store.selling.getHold(hold.id))?.state, 'active', 'reads record nothing')
        assert.equal((await store.selling.placeHold(newHold([line(1n, 1)], { at: later(MINUTE - 1) }))).status, 'insufficient')
        placed(await store.selling.placeHold(newHold([line(1n, 4)], { at: later(MINUTE), expiresAt: later(2 * MINUTE) })))
        assert.equal((await store.selling.getHold(hold.id))?.state, 'expired', 'recorded by the placement that counts its units as free')
      })

      test('what is available is never below 0 when on hand was set below what is held', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        placed(await store.selling.placeHold(newHold([line(1n, 4)])))
        await store.stock.setQuantity(stockChange(1n, 1, { at: AT }))
        assert.deepEqual(await availability(store, 1n), { onHand: 1, held: 4, available: 0 })
      })

      test('a placement writes one hold.placed row per pet outside its chain, and moves no entry, revision or version', async (t) => {
        const { store, rows } = await open(t)
        await stocked(store, [[1n, 5], [2n, 7]])
        placed(await store.selling.placeHold(newHold([line(1n, 1)])))
        const before = { entries: [await store.stock.getStockEntry(1n), await store.stock.getStockEntry(2n)], version: await store.stock.inventoryVersion() }
        // SQLite chains each pet's stock changes (inventory.ledger_head, stock_ledger.previous_id): events stay out of it.
        const chain = store.kind === 'sqlite' ? 'SELECT pet_id, ledger_head FROM inventory ORDER BY pet_id' : 'SELECT 1'
        const heads = await rows(chain)
        const history = await store.stock.stockHistory(1n, 100)
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 2), line(2n, 3)], { reference: 'cart-9' })))
        assert.deepEqual({ entries: [await store.stock.getStockEntry(1n), await store.stock.getStockEntry(2n)], version: await store.stock.inventoryVersion() }, before)
        assert.deepEqual(await rows(chain), heads)
        if (store.kind === 'sqlite') assert.deepEqual(await rows(`SELECT previous_id FROM stock_ledger WHERE hold_id = '${hold.id}'`), [{ previous_id: null }, { previous_id: null }])
        assert.deepEqual(await store.stock.stockHistory(1n, 100), history, 'history shows stock changes only')
        const events = (await ledgerOf(rows, 1n)).filter((row) => row.holdId === hold.id)
        assert.deepEqual(events.map(({ id: _id, ...row }) => row), [{
          previousQuantity: null, quantity: 5, reason: null, reference: 'cart-9', event: 'hold.placed', holdId: hold.id, held: 3,
          keyId: 'key_a', requestId: 'req-1'
        }])
        assert.deepEqual((await ledgerOf(rows, 2n)).filter((row) => row.holdId === hold.id).map((row) => [row.event, row.quantity, row.held]),
          [['hold.placed', 7, 3]])
      })
    })

    describe('caps', () => {
      test('a quota at its cap on active holds is refused limit_reached; expired and ended holds do not count, other quotas are apart', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 100]])
        const caps = { activeHolds: 2, heldUnits: 1000 }
        const first = placed(await store.selling.placeHold(newHold([line(1n, 1)], { caps, expiresAt: later(MINUTE) })))
        placed(await store.selling.placeHold(newHold([line(1n, 1)], { caps })))
        assert.deepEqual(await store.selling.placeHold(newHold([line(1n, 1)], { caps })), { status: 'limit_reached', cap: 'activeHolds', current: 2, max: 2 })
        placed(await store.selling.placeHold(newHold([line(1n, 1)], { caps, quotaId: 'quota_b' })))
        placed(await store.selling.placeHold(newHold([line(1n, 1)], { caps, at: later(MINUTE) })))
        assert.equal(first.expiresAt?.getTime(), later(MINUTE).getTime())
      })

      test('a hold that would take the quota past its held units is refused limit_reached with the units it holds', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 100], [2n, 100]])
        const caps = { activeHolds: 10, heldUnits: 10 }
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 4), line(2n, 4)], { caps })))
        assert.deepEqual(await store.selling.placeHold(newHold([line(1n, 3)], { caps })), { status: 'limit_reached', cap: 'heldUnits', current: 8, max: 10 })
        placed(await store.selling.placeHold(newHold([line(1n, 2)], { caps })))
        assert.equal((await store.selling.endHold(ending(hold.id, 'released', { at: AT }))).status, 'ended')
        placed(await store.selling.placeHold(newHold([line(2n, 8)], { caps })))
      })
    })

    describe('ending a hold', () => {
      test('a confirmation sells the held units: a sale per pet in its chain, then hold.confirmed, the entries and the version moved', async (t) => {
        const { store, rows } = await open(t)
        await stocked(store, [[1n, 5], [2n, 3]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 2), line(2n, 3)], { reference: 'order-7' })))
        const version = await store.stock.inventoryVersion()
        const revisions = [(await store.stock.getStockEntry(1n))?.revision ?? 0n, (await store.stock.getStockEntry(2n))?.revision ?? 0n]
        const result = await store.selling.endHold(ending(hold.id, 'confirmed'))
        if (result.status !== 'ended') assert.fail(result.status)
        assert.deepEqual(result.hold, { ...hold, state: 'confirmed', endedAt: later(MINUTE) })
        assert.deepEqual(result.entries, [
          { petId: 1n, quantity: 3, status: 'available', revision: (revisions[0] ?? 0n) + 1n },
          { petId: 2n, quantity: 0, status: 'available', revision: (revisions[1] ?? 0n) + 1n }
        ])
        assert.deepEqual(result.entries, [await store.stock.getStockEntry(1n), await store.stock.getStockEntry(2n)])
        assert.ok(await store.stock.inventoryVersion() > version, 'the listing learns of the sale')
        if (result.version !== undefined) assert.equal(result.version, await store.stock.inventoryVersion())
        assert.deepEqual(await availability(store, 1n, later(MINUTE)), { onHand: 3, held: 0, available: 3 })
        const ledger = (await ledgerOf(rows, 1n)).filter((row) => row.holdId === hold.id)
        assert.deepEqual(ledger.map(({ id: _id, ...row }) => row), [
          { previousQuantity: null, quantity: 5, reason: null, reference: 'order-7', event: 'hold.placed', holdId: hold.id, held: 2, keyId: 'key_a', requestId: 'req-1' },
          { previousQuantity: 5, quantity: 3, reason: 'sale', reference: 'order-7', event: null, holdId: hold.id, held: null, keyId: 'key_a', requestId: 'req-2' },
          { previousQuantity: null, quantity: 3, reason: null, reference: 'order-7', event: 'hold.confirmed', holdId: hold.id, held: 0, keyId: 'key_a', requestId: 'req-2' }
        ])
        const history = await store.stock.stockHistory(1n, 100)
        assert.deepEqual(history.map((entry) => [entry.reason, entry.previousQuantity, entry.quantity, entry.reference]),
          [['import', null, 5, null], ['sale', 5, 3, 'order-7']], 'history: the stock changes, the sale with its reference')
        if (store.kind === 'sqlite') {
          // The sale joins the pet's chain: its head, linked to the change before it; the events stay out.
          const [head] = await rows('SELECT ledger_head FROM inventory WHERE pet_id = 1')
          assert.equal(Number(head?.ledger_head), ledger[1]?.id)
          const [sale] = await rows(`SELECT previous_id FROM stock_ledger WHERE id = ${ledger[1]?.id ?? 0}`)
          assert.equal(Number(sale?.previous_id), history[0]?.id === undefined ? NaN : Number(history[0].id))
        }
        assert.deepEqual(await store.selling.endHold(ending(hold.id, 'confirmed')), { status: 'not_active', hold: result.hold })
        assert.deepEqual(await store.selling.endHold(ending(hold.id, 'released')), { status: 'not_active', hold: result.hold })
      })

      test('a release gives the units back, writes hold.released rows and changes no stock', async (t) => {
        const { store, rows } = await open(t)
        await stocked(store, [[1n, 5]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 5)])))
        const entry = await store.stock.getStockEntry(1n)
        const version = await store.stock.inventoryVersion()
        const result = await store.selling.endHold(ending(hold.id, 'released'))
        assert.deepEqual(result, { status: 'ended', hold: { ...hold, state: 'released', endedAt: later(MINUTE) }, entries: [], ...('feed' in result ? { feed: result.feed } : {}) })
        assert.deepEqual(await store.stock.getStockEntry(1n), entry)
        assert.equal(await store.stock.inventoryVersion(), version)
        assert.deepEqual(await availability(store, 1n, later(MINUTE)), { onHand: 5, held: 0, available: 5 })
        assert.deepEqual((await ledgerOf(rows, 1n)).filter((row) => row.holdId === hold.id).map((row) => [row.event, row.quantity, row.held, row.reason]),
          [['hold.placed', 5, 5, null], ['hold.released', 5, 0, null]])
      })

      test('ending or extending a hold past its expiry records it expired (hold.expired rows) and answers not_active', async (t) => {
        const { store, rows } = await open(t)
        await stocked(store, [[1n, 5]])
        const a = placed(await store.selling.placeHold(newHold([line(1n, 1)], { expiresAt: later(MINUTE) })))
        const b = placed(await store.selling.placeHold(newHold([line(1n, 1)], { expiresAt: later(MINUTE) })))
        const expiredA = { ...a, state: 'expired' as const, endedAt: later(MINUTE) }
        assert.deepEqual(await store.selling.endHold(ending(a.id, 'confirmed', { at: later(MINUTE) })), { status: 'not_active', hold: expiredA })
        assert.deepEqual(await store.selling.getHold(a.id), expiredA)
        assert.deepEqual(await store.selling.extendHold(extension(b.id, later(10 * MINUTE), { at: later(2 * MINUTE) })),
          { status: 'not_active', hold: { ...b, state: 'expired', endedAt: later(MINUTE) } })
        assert.deepEqual(await store.stock.getStockEntry(1n).then((entry) => entry?.quantity), 5, 'nothing sold')
        assert.deepEqual((await ledgerOf(rows, 1n)).filter((row) => row.event === 'hold.expired').map((row) => [row.holdId, row.quantity, row.held]),
          [[a.id, 5, 0], [b.id, 5, 0]])
        assert.deepEqual(await store.selling.endHold(ending(a.id, 'released', { at: later(3 * MINUTE) })), { status: 'not_active', hold: expiredA })
        assert.equal((await ledgerOf(rows, 1n)).filter((row) => row.event === 'hold.expired').length, 2, 'recorded once')
      })

      test('a placement records the lapsed holds whose units it counts as free: a write that read its instant before they lapsed finds them expired', async (t) => {
        const { store, rows } = await open(t)
        await stocked(store, [[1n, 2], [2n, 1], [3n, 1], [4n, 1]])
        // A lapses at AT + 1 min; B, placed at AT + 2 min, counts A's units as free, takes them and is sold. A
        // confirmation or extension of A whose instant was read at AT + 30 s, before A lapsed, but which reaches the
        // store only now (it waited for a lock or a connection), must neither sell A nor revive it.
        const a = placed(await store.selling.placeHold(newHold([line(1n, 2)], { expiresAt: later(MINUTE) })))
        const b = placed(await store.selling.placeHold(newHold([line(1n, 1)], { at: later(2 * MINUTE), expiresAt: later(20 * MINUTE) })))
        const c = placed(await store.selling.placeHold(newHold([line(1n, 1)], { at: later(2 * MINUTE), expiresAt: later(20 * MINUTE) })))
        const expiredA = { ...a, state: 'expired' as const, endedAt: later(MINUTE) }
        assert.deepEqual(await store.selling.getHold(a.id), expiredA, 'recorded by the placement that counted on it')
        assert.deepEqual((await ledgerOf(rows, 1n)).filter((row) => row.event !== null).map((row) => [row.event, row.holdId]),
          [['hold.placed', a.id], ['hold.expired', a.id], ['hold.placed', b.id], ['hold.placed', c.id]])
        assert.equal((await store.selling.endHold(ending(b.id, 'confirmed', { at: later(3 * MINUTE) }))).status, 'ended')
        assert.deepEqual(await store.selling.extendHold(extension(a.id, later(10 * MINUTE), { at: later(30_000) })), { status: 'not_active', hold: expiredA })
        assert.deepEqual(await store.selling.endHold(ending(a.id, 'confirmed', { at: later(30_000) })), { status: 'not_active', hold: expiredA })
        assert.equal((await store.selling.endHold(ending(c.id, 'confirmed', { at: later(3 * MINUTE) }))).status, 'ended', 'C, granted, is honoured')
        assert.deepEqual(await availability(store, 1n, later(3 * MINUTE)), { onHand: 0, held: 0, available: 0 })

        // The same when the placement that counted on it is an order, delivered before the late confirmation.
        const d = placed(await store.selling.placeHold(newHold([line(2n, 1)], { expiresAt: later(MINUTE) })))
        const ordered = await store.selling.placeHold(newHold([line(2n, 1)], { at: later(2 * MINUTE), expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } }))
        if (ordered.status !== 'placed' || ordered.order === undefined) assert.fail(ordered.status)
        assert.equal((await store.selling.moveOrder(move(ordered.order.id, 'delivered', { at: later(3 * MINUTE) }))).status, 'moved')
        assert.equal((await store.selling.endHold(ending(d.id, 'confirmed', { at: later(30_000) }))).status, 'not_active')
        assert.deepEqual(await availability(store, 2n, later(3 * MINUTE)), { onHand: 0, held: 0, available: 0 })

        // A placement on other pets records nothing: E on pet 3 is still confirmed at its own instant.
        const e = placed(await store.selling.placeHold(newHold([line(3n, 1)], { expiresAt: later(MINUTE) })))
        placed(await store.selling.placeHold(newHold([line(4n, 1)], { at: later(2 * MINUTE) })))
        const confirmed = await store.selling.endHold(ending(e.id, 'confirmed', { at: later(30_000) }))
        assert.equal(confirmed.status, 'ended')
        assert.deepEqual(confirmed.status === 'ended' ? confirmed.hold.endedAt : null, later(30_000))
      })

      test('a confirmation of a pet set below its line is refused insufficient with what is on hand, and the hold stays active', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5], [2n, 5]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 3), line(2n, 2)])))
        await store.stock.setQuantity(stockChange(1n, 2, { at: AT }))
        const entries = [await store.stock.getStockEntry(1n), await store.stock.getStockEntry(2n)]
        assert.deepEqual(await store.selling.endHold(ending(hold.id, 'confirmed')), { status: 'insufficient', shortages: [{ petId: 1n, requested: 3, available: 2 }] })
        assert.deepEqual([await store.stock.getStockEntry(1n), await store.stock.getStockEntry(2n)], entries)
        assert.deepEqual(await store.selling.getHold(hold.id), hold)
        await store.stock.setQuantity(stockChange(1n, 3, { at: AT }))
        assert.equal((await store.selling.endHold(ending(hold.id, 'confirmed'))).status, 'ended')
        assert.equal((await store.stock.getStockEntry(1n))?.quantity, 0)
      })

      test('an unknown hold is not_found for every write', async (t) => {
        const { store } = await open(t)
        assert.deepEqual(await store.selling.endHold(ending('hold_none', 'confirmed')), { status: 'not_found' })
        assert.deepEqual(await store.selling.extendHold(extension('hold_none', later(5 * MINUTE))), { status: 'not_found' })
        assert.deepEqual(await store.selling.moveOrder(move(42n, 'approved')), { status: 'not_found' })
      })

      test('an extension moves the expiry of the hold and its lines: it counts until the new one', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 2]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 2)], { expiresAt: later(2 * MINUTE) })))
        assert.deepEqual(await store.selling.extendHold(extension(hold.id, later(30 * MINUTE))),
          { status: 'extended', hold: { ...hold, expiresAt: later(30 * MINUTE) } })
        assert.deepEqual(await availability(store, 1n, later(20 * MINUTE)), { onHand: 2, held: 2, available: 0 })
        assert.deepEqual(await availability(store, 1n, later(30 * MINUTE)), { onHand: 2, held: 0, available: 2 })
      })
    })

    describe('listing, expiring and purging holds', () => {
      test('holds list by pet, reference and state at the instant, oldest first, after a place', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 50], [2n, 50]])
        const a = placed(await store.selling.placeHold(newHold([line(1n, 1)], { reference: 'r', expiresAt: later(MINUTE) })))
        const b = placed(await store.selling.placeHold(newHold([line(1n, 1), line(2n, 1)], { at: later(1) })))
        const c = placed(await store.selling.placeHold(newHold([line(2n, 1)], { reference: 'r', at: later(2) })))
        await store.selling.endHold(ending(c.id, 'released', { at: later(3) }))
        const ids = async (query: Partial<Parameters<Store['selling']['listHolds']>[0]>) =>
          (await store.selling.listHolds({ at: later(2 * MINUTE), after: null, limit: 10, ...query })).map((hold) => hold.id)
        assert.deepEqual(await ids({}), [a.id, b.id, c.id])
        assert.deepEqual(await ids({ petId: 1n }), [a.id, b.id])
        assert.deepEqual(await ids({ petId: 2n }), [b.id, c.id])
        assert.deepEqual(await ids({ reference: 'r' }), [a.id, c.id])
        assert.deepEqual(await ids({ state: 'active' }), [b.id])
        assert.deepEqual(await ids({ state: 'expired' }), [a.id], 'past its expiry: expired, though stored active')
        assert.deepEqual(await ids({ state: 'active', at: AT }), [a.id, b.id])
        assert.deepEqual(await ids({ state: 'released' }), [c.id])
        assert.deepEqual(await ids({ state: 'confirmed' }), [])
        assert.deepEqual(await ids({ limit: 2 }), [a.id, b.id])
        assert.deepEqual(await ids({ after: { createdAt: b.createdAt, id: b.id } }), [c.id])
        const [listed] = await store.selling.listHolds({ at: AT, after: null, limit: 10, petId: 2n, state: 'active' })
        assert.deepEqual(listed, b)
      })

      test('expireHolds records holds past their expiry, oldest expiry first, at most the limit, each once', async (t) => {
        const { store, rows } = await open(t)
        await stocked(store, [[1n, 10]])
        const late = placed(await store.selling.placeHold(newHold([line(1n, 1)], { expiresAt: later(3 * MINUTE) })))
        const early = placed(await store.selling.placeHold(newHold([line(1n, 2)], { expiresAt: later(MINUTE) })))
        const live = placed(await store.selling.placeHold(newHold([line(1n, 3)], { expiresAt: later(60 * MINUTE) })))
        const first = await store.selling.expireHolds(later(5 * MINUTE), 1)
        assert.deepEqual(first, [{ ...early, state: 'expired', endedAt: later(MINUTE) }])
        assert.deepEqual(await store.selling.expireHolds(later(5 * MINUTE), 10), [{ ...late, state: 'expired', endedAt: later(3 * MINUTE) }])
        assert.deepEqual(await store.selling.expireHolds(later(5 * MINUTE), 10), [])
        assert.equal((await store.selling.getHold(live.id))?.state, 'active')
        assert.deepEqual((await ledgerOf(rows, 1n)).filter((row) => row.event === 'hold.expired').map((row) => [row.holdId, row.held, row.keyId]),
          [[early.id, 3, null], [late.id, 3, null]])
      })

      test('purgeHolds deletes ended holds (not an order\'s) ended at or before the instant, with their lines', async (t) => {
        const { store, count } = await open(t)
        await stocked(store, [[1n, 10]])
        const released = placed(await store.selling.placeHold(newHold([line(1n, 1)])))
        await store.selling.endHold(ending(released.id, 'released', { at: later(MINUTE) }))
        const recent = placed(await store.selling.placeHold(newHold([line(1n, 1)])))
        await store.selling.endHold(ending(recent.id, 'released', { at: later(10 * MINUTE) }))
        const active = placed(await store.selling.placeHold(newHold([line(1n, 1)])))
        const ofOrder = await store.selling.placeHold(newHold([line(1n, 1)], { expiresAt: null, order: { shipDate: '2026-12-01T00:00:00Z' } }))
        const orderHold = placed(ofOrder)
        await store.selling.moveOrder(move(orderHold.orderId ?? 0n, 'cancelled', { at: later(MINUTE) }))
        assert.equal(await store.selling.purgeHolds(later(MINUTE), 10), 1)
        assert.equal(await store.selling.getHold(released.id), null)
        for (const id of [recent.id, active.id, orderHold.id]) assert.notEqual(await store.selling.getHold(id), null)
        assert.equal(await count('hold_lines'), 3)
        assert.equal(await store.selling.purgeHolds(later(60 * MINUTE), 10), 1)
        assert.equal(await store.selling.purgeHolds(later(60 * MINUTE), 10), 0)
      })
    })

    describe('orders', () => {
      test('an order placed with a hold is stored as the API places it, holds its stock without expiry, and lists in the classic shape', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[ABOVE_2_53, 5]])
        await importData(store, { pets: [], orders: [order(10n, { petId: ABOVE_2_53 })] })
        const result = await store.selling.placeHold(newHold([line(ABOVE_2_53, 2)], { expiresAt: null, reference: 'web-1', order: { shipDate: '2026-12-01T09:00:00Z' } }))
        if (result.status !== 'placed' || result.order === undefined) assert.fail(result.status)
        const { hold, order: placedOrder } = result
        assert.ok(placedOrder.id > 10n, 'a new id, above the imported ones')
        assert.deepEqual(placedOrder, {
          id: placedOrder.id, petId: ABOVE_2_53, quantity: 2, shipDate: '2026-12-01T09:00:00Z', status: 'placed', complete: false, source: 'api',
          reference: 'web-1', holdId: hold.id, createdAt: AT, updatedAt: AT
        })
        assert.equal(hold.orderId, placedOrder.id)
        assert.equal(hold.expiresAt, null)
        assert.deepEqual(await store.selling.getOrder(placedOrder.id), placedOrder)
        assert.deepEqual(await availability(store, ABOVE_2_53, later(365 * 24 * 60 * MINUTE)), { onHand: 5, held: 2, available: 3 })
        const listed = await store.catalog.listOrders({ afterId: null, limit: 10, status: null })
        assert.deepEqual(listed.orders.at(-1), { id: placedOrder.id, petId: ABOVE_2_53, quantity: 2, shipDate: '2026-12-01T09:00:00Z', status: 'placed', complete: false })
        assert.deepEqual(await store.selling.getOrder(10n), { ...order(10n, { petId: ABOVE_2_53 }), source: 'import', reference: null, holdId: null, createdAt: null, updatedAt: null })
        assert.equal(await store.selling.getOrder(999n), null)
      })

      test('orders placed through the API take the id after the largest, and once an import took the largest id there is, the smallest free ones', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 50]])
        const placeOrder = async (): Promise<bigint> => {
          const result = await store.selling.placeHold(newHold([line(1n, 1)], { expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } }))
          if (result.status !== 'placed' || result.order === undefined) assert.fail(result.status)
          return result.order.id
        }
        assert.equal(await placeOrder(), 1n, 'the first order of an empty store')
        await importData(store, { pets: [], orders: [order(3n, { petId: 1n }), order(1000n, { petId: 1n })] })
        assert.equal(await placeOrder(), 1001n)
        await importData(store, { pets: [], orders: [order(INT64_MAX, { petId: 1n })] })
        assert.deepEqual([await placeOrder(), await placeOrder(), await placeOrder()], [2n, 4n, 5n], 'the gaps from 1, in order')
        const listed = await store.catalog.listOrders({ afterId: null, limit: 10, status: null })
        assert.deepEqual(listed.orders.map((o) => o.id), [1n, 2n, 3n, 4n, 5n, 1000n, 1001n, INT64_MAX])
      })

      test('an order moves placed -> approved -> delivered: the delivery sells its units and completes it', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 2)], { expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } })))
        const id = hold.orderId ?? assert.fail('no order')
        const approved = await store.selling.moveOrder(move(id, 'approved'))
        if (approved.status !== 'moved') assert.fail(approved.status)
        assert.deepEqual([approved.order.status, approved.order.complete, approved.order.updatedAt, approved.entries, approved.hold], ['approved', false, later(MINUTE), [], hold])
        assert.equal((await store.selling.moveOrder(move(id, 'approved'))).status, 'wrong_state')
        assert.deepEqual(await store.selling.endHold(ending(hold.id, 'confirmed')), { status: 'of_order', hold })
        assert.deepEqual(await store.selling.endHold(ending(hold.id, 'released')), { status: 'of_order', hold })
        assert.deepEqual(await store.selling.extendHold(extension(hold.id, later(5 * MINUTE))), { status: 'of_order', hold })
        const delivered = await store.selling.moveOrder(move(id, 'delivered', { at: later(2 * MINUTE) }))
        if (delivered.status !== 'moved') assert.fail(delivered.status)
        assert.deepEqual([delivered.order.status, delivered.order.complete, delivered.hold?.state], ['delivered', true, 'confirmed'])
        assert.deepEqual(delivered.entries, [await store.stock.getStockEntry(1n)])
        assert.equal((await store.stock.getStockEntry(1n))?.quantity, 3)
        const history = await store.stock.stockHistory(1n, 10)
        assert.deepEqual(history.map((entry) => [entry.reason, entry.quantity]), [['import', 5], ['sale', 3]])
        for (const to of ['approved', 'delivered', 'cancelled'] as const) {
          assert.deepEqual(await store.selling.moveOrder(move(id, to)), { status: 'wrong_state', order: delivered.order })
        }
      })

      test('a cancelled order releases its hold and leaves the classic listing', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 5)], { expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } })))
        const id = hold.orderId ?? assert.fail('no order')
        const cancelled = await store.selling.moveOrder(move(id, 'cancelled'))
        if (cancelled.status !== 'moved') assert.fail(cancelled.status)
        assert.deepEqual([cancelled.order.status, cancelled.order.complete, cancelled.hold?.state, cancelled.entries], ['cancelled', false, 'released', []])
        assert.deepEqual(await availability(store, 1n, later(MINUTE)), { onHand: 5, held: 0, available: 5 })
        assert.deepEqual((await store.catalog.listOrders({ afterId: null, limit: 10, status: null })).orders, [])
        assert.equal((await store.selling.getOrder(id))?.status, 'cancelled', 'kept, out of the listing')
        assert.equal((await store.selling.moveOrder(move(id, 'delivered'))).status, 'wrong_state')
      })

      test('an imported order never moves, and an import never overwrites an order placed through the API', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        await importData(store, { pets: [], orders: [order(1n)] })
        const imported = await store.selling.getOrder(1n) ?? assert.fail('no order')
        for (const to of ['approved', 'delivered', 'cancelled'] as const) {
          assert.deepEqual(await store.selling.moveOrder(move(1n, to)), { status: 'wrong_state', order: imported })
        }
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 1)], { expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } })))
        const id = hold.orderId ?? assert.fail('no order')
        const before = await store.selling.getOrder(id)
        assert.deepEqual(await importData(store, { pets: [], orders: [order(id, { quantity: 99, status: 'delivered', complete: true }), order(1n, { quantity: 7 })] }),
          { pets: 0, orders: 1, keptOrders: [id] }, 'the import says what it left alone')
        assert.deepEqual(await store.selling.getOrder(id), before)
        assert.equal((await store.selling.getOrder(1n))?.quantity, 7, 'imported orders are still replaced')
      })

      test('a delivery of a pet set below the order is refused insufficient and changes nothing', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 4)], { expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } })))
        const id = hold.orderId ?? assert.fail('no order')
        await store.stock.setQuantity(stockChange(1n, 3, { at: AT }))
        const before = await store.selling.getOrder(id)
        assert.deepEqual(await store.selling.moveOrder(move(id, 'delivered')), { status: 'insufficient', shortages: [{ petId: 1n, requested: 4, available: 3 }] })
        assert.deepEqual(await store.selling.getOrder(id), before)
        assert.equal((await store.selling.getHold(hold.id))?.state, 'active')
      })

      test('an order counts against the caps like any hold', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        const caps = { activeHolds: 1, heldUnits: 100 }
        placed(await store.selling.placeHold(newHold([line(1n, 1)], { caps, expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } })))
        assert.deepEqual(await store.selling.placeHold(newHold([line(1n, 1)], { caps, expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' } })),
          { status: 'limit_reached', cap: 'activeHolds', current: 1, max: 1 })
      })
    })

    describe('idempotency', () => {
      test('a keyed placement records the hold it left, and the same key again changes nothing and answers recorded', async (t) => {
        const { store, count } = await open(t)
        await stocked(store, [[1n, 5]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 2)], { idempotency: claim('p1') })))
        const record = await store.idempotency.findIdempotencyRecord('key_a', 'p1', AT) ?? assert.fail('no record')
        assert.deepEqual(record, { fingerprint: 'fp-p1', entries: [], response: holdText(hold), createdAt: AT, expiresAt: claim('p1').expiresAt })
        assert.deepEqual(holdFromText(record.response ?? ''), hold)
        const ledger = await count('stock_ledger')
        assert.deepEqual(await store.selling.placeHold(newHold([line(1n, 2)], { idempotency: claim('p1') })), { status: 'recorded' })
        assert.deepEqual(await store.selling.endHold(ending(hold.id, 'confirmed', { idempotency: claim('p1') })), { status: 'recorded' })
        assert.deepEqual(await store.stock.adjustQuantity({ ...stockChange(1n, 0), delta: 1, allowed: { min: 0, max: 10 }, idempotency: claim('p1') }),
          { status: 'recorded' }, 'one key, whatever the write')
        assert.deepEqual(await availability(store, 1n), { onHand: 5, held: 2, available: 3 })
        assert.equal(await count('stock_ledger'), ledger)
        assert.equal(await count('holds'), 1)
      })

      test('keyed ends, extensions and order moves record what they left; refusals record nothing', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        const hold = placed(await store.selling.placeHold(newHold([line(1n, 2)])))
        assert.equal((await store.selling.placeHold(newHold([line(1n, 9)], { idempotency: claim('refused') }))).status, 'insufficient')
        assert.equal(await store.idempotency.findIdempotencyRecord('key_a', 'refused', AT), null)
        const extended = await store.selling.extendHold(extension(hold.id, later(20 * MINUTE), { idempotency: claim('x1') }))
        if (extended.status !== 'extended') assert.fail(extended.status)
        assert.equal((await store.idempotency.findIdempotencyRecord('key_a', 'x1', AT))?.response, holdText(extended.hold))
        const ended = await store.selling.endHold(ending(hold.id, 'confirmed', { idempotency: claim('e1') }))
        if (ended.status !== 'ended') assert.fail(ended.status)
        assert.equal((await store.idempotency.findIdempotencyRecord('key_a', 'e1', AT))?.response, holdText(ended.hold))
        assert.equal((await store.selling.endHold(ending(hold.id, 'confirmed', { idempotency: claim('e2') }))).status, 'not_active')
        assert.equal(await store.idempotency.findIdempotencyRecord('key_a', 'e2', AT), null)
        const withOrder = await store.selling.placeHold(newHold([line(1n, 1)], { expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' }, idempotency: claim('o1') }))
        if (withOrder.status !== 'placed' || withOrder.order === undefined) assert.fail(withOrder.status)
        const orderRecord = await store.idempotency.findIdempotencyRecord('key_a', 'o1', AT)
        assert.deepEqual(orderFromText(orderRecord?.response ?? ''), withOrder.order)
        const moved = await store.selling.moveOrder(move(withOrder.order.id, 'cancelled', { idempotency: claim('o2') }))
        if (moved.status !== 'moved') assert.fail(moved.status)
        assert.equal((await store.idempotency.findIdempotencyRecord('key_a', 'o2', AT))?.response, orderText(moved.order))
        assert.deepEqual(await store.selling.moveOrder(move(withOrder.order.id, 'cancelled', { idempotency: claim('o2') })), { status: 'recorded' })
      })

      test('an expired record frees its key: a placement with it applies and records anew', async (t) => {
        const { store } = await open(t)
        await stocked(store, [[1n, 5]])
        const short = { ...claim('k'), expiresAt: later(MINUTE) }
        placed(await store.selling.placeHold(newHold([line(1n, 1)], { idempotency: short })))
        const again = placed(await store.selling.placeHold(newHold([line(1n, 1)], { at: later(MINUTE), idempotency: { ...claim('k'), fingerprint: 'new' } })))
        const record = await store.idempotency.findIdempotencyRecord('key_a', 'k', later(MINUTE))
        assert.deepEqual([record?.fingerprint, record?.response], ['new', holdText(again)])
      })

      test('the texts of a hold and an order keep int64 values and instants exactly', () => {
        const hold: Hold = {
          id: 'hold_abc', state: 'confirmed', lines: [line(-(2n ** 63n), 1), line(INT64_MAX, 2)], reference: null, quotaId: 'q', keyId: null,
          createdAt: new Date('2026-11-27T12:00:00.123Z'), expiresAt: null, endedAt: new Date('2026-11-27T12:01:00.999Z'), orderId: INT64_MAX
        }
        assert.deepEqual(holdFromText(holdText(hold)), hold)
        const placedOrder = {
          id: ABOVE_2_53, petId: INT64_MAX, quantity: 3, shipDate: '2026-12-01T09:00:00Z', status: 'cancelled' as const, complete: false,
          source: 'api' as const, reference: 'r', holdId: 'hold_abc', createdAt: new Date('2026-11-27T12:00:00.001Z'), updatedAt: null
        }
        assert.deepEqual(orderFromText(orderText(placedOrder)), placedOrder)
      })
    })

    describe('never oversold', () => {
      test('200 concurrent one-unit holds on 50 units (on two instances where the store has them): exactly 50 granted', async (t) => {
        const { store, peer } = await open(t)
        // Two pools on PostgreSQL, each with more writes queued than connections: they wait their turn (the pet's row
        // lock lets one hold at a time decide), so give them longer than the default to get a connection.
        const patient = { connectTimeoutMs: 60_000 }
        const instances = store.kind === 'postgres' ? [await peer(patient), await peer(patient)] : [store]
        await stocked(store, [[1n, 50]])
        const results = await Promise.all(Array.from({ length: 200 }, (_, i) =>
          (instances[i % instances.length] as Store).selling.placeHold(newHold([line(1n, 1)], { requestId: `req-${i}` }))))
        const granted = results.filter((result) => result.status === 'placed')
        assert.equal(granted.length, 50)
        assert.equal(results.filter((result) => result.status === 'insufficient').length, 150)
        assert.deepEqual(await availability(store, 1n), { onHand: 50, held: 50, available: 0 })
        assert.equal((await store.selling.listHolds({ at: AT, after: null, limit: 500, state: 'active' })).length, 50)
      })

      test('one idempotency key sent twice at once (on two instances where the store has them) places one hold; the other answers recorded', async (t) => {
        const { store, peer, count } = await open(t)
        const other = store.kind === 'postgres' ? await peer() : store
        await stocked(store, [[1n, 10]])
        for (let round = 0; round < 5; round++) {
          const key = claim(`same-${round}`)
          const results = await Promise.all([store, other].map((instance) => instance.selling.placeHold(newHold([line(1n, 1)], { idempotency: key }))))
          assert.deepEqual(results.map((result) => result.status).sort(), ['placed', 'recorded'])
        }
        assert.equal(await count('holds'), 5)
        assert.deepEqual(await availability(store, 1n), { onHand: 10, held: 5, available: 5 })
      })

      test('sweepers expiring at once (on two instances where the store has them) record each hold once', async (t) => {
        const { store, peer, rows } = await open(t)
        const other = store.kind === 'postgres' ? await peer() : store
        await stocked(store, [[1n, 100], [2n, 100]])
        for (let i = 0; i < 30; i++) placed(await store.selling.placeHold(newHold([line(1n, 1), line(2n, 1)], { expiresAt: later(MINUTE + i) })))
        const swept = await Promise.all([store, other, store, other].map((instance) => instance.selling.expireHolds(later(10 * MINUTE), 10)))
        const ids = swept.flat().map((hold) => hold.id)
        assert.equal(ids.length, 30)
        assert.equal(new Set(ids).size, 30)
        assert.equal((await rows("SELECT id FROM stock_ledger WHERE event = 'hold.expired'")).length, 60)
      })

      test('concurrent confirmations, releases, holds and a PATCH lowering the stock never sell more than is on hand', async (t) => {
        const { store, peer } = await open(t)
        const other = store.kind === 'postgres' ? await peer() : store
        for (let round = 0; round < 5; round++) {
          const petId = BigInt(100 + round)
          await stocked(store, [[petId, 6]])
          const a = placed(await store.selling.placeHold(newHold([line(petId, 3)])))
          const b = placed(await store.selling.placeHold(newHold([line(petId, 3)])))
          const [confirmA, patch, confirmB] = await Promise.all([
            store.selling.endHold(ending(a.id, 'confirmed')),
            other.stock.setQuantity(stockChange(petId, 4, { at: later(MINUTE) })),
            other.selling.endHold(ending(b.id, 'confirmed'))
          ])
          assert.equal(patch.status, 'updated')
          const history = await store.stock.stockHistory(petId, 10)
          // Every change applied to what the one before it left: the sales in it took units that were there.
          for (let i = 1; i < history.length; i++) assert.equal(history[i]?.previousQuantity, history[i - 1]?.quantity)
          for (const entry of history) assert.ok(entry.quantity >= 0)
          const sales = history.filter((entry) => entry.reason === 'sale')
          assert.equal(sales.length, [confirmA, confirmB].filter((result) => result.status === 'ended').length)
          for (const sale of sales) assert.equal((sale.previousQuantity ?? 0) - sale.quantity, 3)
          for (const result of [confirmA, confirmB]) assert.ok(result.status === 'ended' || result.status === 'insufficient', result.status)
          const entry = await store.stock.getStockEntry(petId)
          assert.equal(entry?.quantity, history.at(-1)?.quantity)
        }
      })
    })
  })
}
