/**
 * The store's orders: one page, or every order page after page; and the orders placed through the API, placed, read
 * and moved (approve, deliver, cancel), each write retried with its Idempotency-Key.
 */
import { int64Text } from './int64-values.js'
import { followNext, orderPage } from './paging.js'
import { sellingResult } from './selling.js'
import type { Transport } from './transport.js'
import type { Int64Input, Order, OrderDetails, PetstoreClient } from './types.js'

type OrderOperations = Pick<PetstoreClient, 'listOrders' | 'allOrders' | 'placeOrder' | 'getOrder' | 'approveOrder' | 'deliverOrder' | 'cancelOrder'>

export function orderOperations ({ send, url, write }: Transport): OrderOperations {
  const orderPath = (orderId: Int64Input) => `/store/orders/${int64Text(orderId, 'orderId')}`
  // A move takes no body; `{}` is what the service takes as none.
  const move = (operationId: string, name: string) => async (orderId: Int64Input, options = {}) => {
    const call = write(operationId, 'POST', `${orderPath(orderId)}/${name}`, {}, options)
    return sellingResult<OrderDetails>(await send(call), call.idempotencyKey)
  }
  return {
    async listOrders (query = {}) {
      return orderPage(await send({ operationId: 'listOrders', method: 'GET', url: url('/store/orders', query) }))
    },

    allOrders (query = {}) {
      return followNext<Order>(url('/store/orders', query), (next) => send({ operationId: 'listOrders', method: 'GET', url: next }))
    },

    async placeOrder (order, options = {}) {
      // The id checked as every id the client sends: a number above 2^53 may already be another pet.
      const body = { ...order, petId: BigInt(int64Text(order.petId, 'petId')) }
      const call = write('placeOrder', 'POST', '/store/orders', body, options)
      return sellingResult<OrderDetails>(await send(call), call.idempotencyKey)
    },

    async getOrder (orderId) {
      const { meta, body } = await send({ operationId: 'getOrderById', method: 'GET', url: url(orderPath(orderId)) })
      return { ...meta, data: body as OrderDetails }
    },

    approveOrder: move('approveOrder', 'approve'),
    deliverOrder: move('deliverOrder', 'deliver'),
    cancelOrder: move('cancelOrder', 'cancel')
  }
}
