import { AppError } from '../errors.js'
import { parseInt64 } from '../int64.js'
import type { Store } from '../store/types.js'
import type { Order, OrderStatus } from './model.js'

export const DEFAULT_ORDER_LIMIT = 100
export const MAX_ORDER_LIMIT = 1000

const CURSOR_PREFIX = 'o1:'

/** A cursor this service did not issue (or one that was changed). */
export class InvalidCursorError extends AppError {
  constructor () {
    super('invalid_request', 'The cursor is not valid.')
  }
}

/** Cursors are opaque to clients: base64url of a versioned "after this id" marker. */
function encodeCursor (afterId: bigint): string {
  return Buffer.from(CURSOR_PREFIX + afterId.toString()).toString('base64url')
}

function decodeCursor (cursor: string): bigint {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const id = text.startsWith(CURSOR_PREFIX) ? parseInt64(text.slice(CURSOR_PREFIX.length)) : null
  if (id === null || encodeCursor(id) !== cursor) {
    throw new InvalidCursorError()
  }
  return id
}

export interface OrderListing { orders: Order[], nextCursor: string | null }

export async function listOrders (
  store: Store,
  query: { limit: number, cursor: string | null, status: OrderStatus | null }
): Promise<OrderListing> {
  const afterId = query.cursor === null ? null : decodeCursor(query.cursor)
  const page = await store.listOrders({ afterId, limit: query.limit, status: query.status })
  const last = page.orders.at(-1)
  return { orders: page.orders, nextCursor: page.hasMore && last !== undefined ? encodeCursor(last.id) : null }
}
