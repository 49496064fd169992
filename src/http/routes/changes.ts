import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { FeedEntry, HOLD_EVENT_MEANINGS } from '../../domain/entities.js'
import { entriesJson } from '../../domain/entry-json.js'
import { changeTypes, DEFAULT_FEED_LIMIT, listChanges, MAX_FEED_LIMIT } from '../../domain/feed.js'
import { CHANGE_TYPES, HOLD_EVENTS } from '../../model.js'
import type { StockReads } from '../../store/stock/types.js'
import { CURSOR_EXPIRED, cursorRefused, feedCursorRefused, linkNext, NEXT_LINK_FORM } from '../paging.js'
import { COMMON_ERRORS, INVALID_REQUEST, RESPONSE_HEADERS } from '../schemas/common.js'

/** The `types` parameter of the feed and the stream: what it takes, and what each type is. */
export const TYPES_PARAMETER = Type.String({
  minLength: 1,
  maxLength: 200,
  description: 'Comma-separated entry types to serve, in place of stock changes alone: ' +
    `${CHANGE_TYPES.map((type) => '`' + type + '`').join(', ')} (400 for any other). \`inventory.changed\`: a stock change; ` +
    HOLD_EVENTS.map((type) => `\`${type}\`: ${HOLD_EVENT_MEANINGS[type]}`).join('; ') + '; `inventory.low_stock`: a pet\'s on-hand ' +
    'quantity fell to or below its reorder point. With it, every entry carries `type`; without it, the feed serves stock ' +
    'changes exactly as before it had types. Name stock changes too (`inventory.changed,hold.placed,...`) to mirror what is ' +
    'available. Entries of types not named are skipped, never counted against `limit`: a cursor resumes after the last entry served.',
  examples: ['inventory.changed,hold.placed,hold.confirmed,hold.released,hold.expired']
})

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
        'the listing and its `Changes-Cursor`. With `types`, the feed serves the events of availability too (holds placed, ' +
        'confirmed, released and expired, low stock), in the same commit order, each with `type`, so that a follower can ' +
        'mirror what is available, not only what is on hand. Beta: an addition to the specification.',
      tags: ['inventory'],
      'x-stability': 'beta',
      querystring: Type.Object({
        after: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'A change\'s cursor: the page starts after it. Without it, from the first change.' })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_FEED_LIMIT, default: DEFAULT_FEED_LIMIT, description: 'Page size' })),
        types: Type.Optional(TYPES_PARAMETER)
      }, { additionalProperties: false }),
      response: {
        200: Type.Array(FeedEntry, {
          description: 'One page of changes, in commit order',
          headers: { ...RESPONSE_HEADERS, Link: Type.String({ description: 'rel="next": the next page (after the last change, or the same place when none).' + NEXT_LINK_FORM }) }
        }),
        400: INVALID_REQUEST,
        410: CURSOR_EXPIRED,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const { after, limit = DEFAULT_FEED_LIMIT, types } = request.query
    const named = types === undefined ? undefined : changeTypes(types)
    const page = await listChanges(store, { cursor: after ?? null, limit, ...(named === undefined ? {} : { types: named }) }, request.apiKey?.id ?? null)
      .catch(feedCursorRefused).catch(cursorRefused)
    linkNext(reply, { limit: String(limit), ...(named === undefined ? {} : { types: named.join(',') }), ...(page.next === null ? {} : { after: page.next }) })
    // Serialized here, each entry by its type's schema (src/domain/entry-json.ts); a string is sent as it is.
    return reply.type('application/json; charset=utf-8').send(entriesJson(page.changes, named !== undefined) as never)
  })
}
