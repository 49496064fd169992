/**
 * The catalogue: pets and orders, written by imports (orders placed through the API are the selling area's,
 * ../selling/types.ts; an import leaves them as they are, and the classic listing here shows them but for cancelled
 * ones). An import also sets the stock the records bring, with ledger rows, in its one transaction. Implemented by both
 * stores; one contract suite (test/store/catalog.contract.ts).
 */
import type { Order, OrderStatus, Pet, PetImport, PetStatus } from '../../model.js'

export interface OrderPage {
  /** Orders with id > afterId, ascending; at most `limit` of them. */
  orders: Order[]
  /** True when more orders match after the last one returned. */
  hasMore: boolean
}

/**
 * What an import wrote: pets, and orders. An order of the file whose id is an order placed through the API is not
 * written (the API's order, with its hold and its stock, is the truth; an import must not rewrite a sale): `orders`
 * leaves it out, and `keptOrders` lists its id, present only when there is one, so a caller sees what was left alone
 * without the import failing for it.
 */
export interface ImportResult { pets: number, orders: number, keptOrders?: bigint[] }

/** A pet as the store holds it when an import reaches it: its entry's quantity (null: none) and status (null: no pet). */
export interface ImportedCurrent { quantity: number | null, status: PetStatus | null }

/**
 * What an import changes in what the listing shows of one pet, as the ledger records it: the previous (null: the entry
 * is new) and new quantity, and the new and previous status where they are part of the change (else null).
 */
export interface ImportedStockChange {
  previous: number | null
  quantity: number
  status: PetStatus | null
  previousStatus: PetStatus | null
}

/**
 * What an imported pet changes, given what the store holds now: nothing, or the change the ledger records. The
 * domain's rule (importedStockChange); the stores only persist it.
 */
export type ImportedStockRule = (pet: PetImport, current: ImportedCurrent) => ImportedStockChange | null

export interface ImportOptions {
  /** Decides, inside the import's transaction, which stock each pet changes. */
  stockChange: ImportedStockRule
  /** Called as records are written (pets first, then orders): records written so far, and the total. */
  onProgress?: (written: number, total: number) => void
  /** The time recorded in the stock ledger for the quantities the import sets; now by default. */
  at?: Date
}

export interface CatalogReads {
  getPet (id: bigint): Promise<Pet | null>
  countPets (): Promise<number>
  /** The classic listing: imported and API orders, except cancelled ones (the classic Petstore deleted those). */
  listOrders (query: { afterId: bigint | null, limit: number, status: OrderStatus | null }): Promise<OrderPage>
}

export interface CatalogWrites {
  /**
   * Upserts all pets and orders in one transaction, and the stock `options.stockChange` says each pet changes:
   * each such change writes the entry and a ledger entry with reason `import`, and grows the entry's revision (a
   * changed pet status does too).
   */
  importData (data: { pets: PetImport[], orders: Order[] }, options: ImportOptions): Promise<ImportResult>
}

export type CatalogStore = CatalogReads & CatalogWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const CATALOG_WRITES = {
  importData: 'refuse'
} as const satisfies Record<keyof CatalogWrites, 'refuse' | 'skip'>
