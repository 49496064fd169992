/**
 * The client's public types: the records and bodies (./records.ts), what each call returns, the options, and the
 * PetstoreClient interface that createClient (./index.ts) implements.
 */
import type { PetstoreError } from './errors.js'
import type { Operation, InventoryItem, InventoryUpdate, InventoryAdjustment, InventoryBatch, BatchEntry, InventoryChange, Pet, Order, OrderQuery, RateLimitStatus, Int64Input, RateLimit, OrderDetails, OrderPlacement, Hold, HoldPlacement, HoldQuery } from './records.js'

export type { JsonOf, ResponsesOf, Operation, InventoryItem, InventoryUpdate, InventoryAdjustment, InventoryBatch, BatchEntry, BatchFailure, InventoryChange, ChangeEntry, Pet, Order, OrderQuery, RateLimitStatus, Int64Input, RateLimit, StockReason, OrderDetails, OrderPlacement, Hold, HoldPlacement, HoldQuery, Shortage } from './records.js'

/** What every successful call returns besides its body. */
export interface ResponseMeta {
  /** The HTTP status (200, or 304 for a conditional GET that matched). */
  status: number
  /** The `ETag` header: send it back in `ifNoneMatch` (GET) or `ifMatch` (update). */
  etag: string | null
  /** `X-Request-Id`: quote it when reporting a problem. */
  requestId: string | null
  rateLimit: RateLimit | null
  headers: Headers
}

/** The result of a conditional GET: the body, or `notModified` when the sent ETag still matches. */
export type Conditional<T> = ResponseMeta & ({ notModified: false, data: T } | { notModified: true, data: null })

/**
 * The listing, and the change feed's cursor it reflects (`Changes-Cursor`; null while the feed is empty or on a 304):
 * keep the listing, then follow `inventoryChanges({ after: changesCursor })`.
 */
export type InventoryListing = Conditional<InventoryItem[]> & { changesCursor: string | null }

/** What a stock write returns: the entry, and whether the answer replays an earlier try with the same key. */
export interface WriteResult extends ResponseMeta {
  data: InventoryItem
  /** True when the service answered from its record of this call's Idempotency-Key: it applied the write once, earlier. */
  replayed: boolean
  /** The Idempotency-Key the write was sent with. */
  idempotencyKey: string
}

/** One page of the change feed and where the next starts (an empty page: caught up; ask again later from `nextCursor`). */
export interface ChangePage extends ResponseMeta {
  data: InventoryChange[]
  nextCursor: string | null
}

/**
 * Options of the inventory reads. `include: 'availability'` adds `onHand`, `held` and `available` to each entry, as they
 * stand at the instant of the answer (read fresh: no ETag, no `changesCursor`, never `notModified`); without it the
 * entries are exactly the specification's.
 */
export interface InventoryReadOptions {
  /** An ETag held: the answer is `notModified` while it is current (not with `include`). */
  ifNoneMatch?: string
  include?: 'availability'
}

/** Options of streamChanges. */
export interface StreamOptions {
  /** Start after this cursor (a change's `cursor`, e.g. the listing's `changesCursor`); without it, from now. */
  after?: string
  /** Ends the iteration: it then returns, without an error. */
  signal?: AbortSignal
  /**
   * A connection that brings nothing for this long (no change, no heartbeat) is taken for dead and opened again
   * (60,000). The service sends a heartbeat every 15 s by default.
   */
  idleTimeoutMs?: number
}

/** What a batch returns: every entry it left, in its order, with their ETags. */
export interface BatchResult extends ResponseMeta {
  data: BatchEntry[]
  replayed: boolean
  idempotencyKey: string
}

/** Options of a stock write. */
export interface WriteOptions {
  /** An ETag: the write applies only to an entry unchanged since, else 412 `precondition_failed`. */
  ifMatch?: string
  /**
   * The Idempotency-Key (1 to 255 printable ASCII characters); a new UUID per call by default. Pass your own to retry a
   * write across process restarts (a job queue's id): within the service's retention it is applied at most once.
   */
  idempotencyKey?: string
}

