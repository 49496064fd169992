/**
 * The selling area on PostgreSQL: holds, their lines and the orders placed through the API, each write in one
 * transaction (../postgres/database.ts), with no session state, so that it works through PgBouncer in transaction mode.
 *
 * What makes it exact across instances is the locks, always taken in one order: a hold's or an order's row first
 * (FOR UPDATE), then the inventory rows of its pets in pet order (FOR UPDATE, as every stock write locks them), then,
 * for a placement, the quota's advisory lock (its caps) and the order ids' lock. A write reads what is on hand and
 * held of a pet only while it holds the pet's row, and every write that changes either holds it too, so no two of
 * them decide on the same units; no transaction waits for a lock taken earlier in that order, so none deadlock.
 */
import type pg from 'pg'
import type { Hold, OrderRecord, PetStatus, StockEntry } from '../../model.js'
import { storeError, type PostgresDatabase } from '../postgres/database.js'
import { trackLowStockOf } from '../alerts/postgres.js'
import { capRefusal } from './caps.js'
import {
  HOLD_COLUMNS, HOLD_LINE_COLUMNS, holdText, NEXT_ORDER_ID_SQL, linesByHold, orderText, SELLING_ORDER_COLUMNS, toAvailability, toAvailableEntry, toHold, toOrderRecord,
  type HoldLineRow, type HoldRow, type SellingOrderRow
} from './rows.js'
import type {
  Availability, AvailableEntry, EndHold, EndHoldResult, ExtendHold, ExtendHoldResult, HoldQuery, NewHold, OrderTransition, OrderTransitionResult,
  PlaceHoldResult, SellingActor, SellingClaim, SellingStore, Shortage
} from './types.js'

/**
 * Serializes the placements of one quota's holds (the caps' count and the insert): an advisory lock of two int4 keys,
 * this one and the quota's hash (726_500 and 726_501 are the webhooks' and the streams' own).
 */
const HOLD_QUOTA_LOCK = 726_502
/**
 * Serializes the ids of orders placed through the API: the orders table's id has no default (imports bring their own
 * ids), so a placement takes NEXT_ORDER_ID_SQL under this lock (the imports' and migrations' are 7_265_001_043 and _042).
 */
const ORDER_ID_LOCK = 7_265_001_044n

/** Units held of a pet ($1 instant) by the lines that count then; `pet` names the pet's id column. */
const held = (pet: string): string =>
  `coalesce((SELECT sum(hl.quantity) FROM hold_lines hl WHERE hl.pet_id = ${pet} AND hl.active AND (hl.expires_at IS NULL OR hl.expires_at > $1)), 0)`
const AVAILABILITY_SQL = `SELECT i.pet_id, i.quantity, ${held('i.pet_id')} AS held FROM inventory i JOIN pets p ON p.id = i.pet_id`
/** The stock entries of pets ($1), locked in pet order. */
const LOCK_ENTRIES_SQL = `SELECT i.pet_id, i.quantity, i.revision, p.status FROM inventory i JOIN pets p ON p.id = i.pet_id
  WHERE i.pet_id = ANY ($1::bigint[]) ORDER BY i.pet_id FOR UPDATE OF i`
/**
 * An event row per line of the hold ($3), in pet order: the pet's on-hand quantity and the units held of it at $1 as
 * this transaction leaves them; no reason, no previous quantity, no stock change. $2 event, $4 reference, $5 key,
 * $6 request.
 */
const EVENTS_SQL = `INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, note, reference, key_id, request_id, created_at, event, hold_id, held)
  SELECT i.pet_id, NULL, i.quantity, NULL, NULL, $4::text, $5::text, $6::text, $1::timestamptz, $2::text, l.hold_id, ${held('i.pet_id')}
  FROM hold_lines l JOIN inventory i ON i.pet_id = l.pet_id WHERE l.hold_id = $3 ORDER BY i.pet_id`
const KEY_LIVE_SQL = 'SELECT 1 FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND expires_at > $3'
const DROP_EXPIRED_KEY_SQL = 'DELETE FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND expires_at <= $3'

interface LockedEntry { pet_id: bigint, quantity: number, revision: bigint, status: PetStatus }
type Client = pg.PoolClient
type Locked = Map<bigint, LockedEntry>

