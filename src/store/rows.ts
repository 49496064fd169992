/**
 * Row codecs shared by the SQLite and PostgreSQL stores: one column list and one mapper per entity. The two
 * drivers differ only in how a column arrives (SQLite: every integer a bigint, times as ISO text, booleans as 0/1;
 * PostgreSQL: int4 a number, int8 a bigint, timestamptz a Date, boolean a boolean); the mappers take either.
 */
import { randomBytes } from 'node:crypto'
import type { FeedPosition, IdempotencyRecord, StoreEpoch } from './types.js'
import type { ApiKeyRecord, InventoryItem, KeyScope, LedgerEntry, LedgerReason, Order, OrderStatus, Pet, PetImport, PetStatus, Plan, StockEntry, Tag } from '../domain/model.js'

export type Int = bigint | number
export type Time = string | Date

export const num = (value: Int): number => Number(value)
const numOrNull = (value: Int | null): number | null => value === null ? null : Number(value)
export const time = (value: Time): Date => value instanceof Date ? value : new Date(value)
export const timeOrNull = (value: Time | null): Date | null => value === null ? null : time(value)

export interface InventoryRow { pet_id: bigint, quantity: Int, status: PetStatus }
export interface EntryRow extends InventoryRow { revision: bigint }
export interface LedgerRow {
  id: bigint, pet_id: bigint, previous_quantity: Int | null, quantity: Int, reason: LedgerReason, note: string | null,
  key_id: string | null, request_id: string | null, batch_id: string | null, status: PetStatus | null,
  previous_status: PetStatus | null, created_at: Time
}
export interface OrderRow { id: bigint, pet_id: bigint, quantity: Int, ship_date: string, status: OrderStatus, complete: boolean | Int }
export interface KeyRow {
  id: string, name: string | null, plan: Plan, per_minute: Int | null, per_day: Int | null,
  created_at: Time, revoked_at: Time | null, banned_at: Time | null, banned_until: Time | null, ban_seconds: Int | null,
  scope: KeyScope, expires_at: Time | null, quota_id: string | null, replaced_by: string | null, last_used_at: Time | null,
  last_deprecated_use_at: Time | null
}

/** The columns each mapper reads, in one place for both stores' queries. */
export const INVENTORY_COLUMNS = 'i.pet_id, i.quantity, p.status'
export const ENTRY_COLUMNS = 'i.pet_id, i.quantity, p.status, i.revision'
export const LEDGER_COLUMNS = 'l.id, l.pet_id, l.previous_quantity, l.quantity, l.reason, l.note, l.key_id, l.request_id, l.batch_id, l.status, ' +
  'l.previous_status, l.created_at'
export const ORDER_COLUMNS = 'id, pet_id, quantity, ship_date, status, complete'
export const KEY_COLUMNS = 'id, name, plan, per_minute, per_day, created_at, revoked_at, banned_at, banned_until, ban_seconds, scope, expires_at, ' +
  'quota_id, replaced_by, last_used_at, last_deprecated_use_at'
export const PET_COLUMNS = 'id, name, status, category_id, category_name, photo_urls, tags'

/**
 * The store epoch of the change at feed position (`order`, `id`), two SQL expressions: the last epoch that began before
 * it (migration 11), or null for a change from before the store had epochs (an upgraded store's first changes). The
 * epochs are a handful of rows; the subquery reads them per change.
 */
export const EPOCH_OF = (order: string, id: string): string =>
  `(SELECT e.epoch FROM store_epochs e WHERE (e.after_order, e.after_id) < (${order}, ${id}) ORDER BY e.seq DESC LIMIT 1)`
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

export const toInventoryItem = (row: InventoryRow): InventoryItem => ({ petId: row.pet_id, quantity: num(row.quantity), status: row.status })

export const toStockEntry = (row: EntryRow): StockEntry => ({ ...toInventoryItem(row), revision: row.revision })

export interface IdempotencyRow { fingerprint: string, entries: string, created_at: Time, expires_at: Time }
export const IDEMPOTENCY_COLUMNS = 'fingerprint, entries, created_at, expires_at'

/**
 * The entries an idempotency record keeps, as JSON text with int64 values as decimal strings. The PostgreSQL store
 * writes the same shape in SQL (json_build_object), so the two must agree: test/store/contract.ts reads both back.
 */
