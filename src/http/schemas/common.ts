import { Type, type TSchema } from 'typebox'
import { ERROR_CATALOGUE, type ErrorCode } from '../../errors.js'
import { BODY_LIMIT_BYTES, MAX_URL_LENGTH } from '../limits.js'

/**
 * An int64 in a path or query: documented as integer/int64, validated from its decimal text (see
 * validation.ts), and handed to the handler as that text so that no digit is lost to a double.
 */
export const Int64Text = (description: string) =>
  Type.Unsafe<string>({
    type: 'integer',
    format: 'int64',
    // The example is an integer, as the schema says; ids above 2^53 (e.g. 9007199254740993) are exact too.
    description: `${description}; any int64, exact also above 2^53`,
    examples: [12]
  })

/** Headers on every /v1 response: the request id and the rate-limit fields. */
export const RESPONSE_HEADERS: Record<string, TSchema> = {
  'X-Request-Id': Type.String({ description: 'Identifies the request in logs; echoes a well-formed client X-Request-Id.' }),
  'X-RateLimit-Limit': Type.Integer({ description: 'Quota of the binding window (the one with the fewest requests left)' }),
  'X-RateLimit-Remaining': Type.Integer({ description: 'Requests left in that window' }),
  'X-RateLimit-Reset': Type.Integer({ description: 'Unix time in seconds at which that window resets' }),
  'RateLimit-Policy': Type.String({ description: 'Both windows (draft-ietf-httpapi-ratelimit-headers): "minute";q=60;w=60, "day";q=1000;w=86400' }),
  RateLimit: Type.String({ description: 'Both windows\' state: "minute";r=59;t=41, "day";r=999;t=30000 (r remaining, t seconds to reset)' })
}

/**
 * The Error body for one status, listing the codes the operation can answer with at that status.
 * One schema per status so the OpenAPI document says exactly which codes to expect.
 */
export function ErrorResponse (codes: ErrorCode[], description: string, headers: Record<string, TSchema> = {}) {
  const status = ERROR_CATALOGUE[codes[0] as ErrorCode].status
  return Type.Object({
    code: Type.Enum(codes, { type: 'string', description: 'Machine-readable error code' }),
    message: Type.String({ description: 'Human-readable description' }),
    status: Type.Integer({ description: 'The HTTP status code', examples: [status] })
  }, {
    additionalProperties: false,
    description: `${description} Error codes: ${codes.map((c) => '`' + c + '`').join(', ')}.`,
    headers: { ...RESPONSE_HEADERS, ...headers }
  })
}

const WWW_AUTHENTICATE = {
  'WWW-Authenticate': Type.String({ description: 'Bearer challenge (RFC 6750), e.g. Bearer realm="petstore", error="invalid_token"' })
}
const RETRY_AFTER = { 'Retry-After': Type.Integer({ description: 'Seconds to wait before retrying' }) }
const RETRY_AFTER_429 = {
  'Retry-After': Type.Integer({ description: 'Seconds until the violated window admits again, or until the ban ends' })
}

/** Errors every /v1 operation can answer with. */
export const COMMON_ERRORS = {
  401: ErrorResponse(['unauthorized'], 'Missing, malformed, unknown, revoked or expired API key.', WWW_AUTHENTICATE),
  429: ErrorResponse(['rate_limited', 'key_banned'],
    'Rate limit exceeded (the X-RateLimit-* fields describe the violated window), or the key is temporarily banned ' +
    'for sending requests after 429.', RETRY_AFTER_429),
  414: ErrorResponse(['uri_too_long'], `The request URL (path and query) is longer than ${MAX_URL_LENGTH} characters.`),
  500: ErrorResponse(['internal_error'], 'Unexpected server error; the body never carries internals.'),
  503: ErrorResponse(['service_unavailable'], 'The store cannot be reached right now.', RETRY_AFTER)
}

/**
 * The answer of an operation to a key of a lesser scope than it needs (added by the gate to every operation that needs
 * more than `read`), naming that scope as the API does (`inventory:sell`, `inventory:write`): the scopes are ordered,
 * so a storefront key is refused stock writes and a read key every write.
 */
export function insufficientScope (scopeName: string) {
  return ErrorResponse(['insufficient_scope'],
    `The API key's scope does not include this operation, which needs \`${scopeName}\`; it was counted like any request.`, {
      'WWW-Authenticate': Type.String({ description: `RFC 6750 section 3.1: Bearer realm="petstore", error="insufficient_scope", scope="${scopeName}"` })
    })
}

export const INVALID_REQUEST = ErrorResponse(['invalid_request'], 'The request has invalid parameters or body.')
export const NOT_FOUND = ErrorResponse(['not_found'], 'The requested resource could not be found.')
/** The refusals of a body every write with one can meet. */
export const PAYLOAD_TOO_LARGE = ErrorResponse(['payload_too_large'], `The body exceeds ${BODY_LIMIT_BYTES / 1024} KiB.`)
export const UNSUPPORTED_MEDIA_TYPE = ErrorResponse(['unsupported_media_type'], 'The body is not application/json.')
/** What a 409 idempotency_key_in_flight means, for the 409 descriptions of writes that take a key. */
export const KEY_IN_FLIGHT = 'an earlier request with the same Idempotency-Key is still being processed (retry later; nothing was changed)'
