/**
 * Idempotency records: what a stock write sent with an Idempotency-Key leaves behind, so that a retry is answered
 * what the first request was. The stock area writes a record in the write's own transaction (a claim, below); this
 * area finds and purges them.
 */
import type { StockEntry } from '../../model.js'

/** What a write sent with an idempotency key records with its change, in the same transaction. */
export interface IdempotencyClaim {
  /** Whose key it is: keys of different API keys never meet. */
  scope: string
  key: string
  /** The request's fingerprint, to tell a retry from another request reusing the key. */
  fingerprint: string
  /** When the record expires: from then on the key is free again. */
  expiresAt: Date
}

/** The record of a write applied with an idempotency key. */
export interface IdempotencyRecord {
  fingerprint: string
  /** The entries as the write left them: what a retry is answered. */
  entries: StockEntry[]
  /**
   * What a write of the selling area left, as text (../selling/rows.ts holdText or orderText): the hold or order a
   * retry is answered; null for a stock write, whose entries are its answer.
   */
  response: string | null
  createdAt: Date
  expiresAt: Date
}

export interface IdempotencyReads {
  /** The record of an idempotency key, if one exists that has not expired at `at`. */
  findIdempotencyRecord (scope: string, key: string, at: Date): Promise<IdempotencyRecord | null>
}

export interface IdempotencyWrites {
  /** Deletes at most `limit` records that expired at `before` or earlier; returns how many it deleted. */
  purgeIdempotencyRecords (before: Date, limit: number): Promise<number>
}

/** The idempotency records of both stores; one contract suite (test/store/idempotency.contract.ts). */
export type IdempotencyStore = IdempotencyReads & IdempotencyWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const IDEMPOTENCY_WRITES = {
  purgeIdempotencyRecords: 'refuse'
} as const satisfies Record<keyof IdempotencyWrites, 'refuse' | 'skip'>
