import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { DEFAULT_ORDER_LIMIT, MAX_ORDER_LIMIT, listOrders } from '../../domain/orders.js'
import { cursorRefused, linkNext, NEXT_LINK_FORM } from '../paging.js'
import type { CatalogReads } from '../../store/catalog/types.js'
import { COMMON_ERRORS, INVALID_REQUEST, RESPONSE_HEADERS } from '../schemas/common.js'
import { Order, OrderStatus } from '../../domain/entities.js'

export const orderRoutes: FastifyPluginAsyncTypebox<{ store: { readonly catalog: Pick<CatalogReads, 'listOrders'> } }> = async (app, { store }) => {
  app.get('/store/orders', {
    config: { scope: 'read' },
    schema: {
      operationId: 'listOrders',
      summary: 'List store orders',
      description: 'Orders ordered by id, one page at a time. While more remain, the response carries ' +
        '`Link: <...>; rel="next"`; follow it unchanged to get the next page.',
      tags: ['store'],
      querystring: Type.Object({
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_ORDER_LIMIT, default: DEFAULT_ORDER_LIMIT, description: 'Page size' })),
        cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Opaque cursor from a rel="next" link' })),
        status: Type.Optional(OrderStatus)
      }, { additionalProperties: false }),
      response: {
        200: Type.Array(Order, {
          description: 'One page of orders, ordered by id',
          headers: { ...RESPONSE_HEADERS, Link: Type.String({ description: 'rel="next" link while more orders remain.' + NEXT_LINK_FORM }) }
        }),
        400: INVALID_REQUEST,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const { limit = DEFAULT_ORDER_LIMIT, cursor, status } = request.query
    const page = await listOrders(store, { limit, cursor: cursor ?? null, status: status ?? null }).catch(cursorRefused)
    if (page.nextCursor !== null) {
      linkNext(reply, { limit: String(limit), cursor: page.nextCursor, ...(status === undefined ? {} : { status }) })
    }
    return page.orders
  })
}
