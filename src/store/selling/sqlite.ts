/**
 * The selling area on SQLite: holds, their lines and the orders placed through the API. Every write joins the group
 * commit (../sqlite/group-commit.ts) like a stock write, so it reads what is on hand and held, decides, and writes, all
 * inside the one write transaction SQLite allows at a time: no hold is granted on units another write took meanwhile.
 */
import type { Hold, HoldLine, OrderRecord, PetStatus, StockEntry } from '../../model.js'
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { trackLowStock } from '../alerts/sqlite.js'
import { TransactionEpoch, VERSION_SQL } from '../sqlite/sql.js'
import type { FeedPlace } from '../stock/types.js'
import { capRefusal } from './caps.js'
import {
  HOLD_COLUMNS, HOLD_LINE_COLUMNS, holdText, linesByHold, NEXT_ORDER_ID_SQL, orderText, SELLING_ORDER_COLUMNS, toHold, toOrderRecord,
  toAvailability, toAvailableEntry, type HoldLineRow, type HoldRow, type SellingOrderRow
} from './rows.js'
import type {
  Availability, AvailableEntry, EndHold, EndHoldResult, ExtendHold, ExtendHoldResult, HoldQuery, NewHold, OrderTransition, OrderTransitionResult,
  PlaceHoldResult, SellingActor, SellingClaim, SellingStore, Shortage
} from './types.js'

/**
 * Units of a pet held at an instant (@at): the lines that are active and not expired then. Times are stored as
 * toISOString text, whose order is the instants' order.
 */
const HELD_SQL = `SELECT coalesce(sum(quantity), 0) FROM hold_lines
  WHERE pet_id = @pet AND active = 1 AND (expires_at IS NULL OR expires_at > @at)`
/** On hand, held and available of pets with a stock entry (and a pet row, as the listing shows them) at @at. */
const AVAILABILITY_SQL = `SELECT i.pet_id, i.quantity,
    (SELECT coalesce(sum(l.quantity), 0) FROM hold_lines l WHERE l.pet_id = i.pet_id AND l.active = 1 AND (l.expires_at IS NULL OR l.expires_at > @at)) AS held
  FROM inventory i JOIN pets p ON p.id = i.pet_id`
/** A stock entry with its chain head, as a stock write reads it (../stock/sqlite.ts). */
const ENTRY_SQL = `SELECT i.pet_id, i.quantity, (SELECT status FROM pets WHERE id = i.pet_id) AS status, i.revision, i.ledger_head
  FROM inventory i WHERE i.pet_id = ? AND status IS NOT NULL`
/** The quota's holds that count at @at and their units, all pets together. */
const QUOTA_SQL = `SELECT count(DISTINCT h.id) AS holds, coalesce(sum(l.quantity), 0) AS units FROM holds h JOIN hold_lines l ON l.hold_id = h.id
  WHERE h.quota_id = @quota AND h.state = 'active' AND (h.expires_at IS NULL OR h.expires_at > @at)`
/** A row of an event (hold.placed ...): no reason, no previous quantity, outside the pet's chain (previous_id null). */
const EVENT_SQL = `INSERT INTO stock_ledger (pet_id, previous_id, previous_quantity, quantity, reason, note, reference, key_id, request_id, created_at,
  event, hold_id, held) VALUES (?, NULL, NULL, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, ?)`
/** A sale's stock change, linked into the pet's chain like a stock write's row. */
const SALE_SQL = `INSERT INTO stock_ledger (pet_id, previous_id, previous_quantity, quantity, reason, note, reference, key_id, request_id, created_at,
  hold_id) VALUES (?, ?, ?, ?, 'sale', NULL, ?, ?, ?, ?, ?)`
const KEY_INSERT_SQL = `INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, response, created_at, expires_at)
  VALUES (?, ?, ?, '[]', ?, ?, ?)`

interface EntryRow { pet_id: bigint, quantity: bigint, status: string, revision: bigint, ledger_head: bigint | null }

/** The event a write of this area records per pet of the hold. */
type HoldEvent = 'hold.placed' | 'hold.confirmed' | 'hold.released' | 'hold.expired'

