/**
 * Low-stock alerts: a reorder point per pet, and whether the pet is at or below it since it last crossed it (the
 * stock_alerts table of migration 12). Implemented by both stores; one contract suite (test/store/alerts.contract.ts).
 *
 * A pet's stock crosses its point when its on-hand quantity goes from above the point to at or below it, or when a
 * point is set at or above the quantity of a pet that is not low. Each crossing writes ONE ledger row with the event
 * `inventory.low_stock` (the pet's quantity as it stands, the point crossed, no reason, no previous quantity) and marks
 * the pet low, in the transaction of the write that crossed; the quantity rising above the point marks it not low
 * again (no event), so the next fall below is a crossing again (docs/adr/0036-low-stock-once-per-crossing.md). Every
 * stock write of both stores takes part: the stock area's writes, imports, and a sale through a hold call the store's
 * trackLowStock (./sqlite.ts, ./postgres.ts) inside their own transaction. The event row joins no pet's ledger chain
 * and moves no entry's revision and no listing version: the point is not part of what the listing shows.
 */
import type { InventoryItem } from '../../model.js'

/** The event type of a crossing's ledger row. */
export const LOW_STOCK_EVENT = 'inventory.low_stock'

/** A pet's reorder point, and whether its stock is at or below it since it last crossed it. */
export interface ReorderPoint {
  petId: bigint
  /** 0 to MAX_QUANTITY. */
  reorderPoint: number
  /** True from a crossing until the quantity rises above the point again. */
  low: boolean
}

/** A reorder point to set, with who sets it and when, as a crossing's ledger row records them. */
export interface ReorderPointChange {
  petId: bigint
  reorderPoint: number
  keyId: string | null
  requestId: string | null
  at: Date
}

export type SetReorderPointResult =
  /** The point is set; `low` as the point left the pet (a crossing wrote its event in the same transaction). */
  | { status: 'set', point: ReorderPoint }
  /** The pet has no stock entry: nothing was set. */
  | { status: 'not_found' }

export type ClearReorderPointResult =
  /** The pet has no point now (`had`: whether it had one). */
  | { status: 'cleared', had: boolean }
  /** The pet has no stock entry: nothing was changed. */
  | { status: 'not_found' }

export interface AlertReads {
  /** A pet's reorder point; null when the pet has none or has no stock entry. */
  getReorderPoint (petId: bigint): Promise<ReorderPoint | null>
  /**
   * The stock entries at or below their reorder point now (quantity <= point), by petId: at most `limit` of those
   * after `afterId` (from the first when null).
   */
  listLowStock (query: { afterId: bigint | null, limit: number }): Promise<InventoryItem[]>
}

export interface AlertWrites {
  /** Sets (or replaces) a pet's reorder point; a point at or above the quantity of a pet not low is a crossing. */
  setReorderPoint (change: ReorderPointChange): Promise<SetReorderPointResult>
  /** Removes a pet's reorder point: no more events until one is set again (then it starts not low). */
  clearReorderPoint (petId: bigint): Promise<ClearReorderPointResult>
}

export type AlertStore = AlertReads & AlertWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const ALERT_WRITES = {
  setReorderPoint: 'refuse',
  clearReorderPoint: 'refuse'
} as const satisfies Record<keyof AlertWrites, 'refuse' | 'skip'>

/**
 * What a pet's stock at `quantity` does to its alert (`low`, at `point`): 'crossed' (write the event, mark it low),
 * 'rearmed' (mark it not low), or null (nothing). One rule for both stores; the SQL of PostgreSQL says the same.
 */
export function crossing (point: number, low: boolean, quantity: number): 'crossed' | 'rearmed' | null {
  const atOrBelow = quantity <= point
  if (atOrBelow && !low) return 'crossed'
  if (!atOrBelow && low) return 'rearmed'
  return null
}
