/**
 * Event rows of the stock ledger written with SQL, as the selling area writes them (src/store/selling/types.ts): the
 * same statement on both stores, so that the feed, the stream and webhooks can be shown to serve them (or not) before
 * and apart from the code that writes them.
 */
import type { HoldEvent } from '../../src/model.js'

const text = (value: string | null): string => value === null ? 'NULL' : `'${value.replace(/'/g, "''")}'`

/** A hold event of one pet: quantity is the on-hand count as it stands, held the pet's units held after it. */
export interface HoldEventRow {
  petId: bigint | number
  event: HoldEvent
  holdId: string
  reference?: string | null
  quantity: number
  held: number
  at: Date
}

export function holdEventSql (row: HoldEventRow): string {
  return `INSERT INTO stock_ledger (pet_id, quantity, event, hold_id, reference, held, created_at)
    VALUES (${row.petId}, ${row.quantity}, ${text(row.event)}, ${text(row.holdId)}, ${text(row.reference ?? null)}, ${row.held}, ${text(row.at.toISOString())});`
}

/** A crossing of a pet's reorder point. */
export function lowStockSql (row: { petId: bigint | number, quantity: number, reorderPoint: number, at: Date }): string {
  return `INSERT INTO stock_ledger (pet_id, quantity, event, reorder_point, created_at)
    VALUES (${row.petId}, ${row.quantity}, 'inventory.low_stock', ${row.reorderPoint}, ${text(row.at.toISOString())});`
}
