/**
 * Idempotency keys (draft-ietf-httpapi-idempotency-key-header-07): a write sent with a key applies at most once per
 * caller and key while the key's record lives, and a retry of it is answered what the first one left. The record is
 * written by the store in the write's own transaction, so a write and its record exist together or not at all.
 *
 * Only a write that applied is recorded: one that changed nothing (unknown pet, stale If-Match, out of range) may be
 * sent again with the same key and is decided again, as Stripe saves no result for a request that did not execute.
 */
import { createHash } from 'node:crypto'
import { AppError } from '../errors.js'
import type { IdempotencyClaim, IdempotencyReads, IdempotencyRecord, IdempotencyWrites } from '../store/idempotency/types.js'
import type { StockAdjustmentResult } from '../store/stock/types.js'
import type { StockEntry } from '../model.js'

/** The longest idempotency key (the draft leaves it to the server; Stripe's is 255). */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255
/** How long a key's record is kept by default: 24 hours, as Stripe. */
export const DEFAULT_IDEMPOTENCY_TTL_SECONDS = 86_400

/**
 * The replay of a write recorded under a key: the entries a stock write left, and what a selling write answered (the
 * hold or order as it left them, as the store wrote it: src/store/selling/rows.ts); null for a stock write.
 */
export interface Replayed { status: 'replayed', entries: StockEntry[], response: string | null }

/** A store's answer to a write, where a key recorded by an earlier write became the replay of that write. */
export type Keyed<R> = Exclude<R, { status: 'recorded' }> | Replayed
export type KeyedResult = Keyed<StockAdjustmentResult>

/**
 * The fingerprint of a request: what must be the same for a second request with the key to be a retry of the first
 * (the operation, its target and its parsed content, in a fixed order). SHA-256 of their JSON, int64 values as text.
 */
export function requestFingerprint (request: readonly unknown[]): string {
  const text = JSON.stringify(request, (_key, value: unknown) => typeof value === 'bigint' ? value.toString() : value)
  return createHash('sha256').update(text).digest('hex')
}

export interface IdempotencyOptions {
  store: { readonly idempotency: Pick<IdempotencyReads, 'findIdempotencyRecord'> }
  clock: () => number
  /** How long a key's record is kept after its write. */
  ttlSeconds: number
}

/** The idempotency keys of one process: the records live in the store; the keys in flight here, in memory. */
export class IdempotencyKeys {
  readonly ttlSeconds: number
  readonly #store: { readonly idempotency: Pick<IdempotencyReads, 'findIdempotencyRecord'> }
  readonly #clock: () => number
  /** `scope \n key` of every keyed write this process is running. */
  readonly #inFlight = new Set<string>()

  constructor ({ store, clock, ttlSeconds }: IdempotencyOptions) {
    this.#store = store
    this.#clock = clock
    this.ttlSeconds = ttlSeconds
  }

  /**
   * Runs `write` once for this caller's key: the write gets the claim to record with its change, and takes its time
   * when called (a second try must judge the record's expiry at its own time, not the first's). When the store
   * answers that the key is recorded (an earlier write, or one another instance committed meanwhile), the recorded
   * write is replayed if it was the same request, else the key's reuse is refused (422 idempotency_key_reused). A key
   * whose write is still running in this process is refused at once (409 idempotency_key_in_flight); on another
   * instance the store makes the second write wait for the first and then replays it.
   */
  async once<R extends { status: string }> (scope: string, key: string, request: readonly unknown[],
    write: (claim: IdempotencyClaim) => Promise<R>): Promise<Keyed<R>> {
    const id = `${scope}\n${key}`
    if (this.#inFlight.has(id)) {
      throw new AppError('idempotency_key_in_flight', 'A request with this Idempotency-Key is still being processed; send the retry after it has been answered.')
    }
    this.#inFlight.add(id)
    try {
      const fingerprint = requestFingerprint(request)
      // Twice at most: a record seen by the write and gone when read again has expired in between, and the key is free.
      for (let attempt = 1; attempt <= 2; attempt++) {
        const result = await write({ scope, key, fingerprint, expiresAt: new Date(this.#clock() + this.ttlSeconds * 1000) })
        if (result.status !== 'recorded') return result as Keyed<R>
        const record = await this.#store.idempotency.findIdempotencyRecord(scope, key, new Date(this.#clock()))
        if (record !== null) return this.#replay(record, fingerprint)
      }
      throw new AppError('idempotency_key_in_flight', 'The record of this Idempotency-Key changed while the request was processed; send it again.')
    } finally {
      this.#inFlight.delete(id)
    }
  }

  #replay (record: IdempotencyRecord, fingerprint: string): Replayed {
    if (record.fingerprint !== fingerprint) {
      throw new AppError('idempotency_key_reused', `This Idempotency-Key was used for a different request (another operation, pet, body or ` +
        `If-Match) at ${record.createdAt.toISOString()}; a new request needs a new key. Nothing was changed.`)
    }
    return { status: 'replayed', entries: record.entries, response: record.response }
  }
}

/** Deletes every record that has expired, a batch at a time, yielding between batches; returns how many it deleted. */
export async function purgeExpiredKeys (store: { readonly idempotency: Pick<IdempotencyWrites, 'purgeIdempotencyRecords'> }, clock: () => number, batch = 500): Promise<number> {
  let purged = 0
  for (;;) {
    const deleted = await store.idempotency.purgeIdempotencyRecords(new Date(clock()), batch)
    purged += deleted
    if (deleted < batch) return purged
    await new Promise((resolve) => setImmediate(resolve))
  }
}
