/**
 * Holds on stock for a checkout: place one (all its lines or none), read and list them, extend, confirm (its units
 * are sold) and release one. What is available, and whether a hold is granted, is decided by the store in the write's
 * own transaction (src/store/selling/types.ts); here a request becomes a store call and the store's answer becomes a
 * hold as it stands at the instant of the answer, or the error that says why nothing was done.
 *
 * Every write needs an Idempotency-Key (./selling.ts): a retry is answered what the first request was.
 */
import { AppError } from '../errors.js'
import type { Hold, HoldLine, HoldState, StockEntry } from '../model.js'
import type { IdempotencyReads } from '../store/idempotency/types.js'
import { holdFromText } from '../store/selling/rows.js'
import { MAX_HOLD_LINES, type SellingReads, type SellingWrites } from '../store/selling/types.js'
import type { FeedPlace } from '../store/stock/types.js'
import { decodeStampCursor, encodeStampCursor } from './cursor.js'
import { madeBy } from './inventory.js'
import {
  HOLD_ID_PATTERN, holdAt, holdCaps, holdStateAt, InsufficientStockError, newHoldId, onceForKey, placementRefused, type HoldSettings, type Seller,
  type SellingKey
} from './selling.js'

export type { Seller } from './selling.js'

/** Pages of the holds' listing: the sizes of the store orders' listing. */
export const DEFAULT_HOLD_LIMIT = 100
export const MAX_HOLD_LIMIT = 1000
/** The version of the holds' listing's cursors. */
export const HOLD_CURSOR_PREFIX = 'h1:'
const HOLD_ID = new RegExp(HOLD_ID_PATTERN)

/** What the holds' operations use: the selling area, the idempotency records (to replay), the clock and the settings. */
export interface HoldsContext {
  store: {
    readonly selling: Pick<SellingReads, 'getHold' | 'listHolds'> & Pick<SellingWrites, 'placeHold' | 'endHold' | 'extendHold'>
    readonly idempotency: Pick<IdempotencyReads, 'findIdempotencyRecord'>
  }
  clock: () => number
  settings: HoldSettings
}

/** A hold to place, as the API validated it (lines 1 to MAX_HOLD_LINES, quantities in range). */
export interface HoldRequest {
  lines: readonly HoldLine[]
  /** Seconds until it expires; the default duration when absent. */
  expiresIn?: number | undefined
  reference?: string | null | undefined
}

/** A hold as a write left it, at the instant of the answer; `replayed`: the answer of an earlier request with the key. */
export interface HoldAnswer {
  hold: Hold
  replayed: boolean
}

/**
 * A confirmed hold and, unless replayed, the stock entries its sale left (in the hold's pet order), with the version
 * and feed place where the store told them: the listing learns of them as of any stock write.
 */
export interface HoldSale extends HoldAnswer {
  entries: StockEntry[]
  version?: bigint
  feed?: FeedPlace
}

/** A hold's id the API accepts: `hold_` and 20 base64url characters. */
export function isHoldId (id: string): boolean {
  return HOLD_ID.test(id)
}

/** Refuses lines that name a pet twice or are too many or too few: a hold holds each pet once. */
export function requireHoldLines (lines: readonly HoldLine[]): void {
  if (lines.length < 1 || lines.length > MAX_HOLD_LINES) {
    throw new AppError('invalid_request', `body.lines must hold 1 to ${MAX_HOLD_LINES} items.`)
  }
  const seen = new Map<bigint, number>()
  lines.forEach(({ petId }, index) => {
    const first = seen.get(petId)
    if (first !== undefined) {
      throw new AppError('invalid_request', `body.lines[${index}].petId repeats pet ${petId} of body.lines[${first}]: a pet appears once in a hold (add up its quantities).`)
    }
    seen.set(petId, index)
  })
}

/** The duration a hold is placed for: the default, or what was asked within the maximum. */
function durationOf (settings: HoldSettings, expiresIn: number | undefined): number {
  const seconds = expiresIn ?? settings.defaultTtlSeconds
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > settings.maxTtlSeconds) {
    throw new AppError('invalid_request', `body.expiresIn must be an integer from 1 to ${settings.maxTtlSeconds} (seconds).`)
  }
  return seconds
}

