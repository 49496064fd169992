/**
 * Low stock: a reorder point per pet, and the listing of the pets at or below theirs. The crossing itself (one
 * inventory.low_stock event per fall to or below the point) is recorded by the stores in every stock write's
 * transaction (src/store/alerts/types.ts; docs/adr/0036-low-stock-once-per-crossing.md).
 */
import { AppError } from '../errors.js'
import type { InventoryItem } from '../model.js'
import type { AlertReads, AlertWrites, ReorderPoint } from '../store/alerts/types.js'
import type { Actor } from './inventory.js'

const noEntry = (petId: bigint): AppError => new AppError('not_found', `No inventory entry exists for pet ${petId}.`)

/**
 * Sets the reorder point of a pet that has a stock entry (not_found otherwise). A point at or above the pet's
 * quantity while it is not low is a crossing: its event is recorded in the same transaction, and the answer says low.
 */
export async function setReorderPoint (store: { readonly alerts: Pick<AlertWrites, 'setReorderPoint'> }, petId: bigint, reorderPoint: number,
  actor: Actor, clock: () => number): Promise<ReorderPoint> {
  const result = await store.alerts.setReorderPoint({ petId, reorderPoint, ...actor, at: new Date(clock()) })
  if (result.status === 'not_found') throw noEntry(petId)
  return result.point
}

/** The reorder point of a pet; not_found when the pet has no stock entry or no point. */
export async function getReorderPoint (store: { readonly alerts: Pick<AlertReads, 'getReorderPoint'> }, petId: bigint): Promise<ReorderPoint> {
  const point = await store.alerts.getReorderPoint(petId)
  if (point === null) throw new AppError('not_found', `Pet ${petId} has no stock entry or no reorder point.`)
  return point
}

/**
 * Removes the reorder point of a pet that has a stock entry (not_found otherwise); removing a point the pet does not
 * have succeeds (the result is the same: no point). Returns whether it had one.
 */
export async function clearReorderPoint (store: { readonly alerts: Pick<AlertWrites, 'clearReorderPoint'> }, petId: bigint): Promise<boolean> {
  const result = await store.alerts.clearReorderPoint(petId)
  if (result.status === 'not_found') throw noEntry(petId)
  return result.had
}

/** The stock entries at or below their reorder point, by petId: at most `limit` after `afterId` (from the first when null). */
export async function listLowStock (store: { readonly alerts: Pick<AlertReads, 'listLowStock'> }, afterId: bigint | null, limit: number): Promise<InventoryItem[]> {
  return await store.alerts.listLowStock({ afterId, limit })
}
