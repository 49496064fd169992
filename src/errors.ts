import { MAX_QUANTITY_TEXT } from './model.js'

/**
 * The one error catalogue. Every 4xx/5xx body is `{code, message, status}` with a code from this table;
 * the HTTP status always follows from the code.
 */
import { redactSecrets } from './redact.js'

export const ERROR_CATALOGUE = {
  invalid_request: { status: 400, message: 'The request is invalid.' },
  unauthorized: { status: 401, message: 'A valid API key is required.' },
  insufficient_scope: { status: 403, message: 'The API key lacks the scope this operation needs.' },
  not_found: { status: 404, message: 'The requested resource could not be found.' },
  method_not_allowed: { status: 405, message: 'The method is not allowed for this resource.' },
  request_timeout: { status: 408, message: 'The request was not received in time.' },
  stock_out_of_range: { status: 409, message: `The change would take the stock quantity outside 0 to ${MAX_QUANTITY_TEXT}.` },
  idempotency_key_in_flight: { status: 409, message: 'A request with this Idempotency-Key is still being processed.' },
  batch_refused: { status: 409, message: 'At least one change of the batch cannot be applied; nothing was changed.' },
  insufficient_stock: { status: 409, message: 'Not enough units of a pet are available; nothing was held or sold.' },
  hold_not_active: { status: 409, message: 'The hold is no longer active (confirmed, released or expired).' },
  hold_of_order: { status: 409, message: 'The hold keeps the stock of an order: move the order instead.' },
  hold_limit_reached: { status: 409, message: 'The quota holds as many holds or units as it may; confirm or release one first.' },
  order_state_conflict: { status: 409, message: 'The order cannot move to that state from the state it is in.' },
  webhook_limit_reached: { status: 409, message: 'The quota has as many webhook subscriptions as it may have; delete one first.' },
  gone: { status: 410, message: 'This resource is no longer available.' },
  cursor_expired: { status: 410, message: 'The cursor names a place in a history the store no longer has; resync from GET /v1/inventory and its Changes-Cursor.' },
  precondition_failed: { status: 412, message: 'The resource has changed since the ETag sent in If-Match.' },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  uri_too_long: { status: 414, message: 'The request URL is too long.' },
  unsupported_media_type: { status: 415, message: 'The request body must be application/json.' },
  idempotency_key_reused: { status: 422, message: 'This Idempotency-Key was used for a different request.' },
  rate_limited: { status: 429, message: 'Too many requests.' },
  key_banned: { status: 429, message: 'This API key is temporarily banned.' },
  too_many_streams: { status: 429, message: 'The quota has as many change streams open as it may have; close one first.' },
  headers_too_large: { status: 431, message: 'The request headers are too large.' },
  internal_error: { status: 500, message: 'An internal error occurred.' },
  service_unavailable: { status: 503, message: 'The service is temporarily unavailable.' }
} as const satisfies Record<string, { status: number, message: string }>

export type ErrorCode = keyof typeof ERROR_CATALOGUE

/**
 * An error the API reports to its client as-is: a catalogue code, a message safe to show, optional headers. Messages
 * name fields and rules rather than quote what a client sent; whatever secret-shaped text one still holds (a key, a
 * webhook secret or signature, credentials) is redacted here, before the message reaches the answer, a log or a span.
 */
export class AppError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly headers: Readonly<Record<string, string>>

  constructor (code: ErrorCode, message?: string, headers: Record<string, string> = {}) {
    super(redactSecrets(message ?? ERROR_CATALOGUE[code].message))
    this.name = 'AppError'
    this.code = code
    this.status = ERROR_CATALOGUE[code].status
    this.headers = headers
  }
}

/** The wire body of an error. */
export function errorBody (code: ErrorCode, message?: string): { code: ErrorCode, message: string, status: number } {
  return { code, message: message ?? ERROR_CATALOGUE[code].message, status: ERROR_CATALOGUE[code].status }
}

/** Raised by stores when the database cannot be reached or timed out; mapped to 503 at the edge. */
export class StoreUnavailableError extends Error {
  constructor (message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}

/**
 * Raised by a store this release may only read: its schema is newer than this release (a newer release migrated
 * it, then was rolled back). Answered 503 with the reason: the instance serves reads only.
 */
export class StoreReadOnlyError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'StoreReadOnlyError'
  }
}

/**
 * A setting that cannot work as given: an invalid variable (loadConfig), a limiter or store that refuses what it was
 * configured with (a connection pooler refusing the store's startup parameters). `serve` and the CLI exit 2 with it.
 */
export class ConfigError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}
