/** Row codecs of the stock tables (inventory, stock_ledger), shared by both stores (../rows.ts: how the drivers differ). */
import { randomBytes } from 'node:crypto'
import { HOLD_EVENTS, LOW_STOCK, type HoldEvent, type InventoryItem, type LedgerEntry, type LedgerReason, type PetStatus, type StockChangeEntry, type StockEntry } from '../../model.js'
import { num, numOrNull, time, type Int, type Time } from '../rows.js'
import type { FeedPosition, StoreEpoch } from './types.js'

export interface InventoryRow { pet_id: bigint, quantity: Int, status: PetStatus }
export interface EntryRow extends InventoryRow { revision: bigint }
/**
 * A stock_ledger row. `event` is null for a stock change (which always has a reason), else an event's type (migration
 * 12): a hold's, with hold_id and held, or a low-stock crossing, with reorder_point.
 */
export interface LedgerRow {
  id: bigint, pet_id: bigint, previous_quantity: Int | null, quantity: Int, reason: LedgerReason | null, note: string | null,
  reference: string | null,
  key_id: string | null, request_id: string | null, batch_id: string | null, status: PetStatus | null,
  previous_status: PetStatus | null, created_at: Time, event: string | null, hold_id: string | null, held: Int | null,
  reorder_point: Int | null
}

/** The columns each mapper reads, in one place for both stores' queries. */
export const INVENTORY_COLUMNS = 'i.pet_id, i.quantity, p.status'
export const ENTRY_COLUMNS = 'i.pet_id, i.quantity, p.status, i.revision'
export const LEDGER_COLUMNS = 'l.id, l.pet_id, l.previous_quantity, l.quantity, l.reason, l.note, l.reference, l.key_id, l.request_id, l.batch_id, l.status, ' +
  'l.previous_status, l.created_at, l.event, l.hold_id, l.held, l.reorder_point'

export const toInventoryItem = (row: InventoryRow): InventoryItem => ({ petId: row.pet_id, quantity: num(row.quantity), status: row.status })

export const toStockEntry = (row: EntryRow): StockEntry => ({ ...toInventoryItem(row), revision: row.revision })

const isHoldEvent = (event: string): event is HoldEvent => (HOLD_EVENTS as readonly string[]).includes(event)

/**
 * A ledger row as the record it is. The queries that read rows ask only for the types they can tell (a stock change,
 * the events of ../../model.ts): a row of another event, which a later release may write, is never read here.
 */
export const toLedgerEntry = (row: LedgerRow): LedgerEntry => {
  const common = {
    id: row.id,
    petId: row.pet_id,
    quantity: num(row.quantity),
    reference: row.reference,
    keyId: row.key_id,
    requestId: row.request_id,
    at: time(row.created_at)
  }
  const event = row.event
  if (event === null) return toStockChange(row)
  const none = { previousQuantity: null, reason: null, note: null, batchId: null, status: null, previousStatus: null } as const
  if (isHoldEvent(event)) return { ...common, ...none, event, holdId: row.hold_id ?? '', held: num(row.held ?? 0), reorderPoint: null }
  if (event === LOW_STOCK) return { ...common, ...none, event, holdId: null, held: null, reorderPoint: num(row.reorder_point ?? 0) }
  throw new Error(`a ledger row of an unknown event was read: ${event}`)
}

/** A row of a stock change (event null) as its entry: a pet's history reads only these. */
export const toStockChange = (row: LedgerRow): StockChangeEntry => ({
  id: row.id,
  petId: row.pet_id,
  event: null,
  previousQuantity: numOrNull(row.previous_quantity),
  quantity: num(row.quantity),
  // Every stock change has a reason (both stores' writes set it; only event rows go without).
  reason: row.reason as LedgerReason,
  note: row.note,
  reference: row.reference,
  keyId: row.key_id,
  requestId: row.request_id,
  batchId: row.batch_id,
  status: row.status,
  previousStatus: row.previous_status,
  holdId: row.hold_id,
  held: null,
  reorderPoint: null,
  at: time(row.created_at)
})

/** The columns of an epoch (store_epochs e). */
export const EPOCH_COLUMNS = 'e.epoch, e.after_order, e.after_id, e.started_at, e.reason'
export interface EpochRow { epoch: string, after_order: bigint, after_id: bigint, started_at: Time, reason: string }
export const toEpoch = (row: EpochRow): StoreEpoch =>
  ({ epoch: row.epoch, after: { order: row.after_order, id: row.after_id }, startedAt: time(row.started_at), reason: row.reason })
/** A new epoch's id: 16 lowercase hexadecimal digits (64 random bits), as the migrations make them. */
export function newEpochId (): string {
  return randomBytes(8).toString('hex')
}
/** A feed position from a head query's two columns; null for an empty feed. */
export const headOf = (order: bigint | null | undefined, id: bigint | null | undefined): FeedPosition | null =>
  order === null || order === undefined || id === null || id === undefined ? null : { order, id }
