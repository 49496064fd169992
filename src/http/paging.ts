/**
 * Cursor paging on the HTTP side, shared by the listings that page (inventory, store orders, the change feed, a
 * webhook's deliveries): the one answer to a cursor this service did not issue, and the rel="next" link a client
 * follows.
 */
import type { FastifyReply } from 'fastify'
import { InvalidCursorError } from '../domain/cursor.js'
import { CursorExpiredError } from '../domain/feed.js'
import { AppError } from '../errors.js'
import { ErrorResponse } from './schemas/common.js'

/** What the API document says of every rel="next" link: where it leads and how a client resolves it. */
export const NEXT_LINK_FORM = ' The target is relative, `<?query>`: resolve it against the URL requested (RFC 3986), so it also works behind a proxy that adds a path prefix.'

/** Rethrows a cursor the domain refused as the API's 400, naming where a good one comes from; anything else as it is. */
export function cursorRefused (error: unknown): never {
  throw error instanceof InvalidCursorError ? new AppError('invalid_request', 'The cursor is not valid; use the one from the Link header.') : error
}

/**
 * Sets `Link: <?query>; rel="next"` (RFC 8288) for the page after this one: the next page is the same resource with
 * another query, so the target is a query-only relative reference (RFC 3986, section 4.2), which a client resolves
 * against the URL it requested. The service never learns that URL whole: behind a proxy that serves the API under a
 * path prefix (`/inventory-api/v1/...`), an absolute path such as `/v1/inventory?...` would leave the prefix out,
 * while `?...` keeps whatever path the client used.
 */
export function linkNext (reply: FastifyReply, query: Record<string, string>): void {
  reply.header('Link', `<?${new URLSearchParams(query).toString()}>; rel="next"`)
}

/** The 410 of the change feed and the stream: a cursor from a history the store no longer has after it. */
export const CURSOR_EXPIRED = ErrorResponse(['cursor_expired'], 'The cursor (or Last-Event-ID) names a place of a history the store no ' +
  'longer has after it: the store was restored from a backup, failed over to a replica that lost commits, or moved since ' +
  'it was issued. Nothing after it can be trusted to follow on from what you have: start again from `GET /v1/inventory` ' +
  'and its `Changes-Cursor`.')

/** A feed cursor refused as expired, said in the API's words (where to resync); anything else as it is. */
export function feedCursorRefused (error: unknown): never {
  throw error instanceof CursorExpiredError
    ? new AppError('cursor_expired', 'This cursor is from before the store was restored, failed over or moved, and the changes after it ' +
      'are not in its history any more. Resync: take GET /v1/inventory and follow the feed from its Changes-Cursor.')
    : error
}
