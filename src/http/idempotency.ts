/**
 * The Idempotency-Key request header (draft-ietf-httpapi-idempotency-key-header-07). The draft makes it a
 * Structured Field String, `Idempotency-Key: "8e03978e-40d5"`; Stripe and most clients send the bare value,
 * `Idempotency-Key: 8e03978e-40d5`. Both are accepted and name the same key. A key is 1 to 255 printable ASCII
 * characters; anything else is a 400, as is a request with two Idempotency-Key fields (which would be joined).
 */
import type { IncomingMessage } from 'node:http'
import { MAX_IDEMPOTENCY_KEY_LENGTH } from '../domain/idempotency.js'
import { AppError } from '../errors.js'

/** RFC 8941 sf-string: printable ASCII in quotes, `"` and `\` escaped with `\`. */
const SF_STRING = /^"((?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])*)"$/
const PRINTABLE = /^[\x20-\x7E]*$/

export const IDEMPOTENCY_KEY_DESCRIPTION = `A key the client makes for this write, 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII ` +
  'characters (a UUID v4 is a good one), sent bare or as a quoted string. A retry with the same key and the same request ' +
  'is answered what the first one was, with Idempotent-Replayed: true, and applies nothing again.'

function refused (detail: string): AppError {
  return new AppError('invalid_request', `Idempotency-Key ${detail}: send 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, ` +
    'bare or as a quoted string, in one Idempotency-Key field.')
}

/** The idempotency key a request carries; null without one. Throws invalid_request for one that is not a key. */
export function idempotencyKeyOf (request: IncomingMessage): string | null {
  const value = request.headers['idempotency-key']
  if (typeof value !== 'string') return null
  // Node joins repeated fields with ", ", which would make one key of two; the raw lines tell them apart.
  let fields = 0
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if ((request.rawHeaders[i] as string).toLowerCase() === 'idempotency-key') fields++
  }
  if (fields > 1) throw refused('is sent more than once')
  let key = value
  if (value.startsWith('"')) {
    const quoted = SF_STRING.exec(value)
    if (quoted === null) throw refused('starts with a quote but is not a quoted string')
    key = (quoted[1] as string).replace(/\\(["\\])/g, '$1')
  } else if (!PRINTABLE.test(value)) {
    throw refused('holds characters that are not printable ASCII')
  }
  if (key.length === 0) throw refused('is empty')
  if (key.length > MAX_IDEMPOTENCY_KEY_LENGTH) throw refused(`is ${key.length} characters long`)
  return key
}
