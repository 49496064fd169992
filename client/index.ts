/**
 * A small typed client for the Petstore Inventory Service: the package `@petstore/inventory-client` (client/package.json,
 * no runtime dependencies), also importable as `petstore-inventory/client` from the service's own package.
 *
 * Types come from the service's OpenAPI document (client/schema.ts, generated); int64 values are bigint,
 * parsed losslessly from the JSON (client/int64.ts, generated, says where they are). Retries follow the API's
 * client rules: on 429 `rate_limited` wait exactly `Retry-After`; on 502/503/504 and network errors back off
 * exponentially with full jitter; give up after `maxAttempts` tries; never retry `key_banned` or another 4xx.
 * Every write carries an `Idempotency-Key`, made once per call and sent again with each of its retries, so a retried
 * write never applies twice (a write whose first try is still running is retried after 409 `idempotency_key_in_flight`).
 */
import { eventStreamReader, type StreamEvent } from './event-stream.js'
import { JsonNumber, parseExact, requireExactJson, stringifyExact } from './exact-json.js'
import { INT64_PATHS } from './int64.js'
import type { paths } from './schema.js'

type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never
type ResponsesOf<O> = O extends { responses: infer R } ? R : never
type Operation<P extends keyof paths, M extends keyof paths[P]> = paths[P][M]

/** One stock entry; `petId` is an exact int64. */
export type InventoryItem = JsonOf<ResponsesOf<Operation<'/inventory', 'get'>>[200]>[number]
/** The body of updateInventory: the new absolute quantity and, optionally, why. */
export type InventoryUpdate = JsonOf<NonNullable<Operation<'/inventory/{petId}', 'patch'>['requestBody']>>
/** The body of adjustInventory: what to add to the quantity (negative to take away) and, optionally, why. */
export type InventoryAdjustment = JsonOf<NonNullable<Operation<'/inventory/{petId}/adjustments', 'post'>['requestBody']>>
/** The body of batchUpdateInventory: 1 to 100 changes, each a quantity to set or a delta to add for one pet. */
export type InventoryBatch = JsonOf<NonNullable<Operation<'/inventory/batch', 'post'>['requestBody']>>
/** One entry a batch left, with its new ETag. */
export type BatchEntry = JsonOf<ResponsesOf<Operation<'/inventory/batch', 'post'>>[200]>['entries'][number]
/** Why one change of a refused batch cannot apply (`PetstoreError.failures`). */
export type BatchFailure = NonNullable<JsonOf<ResponsesOf<Operation<'/inventory/batch', 'post'>>[409]>['failures']>[number]
/** One stock change from the feed; `cursor` is where the feed resumes after it. */
export type InventoryChange = JsonOf<ResponsesOf<Operation<'/inventory/changes', 'get'>>[200]>[number]
/** A pet (deprecated operation); ids are exact int64. */
export type Pet = JsonOf<ResponsesOf<Operation<'/pets/{petId}', 'get'>>[200]>
/** A store order; `id` and `petId` are exact int64. */
export type Order = JsonOf<ResponsesOf<Operation<'/store/orders', 'get'>>[200]>[number]
/** Query of listOrders: page size, cursor from the previous page, status filter. */
export type OrderQuery = NonNullable<Operation<'/store/orders', 'get'>['parameters']['query']>
/** The calling key's standing: plan, scopes, both windows (`limit`, `remaining`, `reset`, `used`), ban and expiry. */
export type RateLimitStatus = JsonOf<ResponsesOf<Operation<'/rate_limit', 'get'>>[200]>

type AnyResponse = {
  [P in keyof paths]: { [M in keyof paths[P]]: ResponsesOf<paths[P][M]>[keyof ResponsesOf<paths[P][M]>] }[keyof paths[P]]
}[keyof paths]
type CodeOf<R> = R extends { content: { 'application/json': { code: infer C } } } ? C : never

/** Every error code the API document lists for some operation (`not_found`, `rate_limited`, ...). */
export type ApiErrorCode = CodeOf<AnyResponse>
/** Failures without an API error body: no answer, no answer in time, or an answer that is not the API's. */
export type ClientErrorCode = 'network_error' | 'timeout' | 'unexpected_response'

