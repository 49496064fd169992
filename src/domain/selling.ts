/**
 * What every selling write shares (holds, and the orders placed through the API): its idempotency key, which is
 * required, the state of a hold at an instant, the ids of holds, and the caps of a quota. The holds' and the orders'
 * operations are built on these (./holds.ts, ./orders.ts), so that a retry, an expiry and a cap mean the same in both.
 *
 * A selling write cannot be sent twice by accident: a checkout retried after a lost answer must not hold the stock
 * twice, and a confirmation retried must not be answered 409 hold_not_active when the first one sold. So every write
 * needs an Idempotency-Key (Stripe's rule for payments), and a retry is answered what the first request was, from the
 * record the store wrote with the change (the hold or order as the write left it: IdempotencyRecord.response).
 */
import { randomBytes } from 'node:crypto'
import { AppError } from '../errors.js'
import type { Hold, HoldState } from '../model.js'
import type { HoldCaps, PlaceHoldResult, SellingClaim, Shortage } from '../store/selling/types.js'
import type { IdempotencyKeys, Keyed, Replayed } from './idempotency.js'

/** The prefix of a hold's id, so that a hold's id is never taken for another resource's. */
export const HOLD_ID_PREFIX = 'hold_'
/** 15 random bytes: 20 base64url characters, 120 bits (no id is guessed or met twice). */
const HOLD_ID_BYTES = 15
/** A hold's id as the API accepts it: the prefix and 20 base64url characters. */
export const HOLD_ID_PATTERN = '^hold_[A-Za-z0-9_-]{20}$'

/** A new hold's id: `hold_` and 20 random base64url characters. */
export function newHoldId (): string {
  return HOLD_ID_PREFIX + randomBytes(HOLD_ID_BYTES).toString('base64url')
}

/**
 * The state of a hold at an instant: an active hold whose expiry is at or before `at` is expired from that instant,
 * whatever the store still says (a sweeper records it later), as every read and write of the stores decides it.
 */
export function holdStateAt (hold: Pick<Hold, 'state' | 'expiresAt'>, at: Date): HoldState {
  if (hold.state === 'active' && hold.expiresAt !== null && hold.expiresAt.getTime() <= at.getTime()) return 'expired'
  return hold.state
}

/**
 * A hold as it stands at an instant: the stored hold, expired (and ended when it expired) if its expiry has passed.
 * What every answer shows, so that two reads at the same instant never disagree with what a write would decide.
 */
export function holdAt (hold: Hold, at: Date): Hold {
  if (holdStateAt(hold, at) !== 'expired' || hold.state === 'expired') return hold
  return { ...hold, state: 'expired', endedAt: hold.expiresAt }
}

/**
 * Who places or moves a hold or an order: the key's quota (whose caps count it), the key and the request, as the
 * ledger records them.
 */
export interface Seller {
  quotaId: string
  keyId: string | null
  requestId: string | null
}

/** The settings of holds (HOLD_* and HOLDS_* in the configuration). */
export interface HoldSettings {
  /** How long a hold placed without expiresIn lasts. */
  readonly defaultTtlSeconds: number
  /** The longest a hold may last from its creation, extensions included. */
  readonly maxTtlSeconds: number
  /** A quota's caps: active holds, and the units they hold (orders' holds count too). */
  readonly maxActivePerQuota: number
  readonly maxUnitsPerQuota: number
  /** How long an ended hold is kept before the sweeper deletes it. */
  readonly retentionDays: number
}

/** The defaults of the settings: 15 minutes as Saleor's checkout reservations, a day at most, and a month's history. */
export const HOLD_DEFAULTS: HoldSettings = Object.freeze({
  defaultTtlSeconds: 900,
  maxTtlSeconds: 86_400,
  maxActivePerQuota: 1000,
  maxUnitsPerQuota: 100_000,
  retentionDays: 30
})

/** The caps a store checks when it places a hold, from the settings. */
export function holdCaps (settings: HoldSettings): HoldCaps {
  return { activeHolds: settings.maxActivePerQuota, heldUnits: settings.maxUnitsPerQuota }
}

/**
 * Why a placement (a checkout's hold, or an order's) held nothing, as its caller reads it: 404 for a pet without a stock
 * entry, 409 insufficient_stock with every short line, or 409 hold_limit_reached.
 */