/** Whether a hold stored active has stopped counting at `at` (its expiry passed). */
const lapsed = (hold: Hold, at: Date): boolean => hold.state === 'active' && hold.expiresAt !== null && hold.expiresAt <= at

export class SqliteSelling implements SellingStore {
  readonly #db: SqliteDatabase
  /** The epoch new ledger rows are of, read once per transaction of the group commit (as the stock area does). */
  readonly #epoch: TransactionEpoch

  constructor (db: SqliteDatabase) {
    this.#db = db
    this.#epoch = new TransactionEpoch(db)
  }

  async getHold (id: string): Promise<Hold | null> {
    return guard(() => this.#hold(id))
  }

  async listHolds (query: HoldQuery): Promise<Hold[]> {
    return guard(() => {
      const at = query.at.toISOString()
      // The state at `at`: an active hold past its expiry reads as expired, not as active.
      const state = {
        active: "h.state = 'active' AND (h.expires_at IS NULL OR h.expires_at > @at)",
        expired: "(h.state = 'expired' OR (h.state = 'active' AND h.expires_at <= @at))",
        confirmed: "h.state = 'confirmed' AND @at IS NOT NULL",
        released: "h.state = 'released' AND @at IS NOT NULL"
      }
      const rows = this.#db.prepare(`SELECT ${HOLD_COLUMNS} FROM holds h
        WHERE (@pet IS NULL OR EXISTS (SELECT 1 FROM hold_lines l WHERE l.hold_id = h.id AND l.pet_id = @pet))
          AND (@reference IS NULL OR h.reference = @reference)
          AND ${query.state === undefined ? '@at IS NOT NULL' : state[query.state]}
          AND (@afterAt IS NULL OR (h.created_at, h.id) > (@afterAt, @afterId))
        ORDER BY h.created_at, h.id LIMIT @limit`)
        .all({
          pet: query.petId ?? null,
          reference: query.reference ?? null,
          at,
          afterAt: query.after?.createdAt.toISOString() ?? null,
          afterId: query.after?.id ?? null,
          limit: query.limit
        }) as HoldRow[]
      if (rows.length === 0) return []
      const lines = linesByHold(this.#db.prepare(`SELECT ${HOLD_LINE_COLUMNS} FROM hold_lines l WHERE l.hold_id IN (SELECT value FROM json_each(?))`)
        .all(JSON.stringify(rows.map((row) => row.id))) as HoldLineRow[])
      return rows.map((row) => toHold(row, lines.get(row.id) ?? []))
    })
  }

  async availability (petIds: readonly bigint[], at: Date): Promise<Availability[]> {
    if (petIds.length === 0) return []
    return guard(() => (this.#db.prepare(`${AVAILABILITY_SQL} WHERE i.pet_id IN (SELECT value FROM json_each(@pets)) ORDER BY i.pet_id`)
      // int64 ids as JSON numbers: json_each reads them as exact integers.
      
      .all({ at: at.toISOString(), pets: `[${petIds.join(',')}]` }) as Array<{ pet_id: bigint, quantity: bigint, held: bigint }>).map(toAvailability))
  }

  async availabilityAll (at: Date): Promise<Availability[]> {
    return guard(() => (this.#db.prepare(`${AVAILABILITY_SQL} ORDER BY i.pet_id`).all({ at: at.toISOString() }) as
      Array<{ pet_id: bigint, quantity: bigint, held: bigint }>).map(toAvailability))
  }

  async availableEntries (after: bigint | null, limit: number | null, at: Date): Promise<AvailableEntry[]> {
    return guard(() => (this.#db.prepare(`${AVAILABILITY_SQL.replace('SELECT i.pet_id, i.quantity,', 'SELECT i.pet_id, i.quantity, p.status,')}
      WHERE @after IS NULL OR i.pet_id > @after ORDER BY i.pet_id LIMIT @limit`)
      // LIMIT -1: no limit.
      .all({ at: at.toISOString(), after, limit: limit ?? -1 }) as Array<{ pet_id: bigint, quantity: bigint, held: bigint, status: PetStatus }>).map(toAvailableEntry))
  }

  async getOrder (id: bigint): Promise<OrderRecord | null> {
    return guard(() => this.#order(id))
  }

  placeHold (hold: NewHold): Promise<PlaceHoldResult> {
    return this.#db.writes.run(() => this.#place(hold))
  }

  endHold (change: EndHold): Promise<EndHoldResult> {
    return this.#db.writes.run(() => this.#end(change))
  }

  extendHold (change: ExtendHold): Promise<ExtendHoldResult> {
    return this.#db.writes.run(() => this.#extend(change))
  }

  moveOrder (transition: OrderTransition): Promise<OrderTransitionResult> {
    return this.#db.writes.run(() => this.#move(transition))
  }

  /** One writer at a time: each hold is recorded once, by whichever write reaches it first. */
  expireHolds (at: Date, limit: number): Promise<Hold[]> {
    return this.#db.writes.run(() => {
      const ids = this.#db.prepare(`SELECT id FROM holds WHERE state = 'active' AND expires_at <= ? ORDER BY expires_at, id LIMIT ?`).pluck()
        .all(at.toISOString(), limit) as string[]
      const actor: SellingActor = { quotaId: '', keyId: null, requestId: null, at }
      return ids.map((id) => this.#expire(this.#hold(id) as Hold, actor))
    })
  }

  /** Lines are deleted with their holds (ON DELETE CASCADE; foreign keys are on, ../sqlite/database.ts). */
  purgeHolds (before: Date, limit: number): Promise<number> {
    return this.#db.writes.run(() => this.#db.prepare(`DELETE FROM holds WHERE id IN (SELECT id FROM holds
      WHERE state <> 'active' AND order_id IS NULL AND ended_at <= ? ORDER BY ended_at LIMIT ?)`).run(before.toISOString(), limit).changes)
  }

  #hold (id: string): Hold | null {
    const row = this.#db.prepare(`SELECT ${HOLD_COLUMNS} FROM holds h WHERE h.id = ?`).get(id) as HoldRow | undefined
    if (row === undefined) return null
    return toHold(row, this.#db.prepare(`SELECT ${HOLD_LINE_COLUMNS} FROM hold_lines l WHERE l.hold_id = ?`).all(id) as HoldLineRow[])
  }

  #order (id: bigint): OrderRecord | null {
    const row = this.#db.prepare(`SELECT ${SELLING_ORDER_COLUMNS} FROM orders o WHERE o.id = ?`).get(id) as SellingOrderRow | undefined
    return row === undefined ? null : toOrderRecord(row)
  }

  #entry (petId: bigint): EntryRow | undefined {
    return this.#db.prepare(ENTRY_SQL).get(petId) as EntryRow | undefined
  }

  #held (petId: bigint, at: string): number {
    return Number(this.#db.prepare(HELD_SQL).pluck().get({ pet: petId, at }) as bigint)
  }

  /**
   * Whether the claim's key has a live record (then the write must change nothing: `recorded`); an expired one is
   * removed, so that this write may record the key anew. Inside the write transaction: nothing records it meanwhile.
   */
  #recorded (claim: SellingClaim | undefined, at: Date): boolean {
    if (claim === undefined) return false
    const held = this.#db.prepare('SELECT expires_at FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?').get(claim.scope, claim.key) as
      { expires_at: string } | undefined
    if (held !== undefined && held.expires_at > at.toISOString()) return true
    if (held !== undefined) this.#db.prepare('DELETE FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?').run(claim.scope, claim.key)
    return false
  }

  /** Writes the claim's record: what the write left, as the answer to a retry. */
  #record (claim: SellingClaim | undefined, response: string, at: Date): void {
    if (claim === undefined) return
    this.#db.prepare(KEY_INSERT_SQL).run(claim.scope, claim.key, claim.fingerprint, response, at.toISOString(), claim.expiresAt.toISOString())
  }

  /** An event row for each line of the hold: the pet's on-hand quantity and what is held of it now. Returns the last row's id. */
  #events (hold: Hold, event: HoldEvent, actor: SellingActor): bigint {
    const at = actor.at.toISOString()
    let last = 0n
    for (const line of hold.lines) {
      const onHand = this.#entry(line.petId)?.quantity ?? 0n
      const { lastInsertRowid } = this.#db.prepare(EVENT_SQL).run(line.petId, onHand, hold.reference, actor.keyId, actor.requestId, at, event, hold.id,
        this.#held(line.petId, at))
      last = BigInt(lastInsertRowid)
    }
    return last
  }

  /** The feed's place of the write's last ledger row, where the store has epochs (as a stock write tells it). */
  #feed (last: bigint): { feed?: FeedPlace } {
    const epoch = this.#epoch.current()
    return epoch === undefined ? {} : { feed: { order: 0n, id: last, epoch } }
  }


  #place (hold: NewHold): PlaceHoldResult {
    if (this.#recorded(hold.idempotency, hold.at)) return { status: 'recorded' }
    const at = hold.at.toISOString()
    const lines = [...hold.lines].sort((a, b) => a.petId < b.petId ? -1 : a.petId > b.petId ? 1 : 0)
    const onHand = new Map<bigint, number>()
    for (const line of lines) {
      const entry = this.#entry(line.petId)
      if (entry === undefined) return { status: 'not_found', petId: line.petId }
      onHand.set(line.petId, Number(entry.quantity))
    }
    this.#expireLapsed(lines.map((line) => line.petId), hold.at)
    const refused = capRefusal(this.#db.prepare(QUOTA_SQL).get({ quota: hold.quotaId, at }) as { holds: bigint, units: bigint }, lines, hold)
    if (refused !== null) return refused
    const shortages: Shortage[] = []
    for (const line of lines) {
      const available = Math.max(0, (onHand.get(line.petId) ?? 0) - this.#held(line.petId, at))
      if (line.quantity > available) shortages.push({ petId: line.petId, requested: line.quantity, available })
    }
    if (shortages.length > 0) return { status: 'insufficient', shortages }
    const expiresAt = hold.expiresAt?.toISOString() ?? null
    this.#db.prepare(`INSERT INTO holds (id, quota_id, key_id, reference, state, created_at, expires_at, ended_at, order_id)
      VALUES (?, ?, ?, ?, 'active', ?, ?, NULL, NULL)`).run(hold.id, hold.quotaId, hold.keyId, hold.reference, at, expiresAt)
    const insertLine = this.#db.prepare('INSERT INTO hold_lines (hold_id, pet_id, quantity, active, expires_at) VALUES (?, ?, ?, 1, ?)')
    for (const line of lines) insertLine.run(hold.id, line.petId, line.quantity, expiresAt)
    let order: OrderRecord | undefined
    if (hold.order !== undefined) {
      const [line] = lines as [HoldLine]
      // The order's id as on every store (NEXT_ORDER_ID_SQL), not SQLite's next rowid: past the largest id there is
      // that would be a random one.
      const { lastInsertRowid } = this.#db.prepare(`INSERT INTO orders (id, pet_id, quantity, ship_date, status, complete, source, quota_id, reference,
        hold_id, created_at, updated_at) VALUES ((${NEXT_ORDER_ID_SQL}), ?, ?, ?, 'placed', 0, 'api', ?, ?, ?, ?, ?)`)
        .run(line.petId, line.quantity, hold.order.shipDate, hold.quotaId, hold.reference, hold.id, at, at)
      this.#db.prepare('UPDATE holds SET order_id = ? WHERE id = ?').run(lastInsertRowid, hold.id)
      order = this.#order(BigInt(lastInsertRowid)) as OrderRecord
    }
    const placed = this.#hold(hold.id) as Hold
    const last = this.#events(placed, 'hold.placed', hold)
    this.#record(hold.idempotency, order === undefined ? holdText(placed) : orderText(order), hold.at)
    return { status: 'placed', hold: placed, ...(order === undefined ? {} : { order }), ...this.#feed(last) }
  }

  /**
   * Holds on `petIds` past their expiry at `at` and not yet recorded, made expired records by a placement that is
   * about to count their units as free (docs/adr/0055-placements-record-the-expiries-they-count-on.md), as the sweeper
   * would: a confirmation or extension that read its instant before they lapsed (under `serve --workers`, another
   * process's, waiting for this transaction) then finds them expired.
   */
  #expireLapsed (petIds: readonly bigint[], at: Date): void {
    const lapsed = this.#db.prepare('SELECT hold_id FROM hold_lines WHERE pet_id = ? AND active = 1 AND expires_at <= ?').pluck()
    const ids = new Set<string>()
    for (const petId of petIds) for (const id of lapsed.all(petId, at.toISOString()) as string[]) ids.add(id)
    const actor: SellingActor = { quotaId: '', keyId: null, requestId: null, at }
    for (const id of [...ids].sort()) this.#expire(this.#hold(id) as Hold, actor)
  }

  /** Records an active hold past its expiry as expired (state, lines, hold.expired rows); returns it as recorded. */
  #expire (hold: Hold, actor: SellingActor): Hold {
    // It ended when it stopped counting, whenever the record of it is written.
    const endedAt = (hold.expiresAt ?? actor.at).toISOString()
    this.#db.prepare("UPDATE holds SET state = 'expired', ended_at = ? WHERE id = ?").run(endedAt, hold.id)
    this.#db.prepare('UPDATE hold_lines SET active = 0 WHERE hold_id = ?').run(hold.id)
    const expired = this.#hold(hold.id) as Hold
    this.#events(expired, 'hold.expired', actor)
    return expired
  }

  /** Pets of the hold with fewer units on hand than their line: what a confirmation cannot sell. */
  #unsellable (hold: Hold): Shortage[] {
    const shortages: Shortage[] = []
    for (const line of hold.lines) {
      const onHand = Number(this.#entry(line.petId)?.quantity ?? 0n)
      if (onHand < line.quantity) shortages.push({ petId: line.petId, requested: line.quantity, available: onHand })
    }
    return shortages
  }

  /**
   * Ends an active hold, checked already: a confirmation sells its lines (per pet, the sale in the pet's chain, then the
   * hold.confirmed row), a release only records hold.released rows. Returns the hold as ended, the entries a sale
   * left, and the last ledger row.
   */
  #finish (hold: Hold, ending: 'confirmed' | 'released', actor: SellingActor): { hold: Hold, entries: StockEntry[], last: bigint } {
    const at = actor.at.toISOString()
    this.#db.prepare('UPDATE holds SET state = ?, ended_at = ? WHERE id = ?').run(ending, at, hold.id)
    this.#db.prepare('UPDATE hold_lines SET active = 0 WHERE hold_id = ?').run(hold.id)
    const ended = this.#hold(hold.id) as Hold
    if (ending === 'released') return { hold: ended, entries: [], last: this.#events(ended, 'hold.released', actor) }
    const entries: StockEntry[] = []
    let last = 0n
    for (const line of ended.lines) {
      const entry = this.#entry(line.petId) as EntryRow
      const quantity = Number(entry.quantity) - line.quantity
      const { lastInsertRowid } = this.#db.prepare(SALE_SQL).run(line.petId, entry.ledger_head, entry.quantity, quantity, hold.reference, actor.keyId,
        actor.requestId, at, hold.id)
      this.#db.prepare('UPDATE inventory SET quantity = ?, revision = revision + 1, ledger_head = ? WHERE pet_id = ?').run(quantity, lastInsertRowid, line.petId)
      entries.push({ petId: line.petId, quantity, status: entry.status as StockEntry['status'], revision: entry.revision + 1n })
      const { lastInsertRowid: event } = this.#db.prepare(EVENT_SQL).run(line.petId, quantity, hold.reference, actor.keyId, actor.requestId, at,
        'hold.confirmed', hold.id, this.#held(line.petId, at))
      // A sale that takes the pet to or below its reorder point records the crossing after it, like any stock write.
      last = trackLowStock(this.#db, line.petId, quantity, actor.at, actor.keyId, actor.requestId) ?? BigInt(event)
    }
    return { hold: ended, entries, last }
  }

  /** The inventory version a sale moved the listing to. */
  #version (): bigint {
    return (this.#db.prepare(VERSION_SQL).get() as { v: bigint }).v
  }

  #end (change: EndHold): EndHoldResult {
    if (this.#recorded(change.idempotency, change.at)) return { status: 'recorded' }
    const hold = this.#hold(change.id)
    if (hold === null) return { status: 'not_found' }
    if (hold.orderId !== null && !change.ofOrder) return { status: 'of_order', hold }
    if (lapsed(hold, change.at)) return { status: 'not_active', hold: this.#expire(hold, change) }
    if (hold.state !== 'active') return { status: 'not_active', hold }
    if (change.ending === 'confirmed') {
      const shortages = this.#unsellable(hold)
      if (shortages.length > 0) return { status: 'insufficient', shortages }
    }
    const { hold: ended, entries, last } = this.#finish(hold, change.ending, change)
    this.#record(change.idempotency, holdText(ended), change.at)
    return { status: 'ended', hold: ended, entries, ...(entries.length > 0 ? { version: this.#version() } : {}), ...this.#feed(last) }
  }

  #extend (change: ExtendHold): ExtendHoldResult {
    if (this.#recorded(change.idempotency, change.at)) return { status: 'recorded' }
    const hold = this.#hold(change.id)
    if (hold === null) return { status: 'not_found' }
    if (hold.orderId !== null) return { status: 'of_order', hold }
    if (lapsed(hold, change.at)) return { status: 'not_active', hold: this.#expire(hold, change) }
    if (hold.state !== 'active') return { status: 'not_active', hold }
    const expiresAt = change.expiresAt.toISOString()
    this.#db.prepare('UPDATE holds SET expires_at = ? WHERE id = ?').run(expiresAt, hold.id)
    this.#db.prepare('UPDATE hold_lines SET expires_at = ? WHERE hold_id = ?').run(expiresAt, hold.id)
    const extended = this.#hold(hold.id) as Hold
    this.#record(change.idempotency, holdText(extended), change.at)
    return { status: 'extended', hold: extended }
  }

  #move (transition: OrderTransition): OrderTransitionResult {
    if (this.#recorded(transition.idempotency, transition.at)) return { status: 'recorded' }
    const order = this.#order(transition.orderId)
    if (order === null) return { status: 'not_found' }
    const from = transition.to === 'approved' ? ['placed'] : ['placed', 'approved']
    if (order.source !== 'api' || !from.includes(order.status) || order.holdId === null) return { status: 'wrong_state', order }
    const hold = this.#hold(order.holdId)
    if (hold === null) return { status: 'wrong_state', order }
    // An order's hold has no expiry; one that had, and passed it, no longer keeps the order's stock.
    if (lapsed(hold, transition.at)) {
      this.#expire(hold, transition)
      return { status: 'wrong_state', order }
    }
    if (hold.state !== 'active') return { status: 'wrong_state', order }
    let finished: { hold: Hold, entries: StockEntry[], last: bigint } | null = null
    if (transition.to === 'delivered') {
      const shortages = this.#unsellable(hold)
      if (shortages.length > 0) return { status: 'insufficient', shortages }
      finished = this.#finish(hold, 'confirmed', transition)
    } else if (transition.to === 'cancelled') {
      finished = this.#finish(hold, 'released', transition)
    }
    this.#db.prepare('UPDATE orders SET status = ?, complete = ?, updated_at = ? WHERE id = ?')
      .run(transition.to, transition.to === 'delivered' ? 1 : 0, transition.at.toISOString(), order.id)
    const moved = this.#order(order.id) as OrderRecord
    this.#record(transition.idempotency, orderText(moved), transition.at)
    const entries = finished?.entries ?? []
    return {
      status: 'moved',
      order: moved,
      hold: finished?.hold ?? hold,
      entries,
      ...(entries.length > 0 ? { version: this.#version() } : {}),
      ...(finished === null ? {} : this.#feed(finished.last))
    }
  }
}
