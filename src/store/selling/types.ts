/**
 * Selling: holds on stock (a checkout's, or an order's) and the orders placed through the API that keep their stock
 * with one. Implemented by both stores; one contract suite (test/store/selling.contract.ts).
 *
 * What is available of a pet at an instant is its on-hand quantity less the units of the holds that count then: active
 * and not yet expired. A hold is granted only when every line's units are available when it commits, decided in the
 * same transaction on both stores (SQLite: one writer at a time; PostgreSQL: the pets' inventory rows locked FOR
 * UPDATE in pet order, as every stock write locks them), so no interleaving of holds, confirmations and stock writes,
 * on any number of instances, ever holds or sells more than is on hand. A hold stops counting at the instant it
 * expires: every read and write compares expiresAt with its own `at`; expireHolds only records it and emits the event.
 *
 * Every write records what it changed of availability in the stock ledger, in its own transaction, so the change feed,
 * the streams and webhooks serve it: one row per pet of the hold, with the event (hold.placed, hold.confirmed,
 * hold.released, hold.expired), the hold's id and reference, the pet's on-hand quantity as it stands (`quantity`, and
 * `previous_quantity` null), the units of the pet held after it (`held`) and no reason. A confirmation also writes, per
 * pet, the stock change itself: reason `sale`, the hold's reference and id, before its hold.confirmed row. Event rows
 * are not stock changes: they join no pet's ledger chain and move no entry's revision or the listing's version.
 */
import type { Hold, HoldLine, HoldState, OrderRecord, PetStatus, StockEntry } from '../../model.js'
import type { IdempotencyClaim } from '../idempotency/types.js'
import type { FeedPlace } from '../stock/types.js'

/** The caps on what one quota may hold at a time (the domain's configuration). */
export interface HoldCaps {
  /** Active, unexpired holds (checkouts' and orders' alike). */
  activeHolds: number
  /** Units held by them, all pets together. */
  heldUnits: number
}

/** Who writes, as the ledger records it, and when. */
export interface SellingActor {
  quotaId: string
  keyId: string | null
  requestId: string | null
  at: Date
}

/**
 * What a write of this area sent with an Idempotency-Key records: the claim of a stock write, and, as the record's
 * response (IdempotencyRecord.response), the hold as the write left it (./rows.ts holdText), or for a write that
 * places or moves an order, the order (orderText): what a retry is answered. Its entries are an empty list.
 */
export type SellingClaim = IdempotencyClaim

/** A new hold. */
export interface NewHold extends SellingActor {
  /** Made by the domain: `hold_` and 20 random base64url characters. */
  id: string
  /** 1 to MAX_HOLD_LINES lines; a pet appears once. */
  lines: readonly HoldLine[]
  reference: string | null
  /** When it stops counting; null for an order's hold. */
  expiresAt: Date | null
  caps: HoldCaps
  /** Places an order with it (one line): the order's ship date (RFC 3339); the store gives the order its id. */
  order?: { shipDate: string }
  idempotency?: SellingClaim
}

/** Why a line cannot be held: fewer units are available than it asks for. */
export interface Shortage {
  petId: bigint
  requested: number
  /** What is available of the pet at the write's instant (never below 0). */
  available: number
}

export type PlaceHoldResult =
  /** The hold was granted; with its order when one was placed. feed: where the store can tell (SQLite). */
  | { status: 'placed', hold: Hold, order?: OrderRecord, feed?: FeedPlace }
  /** A pet of the lines has no stock entry: nothing was held. */
  | { status: 'not_found', petId: bigint }
  /** At least one line asks for more than is available: nothing was held; every short line is listed. */
  | { status: 'insufficient', shortages: Shortage[] }
  /** The quota's active holds or held units would exceed its caps: nothing was held. */
  | { status: 'limit_reached', cap: keyof HoldCaps, current: number, max: number }
  /** An unexpired record of the idempotency key exists: nothing was held. */
  | { status: 'recorded' }

/** How a hold ends through the API. */
export type HoldEnding = 'confirmed' | 'released'

export interface EndHold extends SellingActor {
  id: string
  ending: HoldEnding
  /**
   * Whether the hold may be an order's: false through the holds' operations (an order's hold is refused, of_order),
   * true when the order's transition ends it (delivered confirms, cancelled releases).
   */
  ofOrder: boolean
  idempotency?: SellingClaim
}