/** An id as the client accepts it: a bigint, a safe integer, or the canonical decimal text of an int64. */
export type Int64Input = bigint | number | string

/** The rate-limit window that binds the key right now (`X-RateLimit-*`); `reset` is Unix time in seconds. */
export interface RateLimit {
  limit: number
  remaining: number
  reset: number
}

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
   * unchanged.
   */
  listInventory (options?: { ifNoneMatch?: string }): Promise<InventoryListing>
  /**
   * One page of the stock entries, ordered by petId (`limit` of them, 100 by default), and the cursor of the next page.
   * Pages carry no ETag: use listInventory to revalidate the whole listing.
   */
  listInventoryPage (query?: InventoryPageQuery): Promise<InventoryPage>
  /**
   * Every stock entry, ordered by petId, page after page (`limit` per request, 100 by default), following the
   * `rel="next"` links: for an inventory too large to hold in one answer.
   */
  allInventory (query?: Omit<InventoryPageQuery, 'cursor'>): AsyncGenerator<InventoryItem, void, undefined>
  /** One stock entry with its ETag; with `ifNoneMatch`, `notModified` when unchanged. 404 `not_found` if none. */
  getInventoryItem (petId: Int64Input, options?: { ifNoneMatch?: string }): Promise<Conditional<InventoryItem>>
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
   * The calling key's plan, scopes, quota (both windows), ban and expiry. Spends none of the quota and works during a
   * ban; bounded by a small budget of its own (429 `rate_limited` beyond it, retried after Retry-After like any 429).
   */
  rateLimit (): Promise<ResponseMeta & { data: RateLimitStatus }>
}

/** A failed call: the API's error (`status`, `code`, `message`) or a client-side one (`status` 0). */
export class PetstoreError extends Error {
  /** The HTTP status; 0 when no HTTP answer was received. */
  readonly status: number
  readonly code: ApiErrorCode | ClientErrorCode
  /** `X-Request-Id` of the answer, when there was one. */
  readonly requestId: string | null
  /** `Retry-After` in seconds, when the server sent it (429, 503), or what is left of a remembered ban. */
  readonly retryAfterSeconds: number | undefined
  /** Requests sent for this call (0 when it failed before sending, e.g. on a remembered ban). */
  readonly attempts: number
  /** The `ETag` of the answer: on 412 `precondition_failed`, the entry's current tag to retry with. */
  readonly etag: string | null
  /**
   * A write's Idempotency-Key. When a write gave up without an answer (network errors, timeouts, 5xx), it may or may
   * not have applied: call it again with `{ idempotencyKey }` set to this, and it applies at most once.
   */
  idempotencyKey: string | null = null
  /** On 409 `batch_refused`: every change of the batch that cannot apply (its index, petId, code and message). */
  readonly failures: BatchFailure[] | null
  /** The rate-limit window of the answer (`X-RateLimit-*`), when it had one: on a 429, the window that refused. */
  readonly rateLimit: RateLimit | null

  constructor (init: { status: number, code: ApiErrorCode | ClientErrorCode, message: string, requestId?: string | null, retryAfterSeconds?: number | undefined, attempts: number, etag?: string | null, failures?: BatchFailure[] | null, rateLimit?: RateLimit | null, cause?: unknown }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause })
    this.name = 'PetstoreError'
    this.status = init.status
    this.code = init.code
    this.requestId = init.requestId ?? null
    this.retryAfterSeconds = init.retryAfterSeconds
    this.attempts = init.attempts
    this.etag = init.etag ?? null
    this.failures = init.failures ?? null
    this.rateLimit = init.rateLimit ?? null
  }
}

/**
 * 403 `insufficient_scope`: the key may not call this operation (a read-only key calling a write). Never retried: only
 * another key helps. `requiredScope` is the scope the server named (`inventory:write`).
 */
export class InsufficientScopeError extends PetstoreError {
  readonly requiredScope: string | null

  constructor (init: ConstructorParameters<typeof PetstoreError>[0] & { requiredScope: string | null }) {
    super(init)
    this.name = 'InsufficientScopeError'
    this.requiredScope = init.requiredScope
  }
}