/** A unique violation of `constraint`: another transaction committed the same key first. */
function violates (error: unknown, constraint: string): boolean {
  const { code, constraint: name } = error as { code?: unknown, constraint?: unknown }
  return code === '23505' && name === constraint
}

/** Whether a hold stored active has stopped counting at `at` (its expiry passed). */
const lapsed = (hold: Hold, at: Date): boolean => hold.state === 'active' && hold.expiresAt !== null && hold.expiresAt <= at

/** Results that changed nothing the claim would record: refusals. */
const REFUSALS = new Set(['not_found', 'insufficient', 'limit_reached', 'not_active', 'of_order', 'wrong_state'])

export class PostgresSelling implements SellingStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  async getHold (id: string): Promise<Hold | null> {
    return await this.#db.statements(async (db) => await holdOf(db, id))
  }

  async listHolds (query: HoldQuery): Promise<Hold[]> {
    const state = {
      active: "h.state = 'active' AND (h.expires_at IS NULL OR h.expires_at > $3)",
      expired: "(h.state = 'expired' OR (h.state = 'active' AND h.expires_at <= $3))",
      confirmed: "h.state = 'confirmed' AND $3::timestamptz IS NOT NULL",
      released: "h.state = 'released' AND $3::timestamptz IS NOT NULL"
    }
    return await this.#db.statements(async (db) => {
      const { rows } = await db.query<HoldRow>(`SELECT ${HOLD_COLUMNS} FROM holds h
        WHERE ($1::bigint IS NULL OR EXISTS (SELECT 1 FROM hold_lines l WHERE l.hold_id = h.id AND l.pet_id = $1))
          AND ($2::text IS NULL OR h.reference = $2)
          AND ${query.state === undefined ? '$3::timestamptz IS NOT NULL' : state[query.state]}
          AND ($4::timestamptz IS NULL OR (h.created_at, h.id) > ($4, $5::text))
        ORDER BY h.created_at, h.id LIMIT $6`,
      [query.petId ?? null, query.reference ?? null, query.at, query.after?.createdAt ?? null, query.after?.id ?? null, query.limit])
      if (rows.length === 0) return []
      const { rows: lines } = await db.query<HoldLineRow>(`SELECT ${HOLD_LINE_COLUMNS} FROM hold_lines l WHERE l.hold_id = ANY ($1::text[])`,
        [rows.map((row) => row.id)])
      const byHold = linesByHold(lines)
      return rows.map((row) => toHold(row, byHold.get(row.id) ?? []))
    })
  }

  async availability (petIds: readonly bigint[], at: Date): Promise<Availability[]> {
    if (petIds.length === 0) return []
    const { rows } = await this.#db.query<{ pet_id: bigint, quantity: number, held: bigint }>(
      `${AVAILABILITY_SQL} WHERE i.pet_id = ANY ($2::bigint[]) ORDER BY i.pet_id`, [at, petIds])
    return rows.map(toAvailability)
  }

  async availabilityAll (at: Date): Promise<Availability[]> {
    const { rows } = await this.#db.query<{ pet_id: bigint, quantity: number, held: bigint }>(`${AVAILABILITY_SQL} ORDER BY i.pet_id`, [at])
    return rows.map(toAvailability)
  }

  async availableEntries (after: bigint | null, limit: number | null, at: Date): Promise<AvailableEntry[]> {
    const { rows } = await this.#db.query<{ pet_id: bigint, quantity: number, held: bigint, status: PetStatus }>(
      `SELECT i.pet_id, i.quantity, ${held('i.pet_id')} AS held, p.status FROM inventory i JOIN pets p ON p.id = i.pet_id
       WHERE $2::bigint IS NULL OR i.pet_id > $2 ORDER BY i.pet_id LIMIT $3`, [at, after, limit])
    return rows.map(toAvailableEntry)
  }

  async getOrder (id: bigint): Promise<OrderRecord | null> {
    return await this.#db.statements(async (db) => await orderOf(db, id, false))
  }

  async placeHold (hold: NewHold): Promise<PlaceHoldResult> {
    return await this.#write(hold.idempotency, hold.at, async (client) => await this.#place(client, hold))
  }

  async endHold (change: EndHold): Promise<EndHoldResult> {
    return await this.#write(change.idempotency, change.at, async (client) => await this.#end(client, change))
  }

  async extendHold (change: ExtendHold): Promise<ExtendHoldResult> {
    return await this.#write(change.idempotency, change.at, async (client) => await this.#extend(client, change))
  }

  async moveOrder (transition: OrderTransition): Promise<OrderTransitionResult> {
    return await this.#write(transition.idempotency, transition.at, async (client) => await this.#move(client, transition))
  }

  /**
   * The due holds are locked with SKIP LOCKED: instances sweeping at once take different holds, and a hold another
   * write is ending now is left to it. Each is recorded once: its row, locked, is still active when this reads it.
   */
  async expireHolds (at: Date, limit: number): Promise<Hold[]> {
    return await this.#db.transaction(async (client) => {
      const { rows } = await client.query<HoldRow>(`SELECT ${HOLD_COLUMNS} FROM holds h WHERE h.state = 'active' AND h.expires_at <= $1
        ORDER BY h.expires_at, h.id LIMIT $2 FOR UPDATE SKIP LOCKED`, [at, limit])
      if (rows.length === 0) return []
      const ids = rows.map((row) => row.id)
      const { rows: lines } = await client.query<HoldLineRow>(`SELECT ${HOLD_LINE_COLUMNS} FROM hold_lines l WHERE l.hold_id = ANY ($1::text[])`, [ids])
      const byHold = linesByHold(lines)
      await lockEntries(client, lines.map((line) => line.pet_id))
      const actor: SellingActor = { quotaId: '', keyId: null, requestId: null, at }
      const expired: Hold[] = []
      for (const row of rows) expired.push(await expire(client, toHold(row, byHold.get(row.id) ?? []), actor))
      return expired
    })
  }

  /** Lines go with their holds (ON DELETE CASCADE). Instances purging at once skip each other's rows. */
  async purgeHolds (before: Date, limit: number): Promise<number> {
    const { rowCount } = await this.#db.query(`DELETE FROM holds h USING (
        SELECT id FROM holds WHERE state <> 'active' AND order_id IS NULL AND ended_at <= $1 ORDER BY ended_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ) ended WHERE h.id = ended.id`, [before, limit])
    return rowCount ?? 0
  }

  /**
   * A write in one transaction, with the claim's idempotency semantics of a stock batch (../stock/postgres.ts): a live
   * record of the key answers `recorded` and changes nothing; an expired one is removed; the write records the key
   * itself on success, so that a concurrent write of the same key (another instance) fails on the record's insert,
   * undoing all it did, and answers `recorded`. A refusal looks once more, since the locks it waited for may have been
   * that other write's. An order id taken meanwhile by an import is tried again with the next one.
   */
  async #write<R extends { status: string }> (claim: SellingClaim | undefined, at: Date, work: (client: Client) => Promise<R>): Promise<R | { status: 'recorded' }> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#db.transaction(async (client): Promise<R | { status: 'recorded' }> => {
          if (claim !== undefined) {
            if ((await client.query(KEY_LIVE_SQL, [claim.scope, claim.key, at])).rows.length > 0) return { status: 'recorded' }
            await client.query(DROP_EXPIRED_KEY_SQL, [claim.scope, claim.key, at])
          }
          const result = await work(client)
          if (claim !== undefined && REFUSALS.has(result.status) && (await client.query(KEY_LIVE_SQL, [claim.scope, claim.key, at])).rows.length > 0) {
            return { status: 'recorded' }
          }
          return result
        })
      } catch (error) {
        if (claim !== undefined && violates(error, 'idempotency_keys_pkey')) return { status: 'recorded' }
        if (violates(error, 'orders_pkey') && attempt < 3) continue
        throw storeError(error)
      }
    }
  }

  async #place (client: Client, hold: NewHold): Promise<PlaceHoldResult> {
    const lines = [...hold.lines].sort((a, b) => a.petId < b.petId ? -1 : a.petId > b.petId ? 1 : 0)
    const entries = await lockEntries(client, lines.map((line) => line.petId))
    const missing = lines.find((line) => !entries.has(line.petId))
    if (missing !== undefined) return { status: 'not_found', petId: missing.petId }
    const stillOwed = await expireLapsed(client, lines.map((line) => line.petId), hold.at)
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [HOLD_QUOTA_LOCK, hold.quotaId])
    const { rows: [quota] } = await client.query<{ holds: bigint, units: bigint }>(
      `SELECT count(DISTINCT h.id) AS holds, coalesce(sum(l.quantity), 0) AS units FROM holds h JOIN hold_lines l ON l.hold_id = h.id
       WHERE h.quota_id = $1 AND h.state = 'active' AND (h.expires_at IS NULL OR h.expires_at > $2)`, [hold.quotaId, hold.at])
    const refused = capRefusal(quota ?? { holds: 0, units: 0 }, lines, hold)
    if (refused !== null) return refused
    const heldNow = await heldOf(client, lines.map((line) => line.petId), hold.at)
    const shortages: Shortage[] = []
    for (const line of lines) {
      const available = Math.max(0, (entries.get(line.petId)?.quantity ?? 0) - (heldNow.get(line.petId) ?? 0) - (stillOwed.get(line.petId) ?? 0))
      if (line.quantity > available) shortages.push({ petId: line.petId, requested: line.quantity, available })
    }
    if (shortages.length > 0) return { status: 'insufficient', shortages }
    await client.query(`INSERT INTO holds (id, quota_id, key_id, reference, state, created_at, expires_at)
      VALUES ($1, $2, $3, $4, 'active', $5, $6)`, [hold.id, hold.quotaId, hold.keyId, hold.reference, hold.at, hold.expiresAt])
    await client.query(`INSERT INTO hold_lines (hold_id, pet_id, quantity, active, expires_at)
      SELECT $1::text, pet_id, quantity, true, $4::timestamptz FROM unnest($2::bigint[], $3::integer[]) AS t (pet_id, quantity)`,
    [hold.id, lines.map((line) => line.petId), lines.map((line) => line.quantity), hold.expiresAt])
    let order: OrderRecord | undefined
    if (hold.order !== undefined) {
      const line = lines[0] as { petId: bigint, quantity: number }
      await client.query('SELECT pg_advisory_xact_lock($1)', [ORDER_ID_LOCK])
      const { rows: [row] } = await client.query<SellingOrderRow>(`INSERT INTO orders AS o (id, pet_id, quantity, ship_date, status, complete, source,
          quota_id, reference, hold_id, created_at, updated_at)
        SELECT (${NEXT_ORDER_ID_SQL}), $1::bigint, $2::integer, $3::text, 'placed', false, 'api', $4::text, $5::text, $6::text, $7::timestamptz,
          $7::timestamptz
        RETURNING ${SELLING_ORDER_COLUMNS}`, [line.petId, line.quantity, hold.order.shipDate, hold.quotaId, hold.reference, hold.id, hold.at])
      order = toOrderRecord(row as SellingOrderRow)
      await client.query('UPDATE holds SET order_id = $1 WHERE id = $2', [order.id, hold.id])
    }
    const placed = await holdOf(client, hold.id) as Hold
    await events(client, placed, 'hold.placed', hold)
    await recordKey(client, hold.idempotency, order === undefined ? holdText(placed) : orderText(order), hold.at)
    return { status: 'placed', hold: placed, ...(order === undefined ? {} : { order }) }
  }

  async #end (client: Client, change: EndHold): Promise<EndHoldResult> {
    const hold = await holdOf(client, change.id, true)
    if (hold === null) return { status: 'not_found' }
    if (hold.orderId !== null && !change.ofOrder) return { status: 'of_order', hold }
    const entries = await lockEntries(client, hold.lines.map((line) => line.petId))
    if (lapsed(hold, change.at)) return { status: 'not_active', hold: await expire(client, hold, change) }
    if (hold.state !== 'active') return { status: 'not_active', hold }
    if (change.ending === 'confirmed') {
      const shortages = unsellable(hold, entries)
      if (shortages.length > 0) return { status: 'insufficient', shortages }
    }
    const ended = await finish(client, hold, entries, change.ending, change)
    await recordKey(client, change.idempotency, holdText(ended.hold), change.at)
    return { status: 'ended', hold: ended.hold, entries: ended.entries }
  }

  async #extend (client: Client, change: ExtendHold): Promise<ExtendHoldResult> {
    const hold = await holdOf(client, change.id, true)
    if (hold === null) return { status: 'not_found' }
    if (hold.orderId !== null) return { status: 'of_order', hold }
    // A later expiry makes the lines count longer: decided under the pets' locks like a placement.
    await lockEntries(client, hold.lines.map((line) => line.petId))
    if (lapsed(hold, change.at)) return { status: 'not_active', hold: await expire(client, hold, change) }
    if (hold.state !== 'active') return { status: 'not_active', hold }
    await client.query('UPDATE holds SET expires_at = $1 WHERE id = $2', [change.expiresAt, hold.id])
    await client.query('UPDATE hold_lines SET expires_at = $1 WHERE hold_id = $2', [change.expiresAt, hold.id])
    const extended = await holdOf(client, hold.id) as Hold
    await recordKey(client, change.idempotency, holdText(extended), change.at)
    return { status: 'extended', hold: extended }
  }

  async #move (client: Client, transition: OrderTransition): Promise<OrderTransitionResult> {
    const order = await orderOf(client, transition.orderId, true)
    if (order === null) return { status: 'not_found' }
    const from = transition.to === 'approved' ? ['placed'] : ['placed', 'approved']
    if (order.source !== 'api' || !from.includes(order.status) || order.holdId === null) return { status: 'wrong_state', order }
    const hold = await holdOf(client, order.holdId, true)
    if (hold === null) return { status: 'wrong_state', order }
    const entries = await lockEntries(client, hold.lines.map((line) => line.petId))
    // An order's hold has no expiry; one that had, and passed it, no longer keeps the order's stock.
    if (lapsed(hold, transition.at)) {
      await expire(client, hold, transition)
      return { status: 'wrong_state', order }
    }
    if (hold.state !== 'active') return { status: 'wrong_state', order }
    let finished: { hold: Hold, entries: StockEntry[] } | null = null
    if (transition.to === 'delivered') {
      const shortages = unsellable(hold, entries)
      if (shortages.length > 0) return { status: 'insufficient', shortages }
      finished = await finish(client, hold, entries, 'confirmed', transition)
    } else if (transition.to === 'cancelled') {
      finished = await finish(client, hold, entries, 'released', transition)
    }
    const { rows: [row] } = await client.query<SellingOrderRow>(`UPDATE orders o SET status = $1, complete = $2, updated_at = $3 WHERE o.id = $4
      RETURNING ${SELLING_ORDER_COLUMNS}`, [transition.to, transition.to === 'delivered', transition.at, order.id])
    const moved = toOrderRecord(row as SellingOrderRow)
    await recordKey(client, transition.idempotency, orderText(moved), transition.at)
    return { status: 'moved', order: moved, hold: finished?.hold ?? hold, entries: finished?.entries ?? [] }
  }
}

/** One hold with its lines; `lock`: its row locked FOR UPDATE (the first lock of a write that ends or changes it). */
async function holdOf (db: pg.Pool | Client, id: string, lock = false): Promise<Hold | null> {
  const { rows: [row] } = await db.query<HoldRow>(`SELECT ${HOLD_COLUMNS} FROM holds h WHERE h.id = $1${lock ? ' FOR UPDATE' : ''}`, [id])
  if (row === undefined) return null
  const { rows: lines } = await db.query<HoldLineRow>(`SELECT ${HOLD_LINE_COLUMNS} FROM hold_lines l WHERE l.hold_id = $1`, [id])
  return toHold(row, lines)
}

async function orderOf (db: pg.Pool | Client, id: bigint, lock: boolean): Promise<OrderRecord | null> {
  const { rows: [row] } = await db.query<SellingOrderRow>(`SELECT ${SELLING_ORDER_COLUMNS} FROM orders o WHERE o.id = $1${lock ? ' FOR UPDATE' : ''}`, [id])
  return row === undefined ? null : toOrderRecord(row)
}

/** The stock entries of pets, locked in pet order; pets without one are not in the map. */
async function lockEntries (client: Client, petIds: readonly bigint[]): Promise<Locked> {
  const { rows } = await client.query<LockedEntry>(LOCK_ENTRIES_SQL, [[...new Set(petIds)]])
  return new Map(rows.map((row) => [row.pet_id, row]))
}

/** Units held of each pet at `at`, as this transaction sees them. */
async function heldOf (client: Client, petIds: readonly bigint[], at: Date): Promise<Map<bigint, number>> {
  const { rows } = await client.query<{ pet_id: bigint, held: bigint }>(
    `SELECT p.pet_id, ${held('p.pet_id')} AS held FROM unnest($2::bigint[]) AS p (pet_id)`, [at, petIds])
  return new Map(rows.map((row) => [row.pet_id, Number(row.held)]))
}

async function events (client: Client, hold: Hold, event: string, actor: SellingActor): Promise<void> {
  await client.query(EVENTS_SQL, [actor.at, event, hold.id, hold.reference, actor.keyId, actor.requestId])
}

async function recordKey (client: Client, claim: SellingClaim | undefined, response: string, at: Date): Promise<void> {
  if (claim === undefined) return
  await client.query(`INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, response, created_at, expires_at)
    VALUES ($1, $2, $3, '[]', $4, $5, $6)`, [claim.scope, claim.key, claim.fingerprint, response, at, claim.expiresAt])
}

/** Records an active hold past its expiry as expired (state, lines, hold.expired rows); it ended when it stopped counting. */
async function expire (client: Client, hold: Hold, actor: SellingActor): Promise<Hold> {
  await client.query("UPDATE holds SET state = 'expired', ended_at = expires_at WHERE id = $1", [hold.id])
  await client.query('UPDATE hold_lines SET active = false WHERE hold_id = $1', [hold.id])
  const expired = { ...hold, state: 'expired' as const, endedAt: hold.expiresAt }
  await events(client, expired, 'hold.expired', actor)
  return expired
}

/**
 * Holds on `petIds` (their entries locked) past their expiry at `at` and not yet recorded, made expired records by a
 * placement that is about to count their units as free (docs/adr/0055-placements-record-the-expiries-they-count-on.md),
 * as the sweeper would: a confirmation or extension that read its instant before they lapsed, and waits for their
 * pets, then finds them expired. Nothing here waits for a lock (the pets' are held already): a hold whose row another
 * transaction holds (that very confirmation, the sweeper, another placement recording it), or whose other pets'
 * entries are held elsewhere (each event row is written under its pet's lock, with its figures), is left alone, and its
 * lines still count as held, per pet, in what this returns.
 */
async function expireLapsed (client: Client, petIds: readonly bigint[], at: Date): Promise<Map<bigint, number>> {
  const owed = new Map<bigint, number>()
  const { rows: lapsed } = await client.query<{ hold_id: string }>(
    'SELECT DISTINCT l.hold_id FROM hold_lines l WHERE l.pet_id = ANY ($1::bigint[]) AND l.active AND l.expires_at <= $2', [[...new Set(petIds)], at])
  if (lapsed.length === 0) return owed
  const ids = lapsed.map((row) => row.hold_id)
  const { rows } = await client.query<HoldRow>(`SELECT ${HOLD_COLUMNS} FROM holds h WHERE h.id = ANY ($1::text[]) AND h.state = 'active'
    ORDER BY h.id FOR UPDATE SKIP LOCKED`, [ids])
  const { rows: lines } = await client.query<HoldLineRow>(`SELECT ${HOLD_LINE_COLUMNS} FROM hold_lines l WHERE l.hold_id = ANY ($1::text[])`, [ids])
  const byHold = linesByHold(lines)
  const mine = new Set(petIds)
  const others = [...new Set(rows.flatMap((row) => (byHold.get(row.id) ?? []).map((line) => line.pet_id)).filter((petId) => !mine.has(petId)))]
  const locked = new Set(mine)
  if (others.length > 0) {
    const { rows: got } = await client.query<{ pet_id: bigint }>(
      'SELECT pet_id FROM inventory WHERE pet_id = ANY ($1::bigint[]) ORDER BY pet_id FOR UPDATE SKIP LOCKED', [others])
    for (const row of got) locked.add(row.pet_id)
  }
  const actor: SellingActor = { quotaId: '', keyId: null, requestId: null, at }
  const recorded = new Set<string>()
  for (const row of rows) {
    const holdLines = byHold.get(row.id) ?? []
    if (!holdLines.every((line) => locked.has(line.pet_id))) continue
    await expire(client, toHold(row, holdLines), actor)
    recorded.add(row.id)
  }
  for (const line of lines) {
    if (!recorded.has(line.hold_id)) owed.set(line.pet_id, (owed.get(line.pet_id) ?? 0) + Number(line.quantity))
  }
  return owed
}

/** Pets of the hold with fewer units on hand than their line (entries locked): what a confirmation cannot sell. */
function unsellable (hold: Hold, entries: Locked): Shortage[] {
  const shortages: Shortage[] = []
  for (const line of hold.lines) {
    const onHand = entries.get(line.petId)?.quantity ?? 0
    if (onHand < line.quantity) shortages.push({ petId: line.petId, requested: line.quantity, available: onHand })
  }
  return shortages
}

/**
 * Ends an active hold, checked already, its pets' entries locked: a confirmation sells its lines (per pet, the sale,
 * then its hold.confirmed row), a release records hold.released rows.
 */
async function finish (client: Client, hold: Hold, entries: Locked, ending: 'confirmed' | 'released', actor: SellingActor): Promise<{ hold: Hold, entries: StockEntry[] }> {
  await client.query('UPDATE holds SET state = $1, ended_at = $2 WHERE id = $3', [ending, actor.at, hold.id])
  await client.query('UPDATE hold_lines SET active = false WHERE hold_id = $1', [hold.id])
  const ended: Hold = { ...hold, state: ending, endedAt: actor.at }
  if (ending === 'released') {
    await events(client, ended, 'hold.released', actor)
    return { hold: ended, entries: [] }
  }
  const sold = hold.lines.map((line) => {
    const entry = entries.get(line.petId) as LockedEntry
    return { entry, quantity: entry.quantity - line.quantity }
  })
  await client.query(`UPDATE inventory i SET quantity = v.quantity, revision = i.revision + 1
    FROM unnest($1::bigint[], $2::integer[]) AS v (pet_id, quantity) WHERE i.pet_id = v.pet_id`,
  [sold.map((s) => s.entry.pet_id), sold.map((s) => s.quantity)])
  // Two rows per pet in this order: the sale (a stock change), then the hold.confirmed event with what is held after.
  const heldAfter = await heldOf(client, hold.lines.map((line) => line.petId), actor.at)
  const rows = sold.flatMap(({ entry, quantity }) => [
    { pet: entry.pet_id, previous: entry.quantity, quantity, reason: 'sale', event: null, held: null },
    { pet: entry.pet_id, previous: null, quantity, reason: null, event: 'hold.confirmed', held: heldAfter.get(entry.pet_id) ?? 0 }
  ])
  await client.query(`INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, note, reference, key_id, request_id, created_at, event, hold_id, held)
    SELECT pet_id, previous, quantity, reason, NULL, $7::text, $8::text, $9::text, $10::timestamptz, event, $11::text, held
    FROM unnest($1::bigint[], $2::integer[], $3::integer[], $4::text[], $5::text[], $6::integer[]) WITH ORDINALITY AS t (pet_id, previous, quantity, reason, event, held, n)
    ORDER BY n`,
  [rows.map((r) => r.pet), rows.map((r) => r.previous), rows.map((r) => r.quantity), rows.map((r) => r.reason), rows.map((r) => r.event),
    rows.map((r) => r.held), hold.reference, actor.keyId, actor.requestId, actor.at, hold.id])
  // A sale that takes a pet to or below its reorder point records the crossing after it, like any stock write (the
  // entries are locked).
  await trackLowStockOf(client, sold.map(({ entry, quantity }) => ({ petId: entry.pet_id, quantity })), actor.at, actor.keyId, actor.requestId)
  return {
    hold: ended,
    entries: sold.map(({ entry, quantity }) => ({ petId: entry.pet_id, quantity, status: entry.status, revision: entry.revision + 1n }))
  }
}
