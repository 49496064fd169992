/**
 * Row codecs of the selling tables (holds, hold_lines, orders), shared by both stores (../rows.ts: how the drivers
 * differ), and the text an idempotency record keeps of a hold or an order (IdempotencyRecord.response).
 */
import type { Hold, HoldLine, HoldState, OrderRecord, OrderState, PetStatus } from '../../model.js'
import type { Availability, AvailableEntry } from './types.js'
import { num, time, timeOrNull, type Int, type Time } from '../rows.js'

export interface HoldRow {
  id: string, quota_id: string, key_id: string | null, reference: string | null, state: HoldState, created_at: Time,
  expires_at: Time | null, ended_at: Time | null, order_id: bigint | null
}
export interface HoldLineRow { hold_id: string, pet_id: bigint, quantity: Int }
export interface SellingOrderRow {
  id: bigint, pet_id: bigint, quantity: Int, ship_date: string, status: OrderState, complete: boolean | Int, source: 'import' | 'api',
  reference: string | null, hold_id: string | null, created_at: Time | null, updated_at: Time | null
}

/**
 * The id of an order placed through the API, the same on every store (both placements run it under their store's
 * order-id serialization): one above the largest order's, or, once an import has taken the largest id there is
 * (2^63 - 1), the smallest free id from 1.
 */
export const NEXT_ORDER_ID_SQL = `SELECT CASE
    WHEN top.id IS NULL THEN 1
    WHEN top.id < 9223372036854775807 THEN top.id + 1
    WHEN NOT EXISTS (SELECT 1 FROM orders WHERE id = 1) THEN 1
    ELSE (SELECT min(n.id) + 1 FROM orders n WHERE n.id >= 1 AND n.id < 9223372036854775807
      AND NOT EXISTS (SELECT 1 FROM orders m WHERE m.id = n.id + 1))
  END FROM (SELECT max(id) AS id FROM orders) AS top`

/** The columns each mapper reads, in one place for both stores' queries. */
export const HOLD_COLUMNS = 'h.id, h.quota_id, h.key_id, h.reference, h.state, h.created_at, h.expires_at, h.ended_at, h.order_id'
export const HOLD_LINE_COLUMNS = 'l.hold_id, l.pet_id, l.quantity'
export const SELLING_ORDER_COLUMNS = 'o.id, o.pet_id, o.quantity, o.ship_date, o.status, o.complete, o.source, o.reference, o.hold_id, ' +
  'o.created_at, o.updated_at'

/** A hold from its row and its lines (any order: a hold's lines are ordered by petId). */
export function toHold (row: HoldRow, lines: readonly HoldLineRow[]): Hold {
  return {
    id: row.id,
    state: row.state,
    lines: lines.map((line): HoldLine => ({ petId: line.pet_id, quantity: num(line.quantity) }))
      .sort((a, b) => a.petId < b.petId ? -1 : a.petId > b.petId ? 1 : 0),
    reference: row.reference,
    quotaId: row.quota_id,
    keyId: row.key_id,
    createdAt: time(row.created_at),
    expiresAt: timeOrNull(row.expires_at),
    endedAt: timeOrNull(row.ended_at),
    orderId: row.order_id
  }
}

export const toOrderRecord = (row: SellingOrderRow): OrderRecord => ({
  id: row.id,
  petId: row.pet_id,
  quantity: num(row.quantity),
  shipDate: row.ship_date,
  status: row.status,
  complete: row.complete === true || row.complete === 1n || row.complete === 1,
  source: row.source,
  reference: row.reference,
  holdId: row.hold_id,
  createdAt: timeOrNull(row.created_at),
  updatedAt: timeOrNull(row.updated_at)
})

/** What is on hand, held and available of a pet, from its entry's quantity and the units held of it. */
export const toAvailability = (row: { pet_id: bigint, quantity: Int, held: Int }): Availability => {
  const onHand = num(row.quantity)
  const held = num(row.held)
  return { petId: row.pet_id, onHand, held, available: Math.max(0, onHand - held) }
}

