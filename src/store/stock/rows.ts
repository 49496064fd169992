/** Row codecs of the stock tables (inventory, stock_ledger), shared by both stores (../rows.ts: how the drivers differ). */
import { randomBytes } from 'node:crypto'
import type { InventoryItem, LedgerEntry, LedgerReason, PetStatus, StockEntry } from '../../model.js'
import { num, numOrNull, time, type Int, type Time } from '../rows.js'
import type { FeedPosition, StoreEpoch } from './types.js'

export interface InventoryRow { pet_id: bigint, quantity: Int, status: PetStatus }
export interface EntryRow extends InventoryRow { revision: bigint }
export interface LedgerRow {
  id: bigint, pet_id: bigint, previous_quantity: Int | null, quantity: Int, reason: LedgerReason, note: string | null,
  reference: string | null,
  key_id: string | null, request_id: string | null, batch_id: string | null, status: PetStatus | null,
  previous_status: PetStatus | null, created_at: Time
}

/** The columns each mapper reads, in one place for both stores' queries. */
export const INVENTORY_COLUMNS = 'i.pet_id, i.quantity, p.status'
export const ENTRY_COLUMNS = 'i.pet_id, i.quantity, p.status, i.revision'
export const LEDGER_COLUMNS = 'l.id, l.pet_id, l.previous_quantity, l.quantity, l.reason, l.note, l.reference, l.key_id, l.request_id, l.batch_id, l.status, ' +
  'l.previous_status, l.created_at'

export const toInventoryItem = (row: InventoryRow): InventoryItem => ({ petId: row.pet_id, quantity: num(row.quantity), status: row.status })

export const toStockEntry = (row: EntryRow): StockEntry => ({ ...toInventoryItem(row), revision: row.revision })

export const toLedgerEntry = (row: LedgerRow): LedgerEntry => ({
  id: row.id,
  petId: row.pet_id,
  previousQuantity: numOrNull(row.previous_quantity),
  quantity: num(row.quantity),
  reason: row.reason,
  note: row.note,
  reference: row.reference,
  keyId: row.key_id,
  requestId: row.request_id,
  batchId: row.batch_id,
  status: row.status,
  previousStatus: row.previous_status,
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
