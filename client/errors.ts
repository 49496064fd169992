/**
 * How a call fails: PetstoreError, with the API's error code or the client's own, and InsufficientScopeError for a key
 * without the scope an operation needs.
 */
import type { paths } from './schema.js'
import type { BatchFailure, RateLimit, ResponsesOf, Shortage } from './records.js'

type AnyResponse = {
  [P in keyof paths]: { [M in keyof paths[P]]: ResponsesOf<paths[P][M]>[keyof ResponsesOf<paths[P][M]>] }[keyof paths[P]]
}[keyof paths]
type CodeOf<R> = R extends { content: { 'application/json': { code: infer C } } } ? C : never

/** Every error code the API document lists for some operation (`not_found`, `rate_limited`, ...). */
export type ApiErrorCode = CodeOf<AnyResponse>
/** Failures without an API error body: no answer, no answer in time, or an answer that is not the API's. */
export type ClientErrorCode = 'network_error' | 'timeout' | 'unexpected_response'

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
  /**
   * On 409 `insufficient_stock` (placing a hold or an order, confirming a hold, delivering an order): every line that
   * asked for more units than there were, with how many there were (`available`).
   */
  readonly shortages: Shortage[] | null

  constructor (init: { status: number, code: ApiErrorCode | ClientErrorCode, message: string, requestId?: string | null, retryAfterSeconds?: number | undefined, attempts: number, etag?: string | null, failures?: BatchFailure[] | null, rateLimit?: RateLimit | null, shortages?: Shortage[] | null, cause?: unknown }) {
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
    this.shortages = init.shortages ?? null
  }
}

/**
 * 409 `insufficient_stock`: fewer units were available (or, confirming or delivering, on hand) than a hold or order
 * asked for, and nothing was held or sold; `shortages` lists every short line. Never retried: the answer would be the
 * same until stock arrives or holds end; hold what is `available`, or tell the customer.
 */
export class InsufficientStockError extends PetstoreError {
  declare readonly shortages: Shortage[]

  constructor (init: ConstructorParameters<typeof PetstoreError>[0] & { shortages: Shortage[] }) {
    super(init)
    this.name = 'InsufficientStockError'
  }
}

/**
 * 403 `insufficient_scope`: the key's scope does not cover this operation (a read key placing an order, a storefront
 * key setting stock). Never retried: only another key helps. `requiredScope` is the scope the server named
 * (`inventory:sell` or `inventory:write`).
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
export function challengedScope (header: string | null): string | null {
  const match = header === null ? null : /(?:^|[\s,])scope="([^"]*)"/i.exec(header)
  return match === null ? null : match[1] as string
}