/** An entry of the listing with its availability. */
export const toAvailableEntry = (row: { pet_id: bigint, quantity: Int, held: Int, status: PetStatus }): AvailableEntry =>
  ({ ...toAvailability(row), status: row.status })

/** Groups lines by their hold's id. */
export function linesByHold (lines: readonly HoldLineRow[]): Map<string, HoldLineRow[]> {
  const byHold = new Map<string, HoldLineRow[]>()
  for (const line of lines) {
    const list = byHold.get(line.hold_id)
    if (list === undefined) byHold.set(line.hold_id, [line])
    else list.push(line)
  }
  return byHold
}

/** A date as the texts below keep it (RFC 3339 with milliseconds: a Date holds no more), or null. */
const dateText = (value: Date | null): string | null => value === null ? null : value.toISOString()
const dateOf = (value: string | null): Date | null => value === null ? null : new Date(value)

interface HoldJson {
  id: string, state: HoldState, lines: Array<{ petId: string, quantity: number }>, reference: string | null, quotaId: string,
  keyId: string | null, createdAt: string, expiresAt: string | null, endedAt: string | null, orderId: string | null
}

/**
 * A hold as the idempotency record of the write that left it keeps it (what a retry is answered): JSON, with int64
 * values as decimal strings (JSON numbers would lose them above 2^53) and dates as RFC 3339 text.
 */
export function holdText (hold: Hold): string {
  const json: HoldJson = {
    id: hold.id,
    state: hold.state,
    lines: hold.lines.map((line) => ({ petId: String(line.petId), quantity: line.quantity })),
    reference: hold.reference,
    quotaId: hold.quotaId,
    keyId: hold.keyId,
    createdAt: hold.createdAt.toISOString(),
    expiresAt: dateText(hold.expiresAt),
    endedAt: dateText(hold.endedAt),
    orderId: hold.orderId === null ? null : String(hold.orderId)
  }
  return JSON.stringify(json)
}

/** The hold holdText wrote. */
export function holdFromText (text: string): Hold {
  const json = JSON.parse(text) as HoldJson
  return {
    id: json.id,
    state: json.state,
    lines: json.lines.map((line) => ({ petId: BigInt(line.petId), quantity: line.quantity })),
    reference: json.reference,
    quotaId: json.quotaId,
    keyId: json.keyId,
    createdAt: new Date(json.createdAt),
    expiresAt: dateOf(json.expiresAt),
    endedAt: dateOf(json.endedAt),
    orderId: json.orderId === null ? null : BigInt(json.orderId)
  }
}

interface OrderJson {
  id: string, petId: string, quantity: number, shipDate: string, status: OrderState, complete: boolean, source: 'import' | 'api',
  reference: string | null, holdId: string | null, createdAt: string | null, updatedAt: string | null
}

/** An order as the idempotency record of the write that placed or moved it keeps it: as holdText does a hold. */
export function orderText (order: OrderRecord): string {
  const json: OrderJson = {
    id: String(order.id),
    petId: String(order.petId),
    quantity: order.quantity,
    shipDate: order.shipDate,
    status: order.status,
    complete: order.complete,
    source: order.source,
    reference: order.reference,
    holdId: order.holdId,
    createdAt: dateText(order.createdAt),
    updatedAt: dateText(order.updatedAt)
  }
  return JSON.stringify(json)
}

/** The order orderText wrote. */
export function orderFromText (text: string): OrderRecord {
  const json = JSON.parse(text) as OrderJson
  return {
    id: BigInt(json.id),
    petId: BigInt(json.petId),
    quantity: json.quantity,
    shipDate: json.shipDate,
    status: json.status,
    complete: json.complete,
    source: json.source,
    reference: json.reference,
    holdId: json.holdId,
    createdAt: dateOf(json.createdAt),
    updatedAt: dateOf(json.updatedAt)
  }
}
