/**
 * Store orders: the classic listing, and the orders placed through the API, which hold their stock from when they
 * are placed until they are delivered (the sale) or cancelled (the release). docs/adr/0037-orders-hold-their-stock.md
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Type } from 'typebox'
import type { IdempotencyKeys } from '../../domain/idempotency.js'
import {
  DEFAULT_ORDER_LIMIT, getOrder, listOrders, MAX_ORDER_LIMIT, moveOrder, ORDER_MOVES, placeOrder, type OrderMove, type OrderWritten
} from '../../domain/orders.js'
import type { HoldSettings } from '../../domain/selling.js'
import type { OrderRecord } from '../../model.js'
import type { CatalogReads } from '../../store/catalog/types.js'
import type { SellingStore } from '../../store/selling/types.js'
import { cursorRefused, linkNext, NEXT_LINK_FORM } from '../paging.js'
import { COMMON_ERRORS, ErrorResponse, Int64Text, INVALID_REQUEST, KEY_IN_FLIGHT, NOT_FOUND, PAYLOAD_TOO_LARGE, RESPONSE_HEADERS, UNSUPPORTED_MEDIA_TYPE } from '../schemas/common.js'
import { answerShortage, KEY_REUSED, REPLAYED_HEADER, SellingConflict, sellerOf, sellingKeyOf, SellingWriteHeaders } from '../schemas/selling.js'
import { Order, OrderDetail, OrderPlacement, OrderStatus } from '../../domain/entities.js'
import type { InventoryListing } from './inventory.js'

export interface OrderRouteOptions {
  store: { readonly catalog: Pick<CatalogReads, 'listOrders'>, readonly selling: Pick<SellingStore, 'getOrder' | 'placeHold' | 'moveOrder'> }
  clock: () => number
  /** The idempotency keys of writes (their records live in the store). */
  idempotency: IdempotencyKeys
  /** The settings of holds: an order's hold counts against the quota's caps. */
  holds: HoldSettings
  /** The listing a delivery tells of the stock its sale took, as a stock write does. */
  listing: Pick<InventoryListing, 'written'>
}

const OrderIdParams = Type.Object({ orderId: Int64Text('The order') })

/** The answer of an order write: the order, and whether it replays an earlier request with the key. */
const Written = (description: string, extra: Record<string, ReturnType<typeof Type.String>> = {}) =>
  Type.Object(OrderDetail.properties, { additionalProperties: false, description, headers: { ...RESPONSE_HEADERS, ...REPLAYED_HEADER, ...extra } })

const LOCATION = { Location: Type.String({ description: 'The order, relative to the request URL: `orders/{orderId}`' }) }
const KEYED = ' Requires an Idempotency-Key (400 without one): a retry with the same key and request is answered what the first ' +
  'request was (same status and body) with `Idempotent-Replayed: true`, and does nothing again; the key with another ' +
  'request is 422 `idempotency_key_reused`.'

/** What each move does, as its operation's description says it. */
const MOVES: Record<OrderMove, { operationId: string, summary: string, description: string, conflict: string, shortage: boolean }> = {
  approve: {
    operationId: 'approveOrder',
    summary: 'Approve an order',
    description: 'Moves a `placed` order to `approved`. Its units stay held.',
    conflict: 'the order is not `placed` (or was imported: the API moves only the orders it placed)',
    shortage: false
  },
  deliver: {
    operationId: 'deliverOrder',
    summary: 'Deliver an order: the sale',
    description: 'Moves a `placed` or `approved` order to `delivered` and sets `complete`: its hold is confirmed, and its units ' +
      'leave the stock as a sale (one stock ledger change with reason `sale` and the order\'s reference), which GET /v1/inventory ' +
      'shows as soon as this answer is sent. When the pet has fewer units on hand than the order (its stock was set below what ' +
      'was held since), 409 `insufficient_stock` with `shortages`, and nothing changes.',
    conflict: 'the order is `delivered` or `cancelled` (or was imported), or the pet has fewer units on hand than the order (with `shortages`)',
    shortage: true
  },
  cancel: {
    operationId: 'cancelOrder',
    summary: 'Cancel an order',
    description: 'Moves a `placed` or `approved` order to `cancelled`: its hold is released, and its units are available ' +
      'again at once. The classic listing leaves cancelled orders out, as the classic Petstore deleted them; they stay readable here.',
    conflict: 'the order is `delivered` or `cancelled` (or was imported)',
    shortage: false
  }
}

/** The wire form of an order placed through the API or imported (dates as RFC 3339). */
function detail (order: OrderRecord) {
  return { ...order, createdAt: order.createdAt?.toISOString() ?? null, updatedAt: order.updatedAt?.toISOString() ?? null }
}