export const entriesText = (entries: readonly StockEntry[]): string => JSON.stringify(entries.map((entry) =>
  ({ petId: String(entry.petId), quantity: entry.quantity, status: entry.status, revision: String(entry.revision) })))

export const toIdempotencyRecord = (row: IdempotencyRow): IdempotencyRecord => ({
  fingerprint: row.fingerprint,
  entries: (JSON.parse(row.entries) as Array<{ petId: string, quantity: number, status: PetStatus, revision: string }>).map((entry) =>
    ({ petId: BigInt(entry.petId), quantity: entry.quantity, status: entry.status, revision: BigInt(entry.revision) })),
  createdAt: time(row.created_at),
  expiresAt: time(row.expires_at)
})

export const toLedgerEntry = (row: LedgerRow): LedgerEntry => ({
  id: row.id,
  petId: row.pet_id,
  previousQuantity: numOrNull(row.previous_quantity),
  quantity: num(row.quantity),
  reason: row.reason,
  note: row.note,
  keyId: row.key_id,
  requestId: row.request_id,
  batchId: row.batch_id,
  status: row.status,
  previousStatus: row.previous_status,
  at: time(row.created_at)
})

export const toOrder = (row: OrderRow): Order => ({
  id: row.id,
  petId: row.pet_id,
  quantity: num(row.quantity),
  shipDate: row.ship_date,
  status: row.status,
  complete: row.complete === true || row.complete === 1n || row.complete === 1
})

export const toKey = (row: KeyRow): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  plan: row.plan,
  perMinute: numOrNull(row.per_minute),
  perDay: numOrNull(row.per_day),
  createdAt: time(row.created_at),
  revokedAt: timeOrNull(row.revoked_at),
  ban: row.banned_at === null || row.banned_until === null || row.ban_seconds === null
    ? null
    : { since: time(row.banned_at), until: time(row.banned_until), seconds: num(row.ban_seconds) },
  scope: row.scope,
  expiresAt: timeOrNull(row.expires_at),
  quotaId: row.quota_id ?? row.id,
  replacedBy: row.replaced_by,
  lastUsedAt: timeOrNull(row.last_used_at),
  lastDeprecatedUseAt: timeOrNull(row.last_deprecated_use_at)
})

export interface PetRow {
  id: bigint, name: string, status: PetStatus, category_id: bigint | null, category_name: string | null,
  photo_urls: string | null, tags: string | null
}

/** Tags keep their int64 ids as decimal strings inside the JSON column so they survive JSON.parse. */
function encodeTags (tags: Tag[] | undefined): string | null {
  return tags === undefined ? null : JSON.stringify(tags.map((t) => ({ id: t.id.toString(), name: t.name })))
}

function decodeTags (text: string | null): Tag[] | undefined {
  if (text === null) return undefined
  return (JSON.parse(text) as Array<{ id: string, name: string }>).map((t) => ({ id: BigInt(t.id), name: t.name }))
}

export function toPet (row: PetRow): Pet {
  const pet: Pet = { id: row.id, name: row.name, status: row.status }
  if (row.category_id !== null && row.category_name !== null) pet.category = { id: row.category_id, name: row.category_name }
  const tags = decodeTags(row.tags)
  if (tags !== undefined) pet.tags = tags
  if (row.photo_urls !== null) pet.photoUrls = JSON.parse(row.photo_urls) as string[]
  return pet
}

/** The columns of a pet row for an upsert, in table order after id. */
export function petColumns (pet: PetImport): [string, PetStatus, bigint | null, string | null, string | null, string | null] {
  return [pet.name, pet.status, pet.category?.id ?? null, pet.category?.name ?? null,
    pet.photoUrls === undefined ? null : JSON.stringify(pet.photoUrls), encodeTags(pet.tags)]
}

/**
 * Counts written records and tells onProgress every 1% (and at the end), so that a progress display of a
 * large import costs nothing measurable.
 */
export function progressReporter (total: number, onProgress: ((written: number, total: number) => void) | undefined): (records: number) => void {
  if (onProgress === undefined) return () => {}
  const step = Math.max(1, Math.floor(total / 100))
  let written = 0
  let next = step
  return (records) => {
    written += records
    if (written >= next || written === total) {
      onProgress(written, total)
      next = written + step
    }
  }
}