/** The scope a Bearer challenge names (RFC 6750 section 3: scope="..."), or null. */
function challengedScope (header: string | null): string | null {
  const match = header === null ? null : /(?:^|[\s,])scope="([^"]*)"/i.exec(header)
  return match === null ? null : match[1] as string
}

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n
const INT64_TEXT = /^-?(0|[1-9][0-9]{0,18})$/

/** The canonical decimal text of an int64 id; throws (before anything is sent) for anything else. */
function int64Text (id: Int64Input, name: string): string {
  let value: bigint
  if (typeof id === 'bigint') {
    value = id
  } else if (typeof id === 'number') {
    // A number above 2^53 may already be another id: refuse rather than send the wrong one.
    if (!Number.isSafeInteger(id)) throw new RangeError(`${name} ${id} is not a safe integer; pass a bigint or a decimal string`)
    value = BigInt(id)
  } else if (typeof id === 'string' && INT64_TEXT.test(id)) {
    value = BigInt(id)
  } else {
    throw new RangeError(`${name} must be a bigint, a safe integer or the canonical decimal text of an int64`)
  }
  if (value < INT64_MIN || value > INT64_MAX) throw new RangeError(`${name} ${value} is outside the int64 range`)
  return value.toString()
}

function isRecord (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof JsonNumber)
}

function toBigInts (value: unknown, path: readonly string[]): unknown {
  const [step, ...rest] = path
  if (step === undefined) {
    if (!(value instanceof JsonNumber)) return value
    if (!/^-?[0-9]+$/.test(value.text)) throw new TypeError(`expected an int64, got ${value.text}`)
    return BigInt(value.text)
  }
  if (step === '[]') {
    if (Array.isArray(value)) value.forEach((item, index) => { value[index] = toBigInts(item, rest) })
  } else if (isRecord(value)) {
    for (const key of step === '{}' ? Object.keys(value) : [step]) {
      if (Object.hasOwn(value, key)) value[key] = toBigInts(value[key], rest)
    }
  }
  return value
}

function toNumbers (value: unknown): unknown {
  if (value instanceof JsonNumber) return Number(value.text)
  if (Array.isArray(value)) return value.map(toNumbers)
  if (isRecord(value)) {
    for (const key of Object.keys(value)) value[key] = toNumbers(value[key])
  }
  return value
}

/** Parses a body keeping every digit: int64 places (from the OpenAPI document) become bigint, the rest number. */
function parseBody (text: string, operationId: string, status: number): unknown {
  const value = parseExact(text)
  for (const path of INT64_PATHS[operationId]?.[String(status)] ?? []) toBigInts(value, path)
  return toNumbers(value)
}

/** `Retry-After` as seconds: delay-seconds or an HTTP-date (RFC 9110). */
function retryAfterSeconds (header: string | null, now: number): number | undefined {
  if (header === null) return undefined
  if (/^\s*[0-9]+\s*$/.test(header)) return Number(header)
  const at = Date.parse(header)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000))
}

function integerHeader (headers: Headers, name: string): number | null {
  const value = headers.get(name)
  return value !== null && /^[0-9]+$/.test(value) ? Number(value) : null
}

function rateLimitOf (headers: Headers): RateLimit | null {
  const limit = integerHeader(headers, 'x-ratelimit-limit')
  const remaining = integerHeader(headers, 'x-ratelimit-remaining')
  const reset = integerHeader(headers, 'x-ratelimit-reset')
  return limit === null || remaining === null || reset === null ? null : { limit, remaining, reset }
}

/** The targets of a `Link` header with the given relation (RFC 8288), resolved against the request URL. */
function linkTarget (header: string | null, rel: string, base: string): string | null {
  for (const link of header?.split(/,(?=\s*<)/) ?? []) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(link)
    if (match === null) continue
    const rels = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))/i.exec(match[2] ?? '')
    const values = (rels?.[1] ?? rels?.[2] ?? '').toLowerCase().split(/\s+/)
    if (values.includes(rel)) return new URL(match[1] ?? '', base).href
  }
  return null
}