/** The deprecation headers of getPet (RFC 9745 `Deprecation`, RFC 8594 `Sunset`, their `Link`). */
export interface DeprecationInfo {
  deprecatedAt: Date | null
  sunset: Date | null
  link: string | null
}

/** Query of listInventoryPage: page size (1 to 1000; 100 when not given) and the cursor from the previous page. */
export type InventoryPageQuery = NonNullable<Operation<'/inventory', 'get'>['parameters']['query']>

/** One page of the inventory listing, ordered by petId, and where the next one is (null on the last page). */
export interface InventoryPage extends ResponseMeta {
  data: InventoryItem[]
  /** The absolute URL of the `rel="next"` link. */
  nextUrl: string | null
  /** The cursor of that link, for `listInventoryPage({ cursor })`. */
  nextCursor: string | null
  /**
   * `Changes-Cursor`, on the first page only (null on later pages, and while the feed is empty): every change up to it
   * is in the pages; follow `inventoryChanges({ after: changesCursor })` from it to keep a copy.
   */
  changesCursor: string | null
}

/** One page of orders and where the next one is (null on the last page). */
export interface OrderPage extends ResponseMeta {
  data: Order[]
  /** The absolute URL of the `rel="next"` link. */
  nextUrl: string | null
  /** The cursor of that link, for `listOrders({ cursor })`. */
  nextCursor: string | null
}

/**
 * What a hold or order write returns: the hold or order as the write left it, and whether the answer replays an earlier
 * try with the same key (the service did nothing again: it answered what the first try did).
 */
export interface SellingResult<T> extends ResponseMeta {
  data: T
  replayed: boolean
  /** The Idempotency-Key the write was sent with: pass it again to retry the write later, across restarts. */
  idempotencyKey: string
}

/** Options of a hold or order write: the service requires an Idempotency-Key, which the client makes unless given one. */
export type SellingOptions = Pick<WriteOptions, 'idempotencyKey'>

/** One page of holds and where the next one is (null on the last page). */
export interface HoldPage extends ResponseMeta {
  data: Hold[]
  /** The absolute URL of the `rel="next"` link. */
  nextUrl: string | null
  /** The cursor of that link, for `listHolds({ cursor })`. */
  nextCursor: string | null
}

/** What the client tells `onRateLimited` before it sleeps on a 429 and tries again. */
export interface RateLimitedEvent {
  /** The operationId of the refused call: `listInventory`, `updateInventory`, `streamInventoryChanges`, ... */
  operation: string
  /**
   * The refusal, as the call throws it when the hook declines the wait: its `code` (`rate_limited`, or
   * `too_many_streams` for a change stream), `requestId` and `rateLimit` (the window that refused it).
   */
  error: PetstoreError
  /** What the service asked for (`Retry-After`), in seconds; undefined when the answer named none. */
  retryAfterSeconds: number | undefined
  /** How long the client is about to sleep, in milliseconds: exactly `Retry-After` when the service named one. */
  waitMs: number
  /** The try that was refused, from 1; the next is `attempt + 1`, and a call makes at most `maxAttempts`. */
  attempt: number
  maxAttempts: number
}

export interface ClientOptions {
  /** The service's address, e.g. `https://api.petstore.example`; `/v1` is appended when it is not there. */
  baseUrl: string
  /** The API key (`psk_live_...`); sent as a bearer token and never put in an error or message. */
  apiKey: string
  /** A fetch implementation; the global fetch by default. */
  fetch?: typeof fetch
  /** Tries per call in total, retries included (4). */
  maxAttempts?: number
  /** The backoff base: the n-th retry waits up to baseDelayMs * 2^(n-1) (500). */
  baseDelayMs?: number
  /**
   * The longest wait before a retry, 429s included: a service asking for a longer one makes the call throw at once
   * instead (60,000).
   */
  maxDelayMs?: number
  /**
   * Called before the client sleeps on a 429 to try again (not when it gives up anyway: past `maxAttempts`, or a wait
   * above `maxDelayMs`), and awaited. Return `false` to decline the wait: the call then throws the 429's PetstoreError
   * at once. Throw to make the call throw that instead. Anything else (`true`, nothing) lets it sleep `waitMs` and retry.
   */
  onRateLimited?: (event: RateLimitedEvent) => boolean | void | Promise<boolean | void>
  /** Per-try timeout (AbortSignal.timeout); none by default. A timed-out try is retried like a network error. */
  timeoutMs?: number
  /** How to wait between tries (setTimeout by default); injected by tests. */
  sleep?: (ms: number) => Promise<void>
  /** A number in [0, 1) for the jitter (Math.random by default). */
  random?: () => number
  /** Milliseconds since the epoch (Date.now by default); decides when a remembered ban is over. */
  now?: () => number
  /** The User-Agent header. */
  userAgent?: string
  /** Makes the Idempotency-Key of a write that was given none (a random UUID by default); injected by tests. */
  newKey?: () => string
}

