import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { InventoryChange } from '../../domain/entities.js'
import { DEFAULT_FEED_LIMIT, listChanges, MAX_FEED_LIMIT } from '../../domain/feed.js'
import type { StockReads } from '../../store/stock/types.js'
import { CURSOR_EXPIRED, cursorRefused, feedCursorRefused, linkNext, NEXT_LINK_FORM } from '../paging.js'
import { COMMON_ERRORS, INVALID_REQUEST, RESPONSE_HEADERS } from '../schemas/common.js'

export const changeRoutes: FastifyPluginAsyncTypebox<{ store: { readonly stock: Pick<StockReads, 'listChanges' | 'feedHistory'> } }> = async (app, { store }) => {
  app.get('/inventory/changes', {
    config: { scope: 'read' },
    schema: {
      operationId: 'listInventoryChanges',
      summary: 'List stock changes in commit order, to keep a copy in sync',
      description: 'Every change to what the listing shows, from the stock ledger: quantities set through PATCH, adjustments ' +
        'and batches, and what the operator\'s imports change (a quantity, a pet\'s status, an entry added), one ' +
        'page at a time, in the order the changes were committed (those of one request in its order): a reader following ' +
        'it never misses or repeats a change, also while several instances write, and sees each pet\'s changes in the order ' +
        'they were made, so applying them in turn leaves a copy equal to the inventory. Each change ' +
        'carries a `cursor`; store the last one you processed and send it as `after` to resume. Every answer carries ' +
        '`Link: <...>; rel="next"`; an empty page means you are caught up: poll the same link later. `requestId` is shown ' +
        'only for changes made with your own key. To start a copy, take `GET /v1/inventory` and follow from its `Changes-Cursor`. ' +
        'A cursor stays good for the life of the deployment: a place past the feed\'s last change is refused (400), and one ' +
        'from a history the store no longer has after it (restored from a backup, failed over to a replica that lost ' +
        'commits, moved to another store since) is 410 `cursor_expired`, never taken for another change: start again from ' +
        'the listing and its `Changes-Cursor`. Beta: an addition to the specification.',
      tags: ['inventory'],
      'x-stability': 'beta',
      querystring: Type.Object({
        after: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'A change\'s cursor: the page starts after it. Without it, from the first change.' })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_FEED_LIMIT, default: DEFAULT_FEED_LIMIT, description: 'Page size' }))
      }, { additionalProperties: false }),
      response: {
        200: Type.Array(InventoryChange, {
          description: 'One page of changes, in commit order',
          headers: { ...RESPONSE_HEADERS, Link: Type.String({ description: 'rel="next": the next page (after the last change, or the same place when none).' + NEXT_LINK_FORM }) }
        }),
        400: INVALID_REQUEST,
        410: CURSOR_EXPIRED,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const { after, limit = DEFAULT_FEED_LIMIT } = request.query
    const page = await listChanges(store, { cursor: after ?? null, limit }, request.apiKey?.id ?? null).catch(feedCursorRefused).catch(cursorRefused)
    linkNext(reply, { limit: String(limit), ...(page.next === null ? {} : { after: page.next }) })
    return page.changes.map((change) => ({ ...change, at: change.at.toISOString() }))
  })
}
