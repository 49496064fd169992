/**
 * What the store contracts (./<area>.contract.ts) build their data with: records, changes and keys as the API and the
 * CLI make them, and reads of everything a store shows.
 */
import { MAX_QUANTITY, type ApiKeyRecord, type Ban, type InventoryItem, type Order, type OrderStatus, type Pet, type PetImport } from '../../src/model.js'
import type { NewApiKey } from '../../src/store/keys/types.js'
import type { StockAdjustment, StockChange } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'

export const INT64_MAX = 2n ** 63n - 1n
export const INT64_MIN = -(2n ** 63n)
/** The first integer a double cannot hold: 2^53 + 1. */
export const ABOVE_2_53 = 2n ** 53n + 1n

export function pet (id: bigint, overrides: Partial<PetImport> = {}): PetImport {
  return { id, name: `pet ${id}`, status: 'available', quantity: 1, ...overrides }
}

export function order (id: bigint, overrides: Partial<Order> = {}): Order {
  return { id, petId: 1n, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false, ...overrides }
}

/** The pet as getPet returns it: the import without its stock quantity. */
export function asPet (imported: PetImport): Pet {
  const result: PetImport = { ...imported }
  delete result.quantity
  return result
}

export function newKey (id: string, overrides: Partial<NewApiKey> = {}): NewApiKey {
  return {
    id,
    keyHash: `hash-of-${id}`,
    name: `key ${id}`,
    plan: 'free',
    perMinute: null,
    perDay: null,
    createdAt: new Date('2026-11-22T12:00:00.123Z'),
    ...overrides
  }
}

/** The record findApiKeyByHash/listApiKeys return for a new key: no hash, not revoked. */
export function asRecord (key: NewApiKey, revokedAt: Date | null = null, ban: Ban | null = null): ApiKeyRecord {
  return {
    id: key.id,
    name: key.name,
    plan: key.plan,
    perMinute: key.perMinute,
    perDay: key.perDay,
    createdAt: key.createdAt,
    revokedAt,
    ban,
    scope: key.scope ?? 'write',
    expiresAt: key.expiresAt ?? null,
    quotaId: key.quotaId ?? key.id,
    replacedBy: null,
    lastUsedAt: null,
    lastDeprecatedUseAt: null
  }
}

export const CHANGED_AT = new Date('2026-11-22T12:00:00.250Z')

/** A stock change as a plain PATCH makes it (no If-Match, reason adjustment), with overrides. */
export function stockChange (petId: bigint, quantity: number, overrides: Partial<StockChange> = {}): StockChange {
  return { petId, quantity, expectedRevisions: null, reason: 'adjustment', note: null, keyId: 'key_test', requestId: 'req-test', at: CHANGED_AT, ...overrides }
}

/** A relative stock change as a plain adjustment makes it (no If-Match, reason adjustment, 0..MAX_QUANTITY), with overrides. */
export function stockAdjustment (petId: bigint, delta: number, overrides: Partial<StockAdjustment> = {}): StockAdjustment {
  return {
    petId, delta, expectedRevisions: null, reason: 'adjustment', note: null, keyId: 'key_test', requestId: 'req-test', at: CHANGED_AT,
    allowed: { min: 0, max: MAX_QUANTITY }, ...overrides
  }
}

/** An unconditional stock change: the updated item (without its revision), or null when the store answers not_found. */
export async function setStock (store: Store, petId: bigint, quantity: number): Promise<InventoryItem | null> {
  const result = await store.stock.setQuantity(stockChange(petId, quantity))
  if (result.status === 'not_found') return null
  if (result.status !== 'updated') throw new Error(`an unconditional change without an idempotency key cannot be ${result.status}`)
  const { petId: id, quantity: stored, status } = result.entry
  return { petId: id, quantity: stored, status }
}

/** Everything observable in a store, for "nothing changed" checks. */
export async function snapshot (store: Store, petIds: bigint[]): Promise<unknown> {
  return {
    inventory: await store.stock.listInventory(),
    entries: await Promise.all(petIds.map((id) => store.stock.getStockEntry(id))),
    history: await Promise.all(petIds.map((id) => store.stock.stockHistory(id, 1000))),
    count: await store.catalog.countPets(),
    pets: await Promise.all(petIds.map((id) => store.catalog.getPet(id))),
    orders: await store.catalog.listOrders({ afterId: null, limit: 1000, status: null })
  }
}

/** Pages through all orders matching status with the given page size; returns the pages. */
export async function allPages (store: Store, limit: number, status: OrderStatus | null = null): Promise<Array<{ ids: bigint[], hasMore: boolean }>> {
  const pages: Array<{ ids: bigint[], hasMore: boolean }> = []
  let afterId: bigint | null = null
  for (;;) {
    const page = await store.catalog.listOrders({ afterId, limit, status })
    pages.push({ ids: page.orders.map((o) => o.id), hasMore: page.hasMore })
    const last = page.orders.at(-1)
    if (!page.hasMore || last === undefined || pages.length > 100) return pages
    afterId = last.id
  }
}
