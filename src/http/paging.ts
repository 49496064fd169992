/**
 * Cursor paging on the HTTP side, shared by the listings that page (inventory, store orders): the one answer to a
 * cursor this service did not issue, and the rel="next" link a client follows.
 */
import type { FastifyReply } from 'fastify'
import { InvalidCursorError } from '../domain/cursor.js'
import { AppError } from '../errors.js'

/** Rethrows a cursor the domain refused as the API's 400, naming where a good one comes from; anything else as it is. */
export function cursorRefused (error: unknown): never {
  throw error instanceof InvalidCursorError ? new AppError('invalid_request', 'The cursor is not valid; use the one from the Link header.') : error
}

/** Sets `Link: <path?query>; rel="next"` (RFC 8288) for the page after this one. */
export function linkNext (reply: FastifyReply, path: string, query: Record<string, string>): void {
  reply.header('Link', `<${path}?${new URLSearchParams(query).toString()}>; rel="next"`)
}