/** The client: one method per operation, plus iterators over every stock entry, order and change. */
export interface PetstoreClient {
  /**
   * All stock entries, ordered by petId, with the feed cursor they reflect; with `ifNoneMatch`, `notModified` when
   * unchanged; with `include: 'availability'`, each with what is on hand, held and available now.
   */
  listInventory (options?: InventoryReadOptions): Promise<InventoryListing>
  /**
   * One page of the stock entries, ordered by petId (`limit` of them, 100 by default), and the cursor of the next page.
   * Pages carry no ETag: use listInventory to revalidate the whole listing. `include: 'availability'` as listInventory.
   */
  listInventoryPage (query?: InventoryPageQuery): Promise<InventoryPage>
  /**
   * Every stock entry, ordered by petId, page after page (`limit` per request, 100 by default), following the
   * `rel="next"` links: for an inventory too large to hold in one answer.
   */
  allInventory (query?: Omit<InventoryPageQuery, 'cursor'>): AsyncGenerator<InventoryItem, void, undefined>
  /**
   * One stock entry with its ETag; with `ifNoneMatch`, `notModified` when unchanged; with `include: 'availability'`,
   * what is on hand, held and available now (no ETag). 404 `not_found` if none.
   */
  getInventoryItem (petId: Int64Input, options?: InventoryReadOptions): Promise<Conditional<InventoryItem>>
  /**
   * Sets one pet's stock to an absolute quantity. With `ifMatch` (an ETag from getInventoryItem or a previous
   * update) the update applies only if the entry is unchanged, else 412 `precondition_failed`.
   */
  updateInventory (petId: Int64Input, update: InventoryUpdate, options?: WriteOptions): Promise<WriteResult>
  /**
   * Adds `delta` to one pet's stock (negative to take away), atomically, without reading it first; 409
   * `stock_out_of_range` when the result would leave 0..1,000,000,000. With `ifMatch` it applies only to an unchanged
   * entry. Retried like every write: its Idempotency-Key makes a retry after a lost answer apply nothing twice.
   */
  adjustInventory (petId: Int64Input, adjustment: InventoryAdjustment, options?: WriteOptions): Promise<WriteResult>
  /**
   * Changes the stock of several pets at once (1 to 100 changes), all or none: when any change cannot apply, it throws
   * `batch_refused` (409) with `failures` listing each, and nothing changed. Costs one request of quota per change.
   * Retried like every write, with its Idempotency-Key.
   */
  batchUpdateInventory (batch: InventoryBatch, options?: Pick<WriteOptions, 'idempotencyKey'>): Promise<BatchResult>
  /** One page of the change feed after `after` (a change's `cursor`; from the first change without it). */
  listInventoryChanges (query?: { after?: string, limit?: number }): Promise<ChangePage>
  /**
   * Every change after `after`, oldest first, page after page, until the feed is caught up; store the `cursor` of the
   * last change you processed and start there next time. Never misses or repeats a change.
   */
  inventoryChanges (query?: { after?: string, limit?: number }): AsyncGenerator<InventoryChange, void, undefined>
  /**
   * Every change after `after` (from now without it), each as soon as it is committed, for as long as you iterate: one
   * long-lived connection (Server-Sent Events), opened again from the last change received (`Last-Event-ID`) whenever
   * it drops or the service ends it, so no change is missed or repeated. A reconnect after a connection that worked
   * waits up to the service's `retry` (jittered); failed connects are retried like calls (`Retry-After` on 429 and 503,
   * backoff otherwise, also for `too_many_streams`) and throw after `maxAttempts` in a row. Each connect counts as one
   * request. Stop with `break` or `signal`.
   */
  streamChanges (options?: StreamOptions): AsyncGenerator<InventoryChange, void, undefined>
  /** A pet by id (deprecated operation: look at `deprecation`); 410 `gone` after the sunset. */
  getPet (petId: Int64Input): Promise<ResponseMeta & { data: Pet, deprecation: DeprecationInfo }>
  /** One page of orders. */
  listOrders (query?: OrderQuery): Promise<OrderPage>
  /** Every order, page after page, following the `rel="next"` links. */
  allOrders (query?: Omit<OrderQuery, 'cursor'>): AsyncGenerator<Order, void, undefined>
  /**
   * Places an order: its units are held at once, until it is delivered or cancelled (201). Throws `insufficient_stock`
   * (409, `shortages` saying how many are available) or `hold_limit_reached`, and nothing is held. Like every hold and
   * order write it carries an Idempotency-Key (made here unless given) and is retried with it: a retry after a lost
   * answer places nothing twice and is answered what the first try was (`replayed`).
   */
  placeOrder (order: OrderPlacement, options?: SellingOptions): Promise<SellingResult<OrderDetails>>
  /** One order, imported or placed through the API, with its state (cancelled ones too); 404 `not_found` if none. */
  getOrder (orderId: Int64Input): Promise<ResponseMeta & { data: OrderDetails }>
  /** placed -> approved; any other move throws `order_state_conflict` (409). */
  approveOrder (orderId: Int64Input, options?: SellingOptions): Promise<SellingResult<OrderDetails>>
  /**
   * placed or approved -> delivered: the units are sold (they leave the stock). Throws `order_state_conflict`, or
   * `insufficient_stock` when the stock was set below the order since.
   */
  deliverOrder (orderId: Int64Input, options?: SellingOptions): Promise<SellingResult<OrderDetails>>
  /** placed or approved -> cancelled: the units are released. Throws `order_state_conflict` from another state. */
  cancelOrder (orderId: Int64Input, options?: SellingOptions): Promise<SellingResult<OrderDetails>>
  /**
   * Holds units of one or more pets, all or none, for `expiresIn` seconds (the service's default without it), 201.
   * Throws `insufficient_stock` (409, with `shortages`) or `hold_limit_reached`, and nothing is held. Retried with its
   * Idempotency-Key like every write.
   */
  placeHold (hold: HoldPlacement, options?: SellingOptions): Promise<SellingResult<Hold>>
  /** One hold as it stands now (an active hold past its expiry is `expired`); 404 `not_found` if none. */
  getHold (holdId: string): Promise<ResponseMeta & { data: Hold }>
  /** One page of holds, oldest first, by pet, reference or state. */
  listHolds (query?: HoldQuery): Promise<HoldPage>
  /** Every hold matching the query, page after page, following the `rel="next"` links. */
  allHolds (query?: Omit<HoldQuery, 'cursor'>): AsyncGenerator<Hold, void, undefined>
  /** Moves an active hold's expiry to `expiresIn` seconds from now; `hold_not_active` (409) once it has ended. */
  extendHold (holdId: string, expiresIn: number, options?: SellingOptions): Promise<SellingResult<Hold>>
  /**
   * Sells the held units (they leave the stock, reason `sale`). Throws `hold_not_active` (409: expired, released or
   * already confirmed by another call), `hold_of_order` (move the order instead) or `insufficient_stock`.
   */
  confirmHold (holdId: string, options?: SellingOptions): Promise<SellingResult<Hold>>
  /** Gives the held units back at once; `hold_not_active` or `hold_of_order` (409) otherwise. */
  releaseHold (holdId: string, options?: SellingOptions): Promise<SellingResult<Hold>>
  /**
   * The calling key's plan, scopes, quota (both windows), ban and expiry. Spends none of the quota and works during a
   * ban; bounded by a small budget of its own (429 `rate_limited` beyond it, retried after Retry-After like any 429).
   */
  rateLimit (): Promise<ResponseMeta & { data: RateLimitStatus }>
}