/**
 * Places a hold on every line or on none: granted only if each line's units are available when it commits, and the
 * quota stays within its caps. 404 for a pet without a stock entry, 409 insufficient_stock (every short line) or
 * hold_limit_reached otherwise; nothing is held then.
 */
export async function placeHold (context: HoldsContext, request: HoldRequest, seller: Seller, key: SellingKey): Promise<HoldAnswer> {
  const { store, clock, settings } = context
  requireHoldLines(request.lines)
  const seconds = durationOf(settings, request.expiresIn)
  const reference = request.reference ?? null
  const body = { lines: request.lines.map(({ petId, quantity }) => [petId, quantity]), expiresIn: request.expiresIn ?? null, reference }
  const result = await onceForKey(key, 'placeHold', null, body, async (claim) => {
    const at = new Date(clock())
    return await store.selling.placeHold({
      id: newHoldId(),
      lines: request.lines.map(({ petId, quantity }) => ({ petId, quantity })),
      reference,
      expiresAt: new Date(at.getTime() + seconds * 1000),
      caps: holdCaps(settings),
      ...seller,
      at,
      idempotency: claim
    })
  })
  switch (result.status) {
    case 'placed':
      return { hold: result.hold, replayed: false }
    case 'replayed':
      return { hold: holdFromText(result.response), replayed: true }
    default:
      throw placementRefused(result)
  }
}

/** One hold as it stands now (an active hold past its expiry is expired); 404 when there is none. */
export async function getHold (context: Pick<HoldsContext, 'store' | 'clock'>, id: string): Promise<Hold> {
  const hold = isHoldId(id) ? await context.store.selling.getHold(id) : null
  if (hold === null) throw new AppError('not_found', `No hold ${id} exists.`)
  return holdAt(hold, new Date(context.clock()))
}

/** What the listing filters by; all optional. */
export interface HoldFilter {
  petId?: bigint | undefined
  reference?: string | undefined
  /** The state now: `active` lists only holds that still count, `expired` also those not yet recorded as expired. */
  state?: HoldState | undefined
}

export interface HoldListing {
  holds: Hold[]
  /** The cursor of the next page; null when this page is the last. */
  nextCursor: string | null
}

/** One page of holds matching the filter, oldest first (by creation, then id), as they stand now. */
export async function listHolds (context: Pick<HoldsContext, 'store' | 'clock'>, filter: HoldFilter, page: { limit: number, cursor: string | null }): Promise<HoldListing> {
  const after = page.cursor === null ? null : decodeStampCursor(HOLD_CURSOR_PREFIX, page.cursor, HOLD_ID)
  const at = new Date(context.clock())
  // One more than the page: whether another page follows, without a second query.
  const found = await context.store.selling.listHolds({
    ...(filter.petId === undefined ? {} : { petId: filter.petId }),
    ...(filter.reference === undefined ? {} : { reference: filter.reference }),
    ...(filter.state === undefined ? {} : { state: filter.state }),
    at,
    after: after === null ? null : { createdAt: after.at, id: after.id },
    limit: page.limit + 1
  })
  const holds = found.slice(0, page.limit).map((hold) => holdAt(hold, at))
  const last = holds.at(-1)
  return { holds, nextCursor: found.length > page.limit && last !== undefined ? encodeStampCursor(HOLD_CURSOR_PREFIX, last.createdAt, last.id) : null }
}

/** What a write on a hold that was not done answers: 404, 409 hold_not_active, 409 hold_of_order. */
function refused (id: string, at: Date, result: { status: 'not_found' } | { status: 'not_active' | 'of_order', hold: Hold }): never {
  if (result.status === 'not_found') throw new AppError('not_found', `No hold ${id} exists.`)
  const hold = holdAt(result.hold, at)
  if (result.status === 'of_order') {
    throw new AppError('hold_of_order', `Hold ${id} keeps the stock of order ${String(hold.orderId)}: approve, deliver or cancel the order ` +
      'instead. Nothing was changed.')
  }
  const since = hold.endedAt === null ? '' : ` since ${hold.endedAt.toISOString()}`
  throw new AppError('hold_not_active', `Hold ${id} is ${hold.state}${since}, no longer active. Nothing was changed.`)
}