function deprecationOf (headers: Headers, base: string): DeprecationInfo {
  const deprecation = /^@(-?[0-9]+)$/.exec(headers.get('deprecation') ?? '')
  const sunset = headers.get('sunset')
  const sunsetAt = sunset === null ? Number.NaN : Date.parse(sunset)
  return {
    deprecatedAt: deprecation === null ? null : new Date(Number(deprecation[1]) * 1000),
    sunset: Number.isNaN(sunsetAt) ? null : new Date(sunsetAt),
    link: linkTarget(headers.get('link'), 'deprecation', base)
  }
}

const RETRIED_STATUSES = new Set([502, 503, 504])
/**
 * The page size of the inventory when none is given: the service's own default once it pages. Always sent, since a
 * listing request with neither limit nor cursor is answered the whole inventory.
 */
const INVENTORY_PAGE_SIZE = 100
/** The change stream's reconnection delay until the service names one (the SSE `retry` field). */
const STREAM_RETRY_MS = 1000
/** The change stream's event type. */
const CHANGE_EVENT = 'inventory.changed'
/** An Idempotency-Key the service takes as it is when sent bare: no space at either end, no quote first. */
const IDEMPOTENCY_KEY = /^[\x21\x23-\x7E](?:[\x20-\x7E]{0,253}[\x21-\x7E])?$/

interface Call {
  operationId: string
  method: 'GET' | 'PATCH' | 'POST'
  /** A write's Idempotency-Key, the same on every try of the call. */
  idempotencyKey?: string
  url: string
  headers?: Record<string, string | undefined>
  body?: unknown
}

interface Answer {
  meta: ResponseMeta
  body: unknown
  /** The URL requested, against which links resolve. */
  url: string
}

/**
 * Creates a client. Nothing is sent until a method is called. The client remembers a `key_banned` answer
 * until its `Retry-After` has passed: meanwhile every call fails at once with that error, without a request.
 */