export const orderRoutes: FastifyPluginAsyncTypebox<OrderRouteOptions> = async (app, { store, clock, idempotency, holds, listing }) => {
  app.get('/store/orders', {
    config: { scope: 'read' },
    schema: {
      operationId: 'listOrders',
      summary: 'List store orders',
      description: 'Orders ordered by id, one page at a time. While more remain, the response carries ' +
        '`Link: <...>; rel="next"`; follow it unchanged to get the next page. Orders placed through the API are listed too, ' +
        'in the same shape, except cancelled ones (the classic Petstore deleted a cancelled order): GET ' +
        '/v1/store/orders/{orderId} shows every order with its state.',
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

  app.post('/store/orders', {
    config: { scope: 'storefront' },
    schema: {
      operationId: 'placeOrder',
      summary: 'Place an order: its units are held until it is delivered or cancelled',
      description: 'Places an order for `quantity` units of one pet. Its units are held at once (a hold that does not expire, ' +
        'whose id is `holdId`), granted only if that many are available (on hand less what active holds keep), decided in one ' +
        'transaction: two orders for the last unit never both succeed. The hold counts against the key\'s caps of active holds ' +
        'and held units. Answers 201 with the order (`placed`) and its address in `Location`. Beta: an addition to the ' +
        'specification.' + KEYED,
      tags: ['store'],
      'x-stability': 'beta',
      headers: SellingWriteHeaders,
      body: OrderPlacement,
      response: {
        201: Written('The order, placed', LOCATION),
        400: INVALID_REQUEST,
        404: ErrorResponse(['not_found'], 'The pet has no stock entry; nothing was held.'),
        409: SellingConflict(['insufficient_stock', 'hold_limit_reached', 'idempotency_key_in_flight'],
          'Nothing was held: fewer units are available than ordered (`insufficient_stock`, with `shortages` saying how many ' +
          'are), the key\'s quota holds as many holds or units as it may (`hold_limit_reached`), or ' + KEY_IN_FLIGHT + '.'),
        413: PAYLOAD_TOO_LARGE,
        415: UNSUPPORTED_MEDIA_TYPE,
        422: KEY_REUSED,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const { petId, quantity, shipDate, reference } = request.body
    try {
      const written = await placeOrder(store, { petId: BigInt(petId), quantity, shipDate: shipDate ?? null, reference: reference ?? null },
        sellerOf(request), holds, clock, sellingKeyOf(request, idempotency))
      reply.code(201).header('Location', `orders/${written.order.id}`)
      return await answer(reply, written)
    } catch (error) {
      return answerShortage(reply, error)
    }
  })

  app.get('/store/orders/:orderId', {
    config: { scope: 'read' },
    schema: {
      operationId: 'getOrderById',
      summary: 'Get one store order',
      description: 'One order, imported or placed through the API, with its state (cancelled ones too) and what the API adds: ' +
        '`source`, `reference`, `holdId`, `createdAt`, `updatedAt`. Beta: an addition to the specification.',
      tags: ['store'],
      'x-stability': 'beta',
      params: OrderIdParams,
      response: {
        200: Type.Object(OrderDetail.properties, { additionalProperties: false, description: 'The order', headers: RESPONSE_HEADERS }),
        400: INVALID_REQUEST,
        404: NOT_FOUND,
        ...COMMON_ERRORS
      }
    }
  }, async (request) => detail(await getOrder(store, BigInt(request.params.orderId))))

  for (const [move, spec] of Object.entries(MOVES) as Array<[OrderMove, typeof MOVES[OrderMove]]>) {
    const codes = spec.shortage
      ? ['order_state_conflict', 'insufficient_stock', 'idempotency_key_in_flight'] as const
      : ['order_state_conflict', 'idempotency_key_in_flight'] as const
    app.post(`/store/orders/:orderId/${move}`, {
      config: { scope: 'storefront' },
      // A move takes no body: one sent without any is validated as `{}` (the schema still refuses any other).
      preValidation: async (request) => { request.body ??= {} },
      schema: {
        operationId: spec.operationId,
        summary: spec.summary,
        description: `${spec.description} Any other move is 409 \`order_state_conflict\`, naming the order's state and the moves ` +
          'it allows; imported orders are never moved. Takes no body (or `{}`). Beta: an addition to the specification.' + KEYED,
        tags: ['store'],
        'x-stability': 'beta',
        headers: SellingWriteHeaders,
        params: OrderIdParams,
        body: Type.Optional(Type.Object({}, { additionalProperties: false })),
        response: {
          200: Written(`The order, ${ORDER_MOVES[move]}`),
          400: INVALID_REQUEST,
          404: NOT_FOUND,
          409: spec.shortage
            ? SellingConflict([...codes], `Nothing was changed: ${spec.conflict}, or ${KEY_IN_FLIGHT}.`)
            : ErrorResponse([...codes], `Nothing was changed: ${spec.conflict}, or ${KEY_IN_FLIGHT}.`),
          413: PAYLOAD_TOO_LARGE,
          415: UNSUPPORTED_MEDIA_TYPE,
          422: KEY_REUSED,
          ...COMMON_ERRORS
        }
      }
    }, async (request, reply) => {
      try {
        return await answer(reply, await moveOrder(store, BigInt(request.params.orderId), move, sellerOf(request), clock, sellingKeyOf(request, idempotency)))
      } catch (error) {
        return answerShortage(reply, error)
      }
    })
  }


  /**
   * The answer to an order write: after a delivery, the listing and every instance learn of the stock its sale took
   * first, as after a stock write; a replay did nothing now, and says so.
   */
  async function answer (reply: FastifyReply, written: OrderWritten) {
    if (written.replayed) reply.header('Idempotent-Replayed', 'true')
    else if (written.entries.length > 0) await listing.written(written.entries, { version: written.version, feed: written.feed })
    return detail(written.order)
  }
}
