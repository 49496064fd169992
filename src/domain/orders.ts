/**
 * Store orders: the classic listing (imported orders and those placed through the API, in the classic shape), and the
 * orders placed through the API, which hold their stock until they are delivered (sold) or cancelled (released).
 * docs/adr/0037-orders-hold-their-stock.md
 */
import { decodeCursor, encodeCursor } from './cursor.js'
import { madeBy } from './inventory.js'
import { holdCaps, InsufficientStockError, newHoldId, onceForKey, placementRefused, type HoldSettings, type Seller, type SellingKey } from './selling.js'
import { AppError } from '../errors.js'
import type { CatalogReads } from '../store/catalog/types.js'
import { orderFromText } from '../store/selling/rows.js'
import type { OrderTransition, SellingReads, SellingWrites } from '../store/selling/types.js'
import type { FeedPlace } from '../store/stock/types.js'
import type { Order, OrderRecord, OrderState, OrderStatus, StockEntry } from '../model.js'

export const DEFAULT_ORDER_LIMIT = 100
export const MAX_ORDER_LIMIT = 1000

const CURSOR_PREFIX = 'o1:'

export interface OrderListing { orders: Order[], nextCursor: string | null }

export async function listOrders (
  store: { readonly catalog: Pick<CatalogReads, 'listOrders'> },
  query: { limit: number, cursor: string | null, status: OrderStatus | null }
): Promise<OrderListing> {
  const afterId = query.cursor === null ? null : decodeCursor(CURSOR_PREFIX, query.cursor)
  const page = await store.catalog.listOrders({ afterId, limit: query.limit, status: query.status })
  const last = page.orders.at(-1)
  return { orders: page.orders, nextCursor: page.hasMore && last !== undefined ? encodeCursor(CURSOR_PREFIX, last.id) : null }
}

/** An order to place through the API: one pet, its units, and what the caller names it by. */
export interface OrderRequest {
  petId: bigint
  quantity: number
  /** RFC 3339; the instant the order is placed when not given. */
  shipDate: string | null
  reference: string | null
}

/** The moves of an order the API makes, by the name of their operation. */
export const ORDER_MOVES = { approve: 'approved', deliver: 'delivered', cancel: 'cancelled' } as const satisfies Record<string, OrderTransition['to']>
export type OrderMove = keyof typeof ORDER_MOVES

/** Which moves each state of an order placed through the API allows (an imported order allows none). */
const ALLOWED_MOVES: Readonly<Record<OrderState, readonly OrderMove[]>> = {
  placed: ['approve', 'deliver', 'cancel'],
  approved: ['deliver', 'cancel'],
  delivered: [],
  cancelled: []
}

/**
 * An order as a write left it: what the store did now (with, after a delivery, the stock entries the sale left and
 * where the store told them, the version and feed place, for the listing to learn of them), or, `replayed`, the order
 * as the first request with the idempotency key answered it (nothing was done now).
 */
export interface OrderWritten {
  order: OrderRecord
  replayed: boolean
  entries: StockEntry[]
  version?: bigint
  feed?: FeedPlace
}

/** One order, imported or placed through the API; 404 when there is none. */
export async function getOrder (store: { readonly selling: Pick<SellingReads, 'getOrder'> }, id: bigint): Promise<OrderRecord> {
  const order = await store.selling.getOrder(id)
  if (order === null) throw new AppError('not_found', `Order ${id} not found.`)
  return order
}

/**
 * Places an order: a hold of its units that does not expire (it lasts until the order is delivered or cancelled),
 * granted only if the units are available, and counted against the quota's caps like any hold
 * (docs/adr/0037-orders-hold-their-stock.md). Requires an idempotency key: a retry places nothing twice.
 */
export async function placeOrder (store: { readonly selling: Pick<SellingWrites, 'placeHold'> }, request: OrderRequest, actor: Seller,
  settings: HoldSettings, clock: () => number, key: SellingKey): Promise<OrderWritten> {
  const outcome = await onceForKey(key, 'placeOrder', null, request, async (claim) => {
    const at = new Date(clock())
    return await store.selling.placeHold({
      ...actor,
      at,
      id: newHoldId(),
      lines: [{ petId: request.petId, quantity: request.quantity }],
      reference: request.reference,
      expiresAt: null,
      caps: holdCaps(settings),
      order: { shipDate: request.shipDate ?? at.toISOString() },
      idempotency: claim
    })
  })
  switch (outcome.status) {
    case 'replayed':
      return { order: orderFromText(outcome.response), replayed: true, entries: [] }
    case 'placed':
      // A store that places an order's hold places the order with it: a hold without it is the store's fault.
      if (outcome.order === undefined) throw new Error(`The store placed hold ${outcome.hold.id} without its order`)
      return { order: outcome.order, replayed: false, entries: [] }
    default:
      throw placementRefused(outcome)
  }
}

/**
 * Moves an order placed through the API: approve (placed -> approved), deliver (placed or approved -> delivered: its
 * hold is confirmed, the units leave the stock as a sale), cancel (placed or approved -> cancelled: its hold is
 * released). Any other move, and any move of an imported order, is 409 order_state_conflict naming the state and the
 * moves it allows. Requires an idempotency key: a retried delivery sells once and is answered as the first.
 */
export async function moveOrder (store: { readonly selling: Pick<SellingWrites, 'moveOrder'> }, id: bigint, move: OrderMove, actor: Seller,
  clock: () => number, key: SellingKey): Promise<OrderWritten> {
  const outcome = await onceForKey(key, `${move}Order`, id, null, async (claim) =>
    await store.selling.moveOrder({ ...actor, at: new Date(clock()), orderId: id, to: ORDER_MOVES[move], idempotency: claim }))
  switch (outcome.status) {
    case 'replayed':
      return { order: orderFromText(outcome.response), replayed: true, entries: [] }
    case 'moved':
      return {
        order: outcome.order,
        replayed: false,
        entries: outcome.entries,
        ...madeBy(outcome)
      }
    case 'not_found':
      throw new AppError('not_found', `Order ${id} not found.`)
    case 'wrong_state':
      throw new AppError('order_state_conflict', stateConflict(outcome.order, move))
    case 'insufficient':
      throw new InsufficientStockError(outcome.shortages, true)
  }
}

/** "Order 7 is delivered: it can no longer move." / "... is approved: it can be delivered or cancelled, not approved." */
function stateConflict (order: OrderRecord, move: OrderMove): string {
  const wanted = ORDER_MOVES[move]
  if (order.source === 'import') {
    return `Order ${order.id} was imported: the API does not move imported orders (it is ${order.status}); it could not be ${wanted}.`
  }
  const allowed = ALLOWED_MOVES[order.status].map((next) => ORDER_MOVES[next])
  if (allowed.length === 0) return `Order ${order.id} is ${order.status}: it can no longer move; it could not be ${wanted}.`
  const choices = allowed.length === 1 ? allowed[0] as string : `${allowed.slice(0, -1).join(', ')} or ${allowed.at(-1) as string}`
  return `Order ${order.id} is ${order.status}: it can be ${choices}, not ${wanted}.`
}
