import { AppError } from '../errors.js'
import type { Store } from '../store/types.js'
import type { LedgerEntry, StockEntry, StockReason } from './model.js'

/** What a stock update asks for; the quantity and note are already validated at the edge. */
export interface StockUpdate {
  quantity: number
  reason: StockReason
  note: string | null
  /** Compare-and-set on the entry's revision (If-Match); null: unconditional, `*` included. */
  expectedRevisions: readonly bigint[] | null
}

/** Who makes a change, as the ledger records it. */
export interface Actor {
  keyId: string | null
  requestId: string | null
}

/**
 * The entry's strong validator (its ETag): the revision, which grows with every change to what the entry
 * shows. Opaque to clients; `revisionOf` reads it back.
 */
export function entryTag (entry: Pick<StockEntry, 'revision'>): string {
  return `"r${entry.revision}"`
}

/** The revision named by an entity tag; null for a tag this service never issued (it can match nothing). */
export function revisionOf (tag: string): bigint | null {
  const match = /^"r([0-9]{1,19})"$/.exec(tag)
  return match === null ? null : BigInt(match[1] as string)
}

/**
 * Sets the stock of one pet and records the change in the ledger, atomically.
 * A quantity change never changes the pet's status (docs/decisions.md: status is the pet's, not the stock's).
 */
export async function updateQuantity (store: Store, petId: bigint, update: StockUpdate, actor: Actor, clock: () => number): Promise<StockEntry> {
  const result = await store.setQuantity({ petId, ...update, ...actor, at: new Date(clock()) })
  switch (result.status) {
    case 'updated':
      return result.entry
    case 'not_found':
      throw new AppError('not_found', `No inventory entry exists for pet ${petId}.`)
    case 'stale':
      throw new AppError('precondition_failed',
        `The inventory entry of pet ${petId} has changed since the ETag sent in If-Match; its current ETag is ${entryTag(result.current)}.`,
        { ETag: entryTag(result.current) })
  }
}

/** One stock entry; throws not_found when the pet has none. */
export async function getStockEntry (store: Store, petId: bigint): Promise<StockEntry> {
  const entry = await store.getStockEntry(petId)
  if (entry === null) throw new AppError('not_found', `No inventory entry exists for pet ${petId}.`)
  return entry
}

/** The newest `limit` ledger entries of a pet, oldest first; null when the pet has neither stock nor history. */
export async function stockHistory (store: Store, petId: bigint, limit: number): Promise<LedgerEntry[] | null> {
  const entries = await store.stockHistory(petId, limit)
  if (entries.length > 0) return entries
  // No recorded change: an entry that predates the ledger has an empty history; no entry at all is unknown.
  return await store.getStockEntry(petId) === null ? null : entries
}