export type EndHoldResult =
  /**
   * The hold ended; after a confirmation, the stock entries as the sale left them (in the hold's pet order), and, where
   * the store tells (SQLite), the inventory version the sale made: the listing learns of them as of a stock write.
   */
  | { status: 'ended', hold: Hold, entries: StockEntry[], version?: bigint, feed?: FeedPlace }
  | { status: 'not_found' }
  /** The hold is not active at the write's instant (confirmed, released, or expired): nothing was changed. */
  | { status: 'not_active', hold: Hold }
  /** The hold keeps an order's stock and ofOrder was false: nothing was changed. */
  | { status: 'of_order', hold: Hold }
  /**
   * A confirmation of a line whose pet has fewer units on hand than the line (its stock was set below what was held):
   * nothing was sold, the hold stays active; every short line is listed (available: the pet's on-hand quantity).
   */
  | { status: 'insufficient', shortages: Shortage[] }
  | { status: 'recorded' }

export interface ExtendHold extends SellingActor {
  id: string
  /** The new expiry; the domain bounds it (no later than created + the maximum duration). */
  expiresAt: Date
  idempotency?: SellingClaim
}

export type ExtendHoldResult =
  | { status: 'extended', hold: Hold }
  | { status: 'not_found' }
  | { status: 'not_active', hold: Hold }
  | { status: 'of_order', hold: Hold }
  | { status: 'recorded' }

/** A hold as a listing filters them. */
export interface HoldQuery {
  petId?: bigint
  reference?: string
  /** The state at `at` (an active hold past its expiry is expired). */
  state?: HoldState
  at: Date
  /** Holds created after this one in the listing's order (created_at, id), from the start when null. */
  after: { createdAt: Date, id: string } | null
  limit: number
}

/** A stock entry as the listing shows it, with its availability. */
export interface AvailableEntry extends Availability {
  status: PetStatus
}

/** The units of a pet on hand, held and available at an instant (available never below 0). */
export interface Availability {
  petId: bigint
  onHand: number
  held: number
  available: number
}

/** An order's move to another state. */
export interface OrderTransition extends SellingActor {
  orderId: bigint
  /** approved (from placed), delivered (from placed or approved: its hold is confirmed), cancelled (its hold released). */
  to: 'approved' | 'delivered' | 'cancelled'
  idempotency?: SellingClaim
}

export type OrderTransitionResult =
  /** As for EndHoldResult: entries (a delivery's sale) and version. */
  | { status: 'moved', order: OrderRecord, hold: Hold | null, entries: StockEntry[], version?: bigint, feed?: FeedPlace }
  | { status: 'not_found' }
  /** The order's state does not allow the move (or it is an imported order, which the API does not move). */
  | { status: 'wrong_state', order: OrderRecord }
  /** Delivery of a pet with fewer units on hand than the order: nothing was changed. */
  | { status: 'insufficient', shortages: Shortage[] }
  | { status: 'recorded' }

export interface SellingReads {
  /** One hold, as stored (its state may be active past its expiry: the domain reads it at its instant). */
  getHold (id: string): Promise<Hold | null>
  /** Holds matching the query, in the order (createdAt, id), at most `limit`. */
  listHolds (query: HoldQuery): Promise<Hold[]>
  /** What is on hand, held and available of each of `petIds` at `at`; pets without a stock entry are left out. */
  availability (petIds: readonly bigint[], at: Date): Promise<Availability[]>
  /** What is on hand, held and available of every pet with a stock entry at `at`, by petId. */
  availabilityAll (at: Date): Promise<Availability[]>
  /**
   * The listing with availability: the stock entries after petId `after` (from the first when null), by petId, at
   * most `limit` (all when null), each with its pet's status and what is on hand, held and available at `at`: one
   * query, so a page costs its own rows, not the whole listing's.
   */
  availableEntries (after: bigint | null, limit: number | null, at: Date): Promise<AvailableEntry[]>
  /** One order, imported or placed through the API. */
  getOrder (id: bigint): Promise<OrderRecord | null>
}

export interface SellingWrites {
  placeHold (hold: NewHold): Promise<PlaceHoldResult>
  endHold (change: EndHold): Promise<EndHoldResult>
  extendHold (change: ExtendHold): Promise<ExtendHoldResult>
  moveOrder (transition: OrderTransition): Promise<OrderTransitionResult>
  /**
   * Records as expired at most `limit` active holds whose expiry is at or before `at` (their hold.expired rows in
   * the ledger), oldest expiry first; returns them. Safe on several instances at once: each hold is recorded once.
   */
  expireHolds (at: Date, limit: number): Promise<Hold[]>
  /** Deletes at most `limit` ended holds (not of an order) that ended at or before `before`; returns how many. */
  purgeHolds (before: Date, limit: number): Promise<number>
}

export type SellingStore = SellingReads & SellingWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const SELLING_WRITES = {
  placeHold: 'refuse',
  endHold: 'refuse',
  extendHold: 'refuse',
  moveOrder: 'refuse',
  expireHolds: 'refuse',
  purgeHolds: 'refuse'
} as const satisfies Record<keyof SellingWrites, 'refuse' | 'skip'>

/** The most lines one hold may have. */
export const MAX_HOLD_LINES = 100