export function placementRefused (result: Extract<PlaceHoldResult, { status: 'not_found' | 'insufficient' | 'limit_reached' }>): AppError {
  switch (result.status) {
    case 'not_found':
      return new AppError('not_found', `No inventory entry exists for pet ${result.petId}; nothing was held.`)
    case 'insufficient':
      return new InsufficientStockError(result.shortages)
    case 'limit_reached':
      return holdLimitReached(result.cap, result.current, result.max)
  }
}

/** The cap a store says was reached, as its caller reads it. */
export function holdLimitReached (cap: keyof HoldCaps, current: number, max: number): AppError {
  const what = cap === 'activeHolds' ? 'active holds' : 'held units'
  return new AppError('hold_limit_reached', `This key's quota has ${current} ${what} and may have at most ${max} ` +
    `(${cap === 'activeHolds' ? 'HOLDS_MAX_ACTIVE_PER_QUOTA' : 'HOLDS_MAX_UNITS_PER_QUOTA'}); confirm or release a hold first. Nothing was held.`)
}

/**
 * A selling write's key: the process's keys, the key the caller sent (null: none, which is refused), and whose keys
 * they are (the caller's quota id, as for stock writes: a rotated key answers its predecessor's retries).
 */
export interface SellingKey {
  keys: IdempotencyKeys
  key: string | null
  owner: string | null
}

/** The key a selling write was sent with; a 400 naming the header when it has none. */
export function requireIdempotencyKey (key: string | null): string {
  if (key === null) {
    throw new AppError('invalid_request', 'Idempotency-Key is required on this write: send a new key (a UUID v4 is a good one) with ' +
      'each hold or order write, and the same key when you retry it, so that a retry never holds or sells twice.')
  }
  return key
}

/** What a selling write answered: what the store did now, or the answer an earlier request with the key recorded. */
export type SellingOutcome<R extends { status: string }> =
  | Exclude<R, { status: 'recorded' }>
  | { status: 'replayed', response: string }

/**
 * Runs a selling write once for the caller's key (required): `operation` names the write (placeHold, confirmHold...),
 * `target` what it acts on (a hold's id, an order's id, null for a new one) and `body` the request's parsed content;
 * together they are the request's fingerprint (src/domain/idempotency.ts requestFingerprint). The write gets the claim
 * to record with its change; a retry with the key and the same request gets the recorded response back (the caller
 * decodes it), another request with the key is 422 idempotency_key_reused.
 */
export async function onceForKey<R extends { status: string }> (key: SellingKey, operation: string, target: string | bigint | null, body: unknown,
  write: (claim: SellingClaim) => Promise<R>): Promise<SellingOutcome<R>> {
  const sent = requireIdempotencyKey(key.key)
  // Holds and orders count against their quota's caps: a write of this area always has one.
  if (key.owner === null) throw new Error('A selling write needs the API key it belongs to')
  const result: Keyed<R> = await key.keys.once(key.owner, sent, [operation, target, body ?? null], write)
  if (result.status !== 'replayed') return result as Exclude<R, { status: 'recorded' }>
  const { response } = result as Replayed
  // Only a selling write records a response, and only a selling write has this fingerprint: a record without one
  // can only be damaged.
  if (response === null) throw new Error(`The record of Idempotency-Key for ${operation} holds no response`)
  return { status: 'replayed', response }
}

/**
 * 409 insufficient_stock: at least one line asks for more units than are available (or, confirming, than are on hand);
 * nothing was held or sold. Carries every short line, which the API adds to the Error body as `shortages`.
 */
export class InsufficientStockError extends AppError {
  constructor (readonly shortages: readonly Shortage[], selling = false) {
    super('insufficient_stock', shortageMessage(shortages, selling))
  }
}

/** "Pet 12 has 3 units available, 5 were requested; ..." and what was not done. */
function shortageMessage (shortages: readonly Shortage[], selling: boolean): string {
  const lines = shortages.map(({ petId, requested, available }) =>
    `pet ${petId} has ${available} unit${available === 1 ? '' : 's'} ${selling ? 'on hand' : 'available'}, ${requested} ${requested === 1 ? 'was' : 'were'} requested`)
  return `Not enough stock: ${lines.join('; ')}. ${selling ? 'Nothing was sold; the hold stays active.' : 'Nothing was held.'}`
}
