/**
 * The central error mapping: every error becomes the Error body `{code, message, status}` with a catalogue
 * code. 5xx bodies never carry internals; they are logged with the request id instead.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { LimiterUnavailableError } from '../../ratelimit/types.js'
import { AppError, ERROR_CATALOGUE, StoreReadOnlyError, StoreUnavailableError, errorBody, type ErrorCode } from '../../errors.js'
import { BODY_LIMIT_BYTES } from '../limits.js'
import { describeValidationError } from '../../domain/validation.js'
import { redactSecrets } from '../../redact.js'
import { recordFailure } from '../../tracing/spans.js'

/** Seconds a client should wait after a 503 from an unreachable store. */
export const STORE_RETRY_AFTER_SECONDS = 5
/**
 * Retry-After of a write refused by an instance serving reads only (its store was migrated by a newer release): not a
 * matter of seconds, an operator must deploy the newer release or restore, so a client asks again in a minute.
 */
export const READ_ONLY_RETRY_AFTER_SECONDS = 60
/** Retry-After of a request refused while the shared limiter is away (RATE_LIMIT_ON_REDIS_DOWN=deny): it reconnects within a second. */
export const LIMITER_RETRY_AFTER_SECONDS = 1

/**
 * Fastify's own errors that a request can raise, by code, with the message we show instead of theirs. Any other
 * 4xx of the framework is answered below by its status. Bodies are read by the app's parser (./json-body.ts), which
 * answers empty, malformed and non-UTF-8 bodies itself, and over HTTP Node's parser refuses a body that disagrees
 * with its Content-Length before Fastify counts it: the JSON-parser and Content-Length codes cannot arise.
 */
const FRAMEWORK_ERRORS: Record<string, [ErrorCode, string]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ['payload_too_large', `The request body exceeds the limit of ${BODY_LIMIT_BYTES} bytes.`],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['unsupported_media_type', 'The request body must be application/json.'],
  FST_ERR_BAD_URL: ['invalid_request', 'The request URL is malformed.']
}

// The first catalogue code of each status (429 has two: rate_limited comes first).
const CODE_BY_STATUS = new Map<number, ErrorCode>(
  Object.entries(ERROR_CATALOGUE).reverse().map(([code, { status }]) => [status, code as ErrorCode])
)

export function sendError (reply: FastifyReply, code: ErrorCode, message?: string, headers: Record<string, string> = {}): FastifyReply {
  const body = errorBody(code, message)
  return reply.code(body.status).headers(headers).type('application/json; charset=utf-8').send(body)
}

/** What an error is answered with: the catalogue code, the message (the code's own when absent) and headers. */
interface Answer {
  code: ErrorCode
  message?: string
  headers?: Record<string, string>
  /** The log line of a failure nobody expected (logged at error with its stack, and recorded on the request's trace). */
  unexpected?: string
}

/** The longest part of a framework error's own message a 400 shows. */
const FRAMEWORK_MESSAGE_LENGTH = 200

/** How an error is answered: the one mapping of errors to the Error body, which handleError sends and errorStatus reads. */
function answerTo (error: FastifyError | Error): Answer {
  if (error instanceof AppError) return { code: error.code, message: error.message, headers: { ...error.headers } }

  const fastifyError = error as FastifyError
  if (fastifyError.validation !== undefined) {
    const context = fastifyError.validationContext ?? 'request'
    const first = fastifyError.validation[0] as Parameters<typeof describeValidationError>[1]
    if (context === 'body' && first?.keyword === 'type' && first.instancePath === '') return { code: 'invalid_request', message: 'The request body must be a JSON object.' }
    return { code: 'invalid_request', message: describeValidationError(context, first) }
  }
  if (error instanceof StoreReadOnlyError) {
    return {
      code: 'service_unavailable',
      message: 'This instance serves reads only: the store was migrated by a newer release. Writes are refused.',
      headers: { 'Retry-After': String(READ_ONLY_RETRY_AFTER_SECONDS) }
    }
  }
  if (error instanceof LimiterUnavailableError) {
    // Failing closed (RATE_LIMIT_ON_REDIS_DOWN=deny): no quota is known, so no rate-limit fields; the outage itself
    // is logged once by the limiter, not per request.
    return {
      code: 'service_unavailable',
      message: 'Rate limiting is temporarily unavailable, so no request is let through; retry shortly.',
      headers: { 'Retry-After': String(LIMITER_RETRY_AFTER_SECONDS) }
    }
  }
  if (error instanceof StoreUnavailableError) {
    return { code: 'service_unavailable', headers: { 'Retry-After': String(STORE_RETRY_AFTER_SECONDS) }, unexpected: 'store unavailable' }
  }
  const known = fastifyError.code === undefined ? undefined : FRAMEWORK_ERRORS[fastifyError.code]
  if (known !== undefined) return { code: known[0], message: known[1] }

  const status = fastifyError.statusCode
  if (status !== undefined && status >= 400 && status < 500) {
    // Other client errors raised by the framework or a plugin.
    const code = CODE_BY_STATUS.get(status) ?? 'invalid_request'
    // The framework's message may quote the request: secrets redacted, and bounded.
    const message = redactSecrets(error.message).slice(0, FRAMEWORK_MESSAGE_LENGTH)
    return status === 400 ? { code, message: `The request is invalid: ${message}` } : { code }
  }
  return { code: 'internal_error', unexpected: 'unhandled error' }
}

/** The HTTP status an error is answered with: what decides whether it failed the request (5xx) or was the client's (4xx). */
export function errorStatus (error: unknown): number {
  return error instanceof Error ? ERROR_CATALOGUE[answerTo(error).code].status : ERROR_CATALOGUE.internal_error.status
}

export function handleError (error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answer = answerTo(error)
  if (answer.unexpected !== undefined) {
    request.log.error({ err: error }, answer.unexpected)
    recordFailure(request, error)
  }
  return sendError(reply, answer.code, answer.message, answer.headers)
}

/**
 * Errors Node's HTTP parser raises before a request exists (headers too large, a client too slow to send its
 * headers, malformed HTTP): answered in the Error shape on the raw socket, which is then closed.
 */
export function clientErrorHandler (error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const code: ErrorCode = error.code === 'HPE_HEADER_OVERFLOW'
    ? 'headers_too_large'
    : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request_timeout' : 'invalid_request'
  const body = JSON.stringify(errorBody(code))
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${ERROR_CATALOGUE[code].status} ${STATUS_CODES[ERROR_CATALOGUE[code].status] ?? ''}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${body}`)
  }
  socket.destroy(error)
}

/**
 * A not-found handler: the 404 is sent as an error (to the error handler, as a thrown one would be) rather than
 * thrown, because a traced handler that throws is recorded as failed, and a path nobody serves is the client's
 * error, not a failure of the service.
 */
export async function notFound (_request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  return reply.send(new AppError('not_found', 'No resource exists at this path.'))
}

/**
 * Registers the error handler and the 404 handler on the root instance. An unknown path is counted against
 * its caller (`charge`), like every answer that is not a public route's.
 */
export function registerErrorHandling (app: FastifyInstance, charge: (request: FastifyRequest, reply: FastifyReply, error: Error) => Promise<Error>): void {
  app.setErrorHandler<Error>(async (error, request, reply) => handleError(request.is404 ? await charge(request, reply, error) : error, request, reply))
  app.setNotFoundHandler(notFound)
}