export function createClient (options: ClientOptions): PetstoreClient {
  const {
    apiKey,
    fetch: fetchImpl = globalThis.fetch,
    maxAttempts = 4,
    baseDelayMs = 500,
    maxDelayMs = 60_000,
    timeoutMs,
    sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    random = Math.random,
    now = Date.now,
    userAgent = 'petstore-inventory-client/1.0.0',
    newKey = () => globalThis.crypto.randomUUID(),
    onRateLimited
  } = options
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw new RangeError('maxAttempts must be an integer >= 1')
  requireExactJson()
  const base = new URL(options.baseUrl)
  base.search = ''
  base.hash = ''
  const prefix = base.pathname.replace(/\/+$/, '')
  base.pathname = prefix.endsWith('/v1') ? prefix : `${prefix}/v1`
  const url = (path: string, query?: Record<string, string | number | undefined>) => {
    const target = new URL(base.href + path)
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value !== undefined) target.searchParams.set(name, String(value))
    }
    return target.href
  }
  let bannedUntil = 0

  /** Full jitter: a uniform wait in [0, min(maxDelayMs, baseDelayMs * 2^(attempt-1))). */
  const backoff = (attempt: number) => random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1))

  /** How long to wait before the next try after this failure, or null when it must not be retried. */
  function delayAfter (error: PetstoreError, attempt: number): number | null {
    // Only another key helps.
    if (error instanceof InsufficientScopeError) return null
    const asked = error.retryAfterSeconds === undefined ? undefined : error.retryAfterSeconds * 1000
    // Waiting less than the server asked would only earn another refusal (and strikes towards a ban).
    if (asked !== undefined && asked > maxDelayMs) return null
    if (error.code === 'rate_limited') return asked ?? backoff(attempt)
    // The same write's earlier try is still running on the service: its answer will be replayed to a later try.
    if (error.code === 'idempotency_key_in_flight') return backoff(attempt)
    if (error.status === 0) return backoff(attempt)
    if (RETRIED_STATUSES.has(error.status)) {
      // Retry-After is the floor; the jitter on top keeps clients that failed together from returning together.
      return asked === undefined ? backoff(attempt) : Math.min(maxDelayMs, asked + backoff(attempt))
    }
    return null
  }

  async function errorOf (response: Response, attempt: number, operationId: string): Promise<PetstoreError> {
    const requestId = response.headers.get('x-request-id')
    const retryAfter = retryAfterSeconds(response.headers.get('retry-after'), now())
    let body: unknown
    try {
      // Lossless, as for answers: ids in an error body (a refused batch's failures) stay exact.
      body = parseBody(await response.text(), operationId, response.status)
    } catch {
      body = undefined
    }
    const known = isRecord(body) && typeof body.code === 'string' && typeof body.message === 'string'
      ? { code: body.code as ApiErrorCode, message: body.message }
      : { code: 'unexpected_response' as const, message: `HTTP ${response.status} without an API error body` }
    const init = {
      status: response.status,
      ...known,
      requestId,
      retryAfterSeconds: retryAfter,
      attempts: attempt,
      etag: response.headers.get('etag'),
      failures: isRecord(body) && Array.isArray(body.failures) ? body.failures as BatchFailure[] : null,
      rateLimit: rateLimitOf(response.headers)
    }
    return response.status === 403 && known.code === 'insufficient_scope'
      ? new InsufficientScopeError({ ...init, requiredScope: challengedScope(response.headers.get('www-authenticate')) })
      : new PetstoreError(init)
  }

  /** Before sleeping `waitMs` on a 429: asks onRateLimited, and throws the refusal when it declines the wait. */
  async function mayWaitOut (operation: string, failure: PetstoreError, waitMs: number, attempt: number): Promise<void> {
    if (onRateLimited === undefined || failure.status !== 429) return
    const answer = await onRateLimited({ operation, error: failure, retryAfterSeconds: failure.retryAfterSeconds, waitMs, attempt, maxAttempts })
    if (answer === false) throw failure
  }

  function failureOf (error: unknown, attempt: number): PetstoreError {
    const timedOut = error instanceof Error && error.name === 'TimeoutError'
    return new PetstoreError({
      status: 0,
      code: timedOut ? 'timeout' : 'network_error',
      message: timedOut ? `No answer from ${base.origin} within ${timeoutMs} ms` : `Could not reach ${base.origin}`,
      attempts: attempt,
      cause: error
    })
  }

  async function send (call: Call): Promise<Answer> {
    // The status call is answered during a ban (with the ban): it is how a banned client learns when it ends.
    if (now() < bannedUntil && call.operationId !== 'getRateLimit') {
      const left = Math.ceil((bannedUntil - now()) / 1000)
      throw new PetstoreError({
        status: 429,
        code: 'key_banned',
        message: `The API key is banned for ${left} more s; no request was sent.`,
        retryAfterSeconds: left,
        attempts: 0
      })
    }
    const headers: Record<string, string> = {
      authorization: `Bearer ${apiKey}`,
      accept: 'application/json',
      'user-agent': userAgent
    }
    for (const [name, value] of Object.entries(call.headers ?? {})) {
      if (value !== undefined) headers[name] = value
    }
    if (call.idempotencyKey !== undefined) headers['idempotency-key'] = call.idempotencyKey
    let body: string | undefined
    if (call.body !== undefined) {
      // bigint values as bare JSON numbers, digit for digit.
      body = stringifyExact(call.body)
      headers['content-type'] = 'application/json'
    }
    for (let attempt = 1; ; attempt++) {
      let failure: PetstoreError
      try {
        const response = await fetchImpl(call.url, {
          method: call.method,
          headers,
          body,
          signal: timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)
        })
        if (response.ok || response.status === 304) {
          const text = await response.text()
          let parsed: unknown = null
          if (text !== '') {
            try {
              parsed = parseBody(text, call.operationId, response.status)
            } catch (error) {
              throw new PetstoreError({
                status: response.status,
                code: 'unexpected_response',
                message: `The ${call.operationId} answer is not the documented JSON`,
                requestId: response.headers.get('x-request-id'),
                attempts: attempt,
                cause: error
              })
            }
          }
          const meta: ResponseMeta = {
            status: response.status,
            etag: response.headers.get('etag'),
            requestId: response.headers.get('x-request-id'),
            rateLimit: rateLimitOf(response.headers),
            headers: response.headers
          }
          return { meta, body: parsed, url: call.url }
        }
        failure = await errorOf(response, attempt, call.operationId)
      } catch (error) {
        if (error instanceof PetstoreError) {
          // An answer the client could not read: the write may have applied.
          error.idempotencyKey = call.idempotencyKey ?? null
          throw error
        }
        failure = failureOf(error, attempt)
      }
      failure.idempotencyKey = call.idempotencyKey ?? null
      if (failure.code === 'key_banned') {
        if (failure.retryAfterSeconds !== undefined) bannedUntil = now() + failure.retryAfterSeconds * 1000
        throw failure
      }
      const delay = delayAfter(failure, attempt)
      if (delay === null || attempt >= maxAttempts) throw failure
      await mayWaitOut(call.operationId, failure, delay, attempt)
      await sleep(delay)
    }
  }

  /** A write's call: its key made once here, so every try of the call sends the same one. */
  function write (operationId: string, method: 'PATCH' | 'POST', path: string, body: unknown, { ifMatch, idempotencyKey }: WriteOptions): Call {
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new RangeError('idempotencyKey must be 1 to 255 printable ASCII characters, without a space at either end or a quote first')
    }
    return { operationId, method, url: url(path), headers: { 'if-match': ifMatch }, idempotencyKey: idempotencyKey ?? newKey(), body }
  }

  function written ({ meta, body }: Answer, idempotencyKey: string): WriteResult {
    return { ...meta, data: body as InventoryItem, replayed: meta.headers.get('idempotent-replayed') === 'true', idempotencyKey }
  }

  function changePage ({ meta, body, url: requested }: Answer): ChangePage {
    const nextUrl = linkTarget(meta.headers.get('link'), 'next', requested)
    return { ...meta, data: body as InventoryChange[], nextCursor: nextUrl === null ? null : new URL(nextUrl).searchParams.get('after') }
  }

  function conditional<T> ({ meta, body }: Answer): Conditional<T> {
    return meta.status === 304 ? { ...meta, notModified: true, data: null } : { ...meta, notModified: false, data: body as T }
  }

  function page ({ meta, body, url: requested }: Answer): OrderPage {
    const nextUrl = linkTarget(meta.headers.get('link'), 'next', requested)
    return { ...meta, data: body as Order[], nextUrl, nextCursor: nextUrl === null ? null : new URL(nextUrl).searchParams.get('cursor') }
  }

  function inventoryPage ({ meta, body, url: requested }: Answer): InventoryPage {
    const nextUrl = linkTarget(meta.headers.get('link'), 'next', requested)
    return {
      ...meta,
      data: body as InventoryItem[],
      nextUrl,
      nextCursor: nextUrl === null ? null : new URL(nextUrl).searchParams.get('cursor'),
      changesCursor: meta.headers.get('changes-cursor')
    }
  }

  const inventoryPageUrl = ({ limit = INVENTORY_PAGE_SIZE, cursor }: InventoryPageQuery) => url('/inventory', { limit, cursor })

  /** Waits `ms` with the configured sleep, or less when `signal` aborts. */
  async function pause (ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted === true) return
    let onAbort = (): void => {}
    const aborted = new Promise<void>((resolve) => {
      onAbort = resolve
      signal?.addEventListener('abort', onAbort, { once: true })
    })
    try {
      await Promise.race([sleep(ms), aborted])
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /**
   * Opens the change stream after `lastId` on `connection`: the answer when it is a 200 of type text/event-stream; any
   * other answer is thrown as its PetstoreError (a ban is remembered, as for calls). `timeoutMs` bounds the wait for the
   * answer's headers only: the stream itself is meant to stay open.
   */
  async function openStream (lastId: string | null, connection: AbortController, attempt: number): Promise<Response> {
    if (now() < bannedUntil) {
      const left = Math.ceil((bannedUntil - now()) / 1000)
      throw new PetstoreError({ status: 429, code: 'key_banned', message: `The API key is banned for ${left} more s; no request was sent.`, retryAfterSeconds: left, attempts: 0 })
    }
    const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, accept: 'text/event-stream', 'user-agent': userAgent }
    if (lastId !== null) headers['last-event-id'] = lastId
    const timer = timeoutMs === undefined
      ? undefined
      : setTimeout(() => { connection.abort(Object.assign(new Error('timeout'), { name: 'TimeoutError' })) }, timeoutMs)
    let response: Response
    try {
      response = await fetchImpl(url('/inventory/changes/stream'), { method: 'GET', headers, signal: connection.signal })
    } finally {
      clearTimeout(timer)
    }
    if (response.status === 200 && /^text\/event-stream\b/i.test(response.headers.get('content-type') ?? '')) return response
    const error = response.ok
      ? new PetstoreError({ status: response.status, code: 'unexpected_response', message: 'The change stream answer is not text/event-stream', requestId: response.headers.get('x-request-id'), attempts: attempt })
      : await errorOf(response, attempt, 'streamInventoryChanges')
    if (error.code === 'key_banned' && error.retryAfterSeconds !== undefined) bannedUntil = now() + error.retryAfterSeconds * 1000
    throw error
  }

  async function * streamChanges ({ after, signal, idleTimeoutMs = 60_000 }: StreamOptions = {}): AsyncGenerator<InventoryChange, void, undefined> {
    // The id of the last change handed out: where a new connection resumes.
    let lastId = after ?? null
    let retryMs = STREAM_RETRY_MS
    // Connects that failed in a row; an answered connect starts the count again.
    let failed = 0
    // A function, not a property read: the signal aborts while this waits.
    const aborted = (): boolean => signal?.aborted === true
    while (!aborted()) {
      const connection = new AbortController()
      const stop = (): void => { connection.abort() }
      signal?.addEventListener('abort', stop, { once: true })
      let idle: ReturnType<typeof setTimeout> | undefined
      try {
        let response: Response
        try {
          response = await openStream(lastId, connection, failed + 1)
        } catch (error) {
          if (aborted()) return
          failed++
          const failure = error instanceof PetstoreError ? error : failureOf(error, failed)
          // A stream of this client's that just dropped may still count on the service for a moment.
          const delay = failure.code === 'too_many_streams' ? backoff(failed) : delayAfter(failure, failed)
          if (delay === null || failed >= maxAttempts) throw failure
          await mayWaitOut('streamInventoryChanges', failure, delay, failed)
          await pause(delay, signal)
          continue
        }
        failed = 0
        const received: Array<{ id: string, change: InventoryChange }> = []
        let malformed: unknown
        const parser = eventStreamReader({
          onEvent: (event: StreamEvent) => {
            if (event.event !== CHANGE_EVENT || malformed !== undefined) return
            try {
              const change = parseBody(event.data, 'streamInventoryChanges', 200) as InventoryChange
              received.push({ id: event.id ?? change.cursor, change })
            } catch (error) {
              malformed = error
            }
          },
          onRetry: (ms: number) => { retryMs = Math.min(ms, maxDelayMs) }
        })
        const decoder = new TextDecoder()
        const armIdle = (): void => {
          clearTimeout(idle)
          idle = setTimeout(stop, idleTimeoutMs)
        }
        armIdle()
        try {
          for await (const chunk of response.body ?? []) {
            armIdle()
            parser.feed(decoder.decode(chunk, { stream: true }))
            if (malformed !== undefined) {
              throw new PetstoreError({ status: 200, code: 'unexpected_response', message: 'A change stream event is not the documented JSON', requestId: response.headers.get('x-request-id'), attempts: 1, cause: malformed })
            }
            for (const { id, change } of received.splice(0)) {
              lastId = id
              yield change
            }
          }
        } catch (error) {
          if (error instanceof PetstoreError) throw error
          // The connection dropped or went silent: opened again below, from the last change handed out.
        }
        if (aborted()) return
        // Jittered: the clients of an instance that stops do not all come back at the same moment.
        await pause(random() * retryMs, signal)
      } finally {
        clearTimeout(idle)
        signal?.removeEventListener('abort', stop)
        connection.abort()
      }
    }
  }

  return {
    async listInventory ({ ifNoneMatch } = {}) {
      const answer = await send({ operationId: 'listInventory', method: 'GET', url: url('/inventory'), headers: { 'if-none-match': ifNoneMatch } })
      return { ...conditional<InventoryItem[]>(answer), changesCursor: answer.meta.headers.get('changes-cursor') }
    },

    async listInventoryPage (query = {}) {
      return inventoryPage(await send({ operationId: 'listInventory', method: 'GET', url: inventoryPageUrl(query) }))
    },

    async * allInventory ({ limit } = {}) {
      let next: string | null = inventoryPageUrl({ limit })
      while (next !== null) {
        // The link is followed as given, like the orders': the cursor is opaque and the link keeps the limit.
        const current: InventoryPage = inventoryPage(await send({ operationId: 'listInventory', method: 'GET', url: next }))
        yield * current.data
        next = current.nextUrl
      }
    },

    async getInventoryItem (petId, { ifNoneMatch } = {}) {
      const path = `/inventory/${int64Text(petId, 'petId')}`
      return conditional(await send({ operationId: 'getInventoryItem', method: 'GET', url: url(path), headers: { 'if-none-match': ifNoneMatch } }))
    },

    async updateInventory (petId, update, options = {}) {
      const call = write('updateInventory', 'PATCH', `/inventory/${int64Text(petId, 'petId')}`, update, options)
      return written(await send(call), call.idempotencyKey as string)
    },

    async adjustInventory (petId, adjustment, options = {}) {
      const call = write('adjustInventory', 'POST', `/inventory/${int64Text(petId, 'petId')}/adjustments`, adjustment, options)
      return written(await send(call), call.idempotencyKey as string)
    },

    async batchUpdateInventory (batch, options = {}) {
      // Every id checked as the single-pet methods check theirs: a number above 2^53 may already be another pet.
      const changes = batch.changes.map((change, i) => ({ ...change, petId: BigInt(int64Text(change.petId as Int64Input, `changes[${i}].petId`)) }))
      const call = write('batchUpdateInventory', 'POST', '/inventory/batch', { ...batch, changes }, options)
      const { meta, body } = await send(call)
      return { ...meta, data: (body as { entries: BatchEntry[] }).entries, replayed: meta.headers.get('idempotent-replayed') === 'true', idempotencyKey: call.idempotencyKey as string }
    },

    async listInventoryChanges ({ after, limit } = {}) {
      return changePage(await send({ operationId: 'listInventoryChanges', method: 'GET', url: url('/inventory/changes', { after, limit }) }))
    },

    async * inventoryChanges ({ after, limit } = {}) {
      let next: string = url('/inventory/changes', { after, limit })
      for (;;) {
        const current: ChangePage = changePage(await send({ operationId: 'listInventoryChanges', method: 'GET', url: next }))
        yield * current.data
        const link = linkTarget(current.headers.get('link'), 'next', next)
        if (current.data.length === 0 || link === null) return
        next = link
      }
    },

    streamChanges,

    async getPet (petId) {
      const { meta, body, url: requested } = await send({ operationId: 'getPetById', method: 'GET', url: url(`/pets/${int64Text(petId, 'petId')}`) })
      return { ...meta, data: body as Pet, deprecation: deprecationOf(meta.headers, requested) }
    },

    async listOrders (query = {}) {
      return page(await send({ operationId: 'listOrders', method: 'GET', url: url('/store/orders', query) }))
    },

    async rateLimit () {
      const { meta, body } = await send({ operationId: 'getRateLimit', method: 'GET', url: url('/rate_limit') })
      return { ...meta, data: body as RateLimitStatus }
    },

    async * allOrders (query = {}) {
      let next: string | null = url('/store/orders', query)
      while (next !== null) {
        // The link is followed as given: the cursor is opaque and the link keeps limit and status.
        const current: OrderPage = page(await send({ operationId: 'listOrders', method: 'GET', url: next }))
        yield * current.data
        next = current.nextUrl
      }
    }
  }
}
