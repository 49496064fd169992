import { AppError } from '../errors.js'
import type { Store } from '../store/types.js'
import type { InventoryItem } from './model.js'

/**
 * Sets the stock of one pet. The quantity is already validated (0..MAX_QUANTITY) at the edge.
 * A quantity change never changes the pet's status (docs/decisions.md: status is the pet's, not the stock's).
 */
export async function updateQuantity (store: Store, petId: bigint, quantity: number): Promise<InventoryItem> {
  const item = await store.setQuantity(petId, quantity)
  if (item === null) throw new AppError('not_found', `No inventory entry exists for pet ${petId}.`)
  return item
}
