/** Row codecs of idempotency_keys, shared by both stores (../rows.ts: how the drivers differ). */
import type { PetStatus, StockEntry } from '../../model.js'
import { time, type Time } from '../rows.js'
import type { IdempotencyRecord } from './types.js'

export interface IdempotencyRow { fingerprint: string, entries: string, response: string | null, created_at: Time, expires_at: Time }
export const IDEMPOTENCY_COLUMNS = 'fingerprint, entries, response, created_at, expires_at'

/**
 * The entries an idempotency record keeps, as JSON text with int64 values as decimal strings. The PostgreSQL store
 * writes the same shape in SQL (json_build_object), so the two must agree: test/store/stock.contract.ts reads both back.
 */
export const entriesText = (entries: readonly StockEntry[]): string => JSON.stringify(entries.map((entry) =>
  ({ petId: String(entry.petId), quantity: entry.quantity, status: entry.status, revision: String(entry.revision) })))

export const toIdempotencyRecord = (row: IdempotencyRow): IdempotencyRecord => ({
  fingerprint: row.fingerprint,
  entries: (JSON.parse(row.entries) as Array<{ petId: string, quantity: number, status: PetStatus, revision: string }>).map((entry) =>
    ({ petId: BigInt(entry.petId), quantity: entry.quantity, status: entry.status, revision: BigInt(entry.revision) })),
  response: row.response,
  createdAt: time(row.created_at),
  expiresAt: time(row.expires_at)
})
