/**
 * One call on the wire, by the API's client rules: the URL under `/v1`, the key and the exact JSON body; the answer's
 * meta (ETag, request id, rate-limit window) and its body, parsed exactly; errors read from the answer; retries (on 429
 * `rate_limited` exactly `Retry-After`, after asking `onRateLimited`; on 502/503/504 and network errors exponential
 * backoff with full jitter; at most `maxAttempts` tries; never `key_banned` or another 4xx); a `key_banned` answer
 * remembered until its `Retry-After` has passed; and each write's Idempotency-Key, made once per call.
 */
import { InsufficientScopeError, InsufficientStockError, PetstoreError, challengedScope, type ApiErrorCode } from './errors.js'
import { requireExactJson, stringifyExact } from './exact-json.js'
import { isRecord, parseBody } from './int64-values.js'
import type { BatchFailure, ClientOptions, RateLimit, ResponseMeta, Shortage, WriteOptions } from './types.js'

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

const RETRIED_STATUSES = new Set([502, 503, 504])
/** An Idempotency-Key the service takes as it is when sent bare: no space at either end, no quote first. */
const IDEMPOTENCY_KEY = /^[\x21\x23-\x7E](?:[\x20-\x7E]{0,253}[\x21-\x7E])?$/

export interface Call {
  operationId: string
  method: 'GET' | 'PATCH' | 'POST'
  /** A write's Idempotency-Key, the same on every try of the call. */
  idempotencyKey?: string
  url: string
  headers?: Record<string, string | undefined>
  body?: unknown
}

/** A write's call: its Idempotency-Key is always set. */
export type WriteCall = Call & { idempotencyKey: string }

export interface Answer {
  meta: ResponseMeta
  body: unknown
  /** The URL requested, against which links resolve. */
  url: string
}

/** What the operations call on: ./inventory.ts, ./changes.ts, ./stream.ts, ... */
export interface Transport {
  /** The absolute URL of an API path (`/inventory`), with the query's defined members. */
  url: (path: string, query?: Record<string, string | number | undefined>) => string
  /** Sends a call, retrying it by the rules; the answer, or the PetstoreError of the last try. */
  send: (call: Call) => Promise<Answer>
  /** A write's call: its Idempotency-Key (the caller's, checked, or a new one) made here once, for every try. */
  write: (operationId: string, method: 'PATCH' | 'POST', path: string, body: unknown, options: WriteOptions) => WriteCall
  /** The headers of a request of this client: the key, `accept`, the User-Agent. */
  headers: (accept: string) => Record<string, string>
  /** One request through the configured fetch, as it is (no retry, no reading). */
  request: (url: string, init: RequestInit) => Promise<Response>
  /** Throws, without a request, while a remembered ban lasts (the status call, getRateLimit, is answered during one). */
  refuseWhileBanned: (operationId: string) => void
  /** Remembers a `key_banned` answer until its `Retry-After` has passed. */
  rememberBan: (error: PetstoreError) => void
  /** The PetstoreError of an answer that is not a success. */
  errorOf: (response: Response, attempt: number, operationId: string) => Promise<PetstoreError>
  /** The PetstoreError of a try that got no answer: a timeout or a network error. */
  failureOf: (error: unknown, attempt: number) => PetstoreError
  /** How long to wait before the next try after this failure, or null when it must not be retried. */
  delayAfter: (error: PetstoreError, attempt: number) => number | null
  /** Full jitter: a uniform wait in [0, min(maxDelayMs, baseDelayMs * 2^(attempt-1))). */
  backoff: (attempt: number) => number
  /** Before sleeping `waitMs` on a 429: asks onRateLimited, and throws the refusal when it declines the wait. */
  mayWaitOut: (operation: string, failure: PetstoreError, waitMs: number, attempt: number) => Promise<void>
  /** Waits `ms` with the configured sleep, or less when `signal` aborts. */
  pause: (ms: number, signal: AbortSignal | undefined) => Promise<void>
  readonly maxAttempts: number
  readonly maxDelayMs: number
  readonly timeoutMs: number | undefined
  readonly random: () => number
}

/** The transport of a client's options; throws for options that cannot work (before anything is sent). */
export function createTransport (options: ClientOptions): Transport {
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

  const backoff = (attempt: number) => random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1))

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
    if (response.status === 403 && known.code === 'insufficient_scope') {
      return new InsufficientScopeError({ ...init, requiredScope: challengedScope(response.headers.get('www-authenticate')) })
    }
    if (response.status === 409 && known.code === 'insufficient_stock' && isRecord(body) && Array.isArray(body.shortages)) {
      return new InsufficientStockError({ ...init, shortages: body.shortages as Shortage[] })
    }
    return new PetstoreError(init)
  }

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

  function refuseWhileBanned (operationId: string): void {
    // The status call is answered during a ban (with the ban): it is how a banned client learns when it ends.
    if (now() < bannedUntil && operationId !== 'getRateLimit') {
      const left = Math.ceil((bannedUntil - now()) / 1000)
      throw new PetstoreError({
        status: 429,
        code: 'key_banned',
        message: `The API key is banned for ${left} more s; no request was sent.`,
        retryAfterSeconds: left,
        attempts: 0
      })
    }
  }

  function rememberBan (error: PetstoreError): void {
    if (error.code === 'key_banned' && error.retryAfterSeconds !== undefined) bannedUntil = now() + error.retryAfterSeconds * 1000
  }

  const headersFor = (accept: string): Record<string, string> => ({ authorization: `Bearer ${apiKey}`, accept, 'user-agent': userAgent })

  async function send (call: Call): Promise<Answer> {
    refuseWhileBanned(call.operationId)
    const headers = headersFor('application/json')
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
        rememberBan(failure)
        throw failure
      }
      const delay = delayAfter(failure, attempt)
      if (delay === null || attempt >= maxAttempts) throw failure
      await mayWaitOut(call.operationId, failure, delay, attempt)
      await sleep(delay)
    }
  }

  function write (operationId: string, method: 'PATCH' | 'POST', path: string, body: unknown, { ifMatch, idempotencyKey }: WriteOptions): WriteCall {
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new RangeError('idempotencyKey must be 1 to 255 printable ASCII characters, without a space at either end or a quote first')
    }
    return { operationId, method, url: url(path), headers: { 'if-match': ifMatch }, idempotencyKey: idempotencyKey ?? newKey(), body }
  }

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

  return {
    url,
    send,
    write,
    headers: headersFor,
    request: (target, init) => fetchImpl(target, init),
    refuseWhileBanned,
    rememberBan,
    errorOf,
    failureOf,
    delayAfter,
    backoff,
    mayWaitOut,
    pause,
    maxAttempts,
    maxDelayMs,
    timeoutMs,
    random
  }
}