/**
 * Moves a hold's expiry to `expiresIn` seconds from now, at most HOLD_MAX_TTL_SECONDS after it was created (400 naming
 * the latest allowed otherwise). 404, 409 hold_not_active or hold_of_order when it cannot.
 */
export async function extendHold (context: HoldsContext, id: string, expiresIn: number, seller: Seller, key: SellingKey): Promise<HoldAnswer> {
  const { store, clock, settings } = context
  let at = new Date(clock())
  const result = await onceForKey(key, 'extendHold', id, { expiresIn }, async (claim) => {
    at = new Date(clock())
    const hold = isHoldId(id) ? await store.selling.getHold(id) : null
    if (hold === null) return { status: 'not_found' as const }
    const expiresAt = new Date(at.getTime() + expiresIn * 1000)
    const latest = new Date(hold.createdAt.getTime() + settings.maxTtlSeconds * 1000)
    if (hold.orderId === null && holdStateAt(hold, at) === 'active' && expiresAt.getTime() > latest.getTime()) {
      // A retry comes later than the request it retries: its bound may be passed when the first was not. The key's
      // record decides: a recorded write is replayed (or the key's reuse refused), as for any other write.
      if (await store.idempotency.findIdempotencyRecord(claim.scope, claim.key, at) !== null) return { status: 'recorded' as const }
      return { status: 'too_late' as const, latest }
    }
    return await store.selling.extendHold({ id, expiresAt, ...seller, at, idempotency: claim })
  })
  switch (result.status) {
    case 'extended':
      return { hold: holdAt(result.hold, at), replayed: false }
    case 'replayed':
      return { hold: holdFromText(result.response), replayed: true }
    case 'too_late':
      throw new AppError('invalid_request', `body.expiresIn would make hold ${id} expire after the latest allowed, ${result.latest.toISOString()} ` +
        `(${settings.maxTtlSeconds} seconds after it was placed): send at most ${Math.max(0, Math.floor((result.latest.getTime() - at.getTime()) / 1000))}.`)
    default:
      return refused(id, at, result)
  }
}

/**
 * Confirms a hold: its units leave the stock as a sale (ledger reason `sale`, the hold's reference), in one
 * transaction. 409 insufficient_stock when a pet has fewer units on hand than its line (the hold stays active), 404,
 * 409 hold_not_active or hold_of_order otherwise.
 */
export async function confirmHold (context: HoldsContext, id: string, seller: Seller, key: SellingKey): Promise<HoldSale> {
  const { at, result } = await endHold(context, id, 'confirmed', seller, key)
  switch (result.status) {
    case 'ended':
      return {
        hold: holdAt(result.hold, at),
        replayed: false,
        entries: result.entries,
        ...madeBy(result)
      }
    case 'replayed':
      return { hold: holdFromText(result.response), replayed: true, entries: [] }
    case 'insufficient':
      throw new InsufficientStockError(result.shortages, true)
    default:
      return refused(id, at, result)
  }
}

/** Releases a hold: its units count as available again at once. 404, 409 hold_not_active or hold_of_order otherwise. */
export async function releaseHold (context: HoldsContext, id: string, seller: Seller, key: SellingKey): Promise<HoldAnswer> {
  const { at, result } = await endHold(context, id, 'released', seller, key)
  switch (result.status) {
    case 'ended':
      return { hold: holdAt(result.hold, at), replayed: false }
    case 'replayed':
      return { hold: holdFromText(result.response), replayed: true }
    case 'insufficient':
      // A release sells nothing: no store answers it so.
      throw new Error(`The store answered the release of hold ${id} with a shortage`)
    default:
      return refused(id, at, result)
  }
}

/** Ends a hold through the holds' operations (an order's hold is refused: the order's moves end it). */
async function endHold (context: HoldsContext, id: string, ending: 'confirmed' | 'released', seller: Seller, key: SellingKey) {
  const { store, clock } = context
  let at = new Date(clock())
  const result = await onceForKey(key, ending === 'confirmed' ? 'confirmHold' : 'releaseHold', id, null, async (claim) => {
    at = new Date(clock())
    if (!isHoldId(id)) return { status: 'not_found' as const }
    return await store.selling.endHold({ id, ending, ofOrder: false, ...seller, at, idempotency: claim })
  })
  return { at, result }
}
