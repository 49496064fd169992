/** The store's orders: one page, or every order page after page. */
import { followNext, orderPage } from './paging.js'
import type { Transport } from './transport.js'
import type { Order, PetstoreClient } from './types.js'

export function orderOperations ({ send, url }: Transport): Pick<PetstoreClient, 'listOrders' | 'allOrders'> {
  return {
    async listOrders (query = {}) {
      return orderPage(await send({ operationId: 'listOrders', method: 'GET', url: url('/store/orders', query) }))
    },

    allOrders (query = {}) {
      return followNext<Order>(url('/store/orders', query), (next) => send({ operationId: 'listOrders', method: 'GET', url: next }))
    }
  }
}
