import { decodeCursor, encodeCursor } from './cursor.js'
import type { CatalogReads } from '../store/catalog/types.js'
import type { Order, OrderStatus } from '../model.js'

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
