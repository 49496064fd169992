/** The change feed: one page after a cursor, and every change after it, page after page, until caught up. */
import { changePage, followNext } from './paging.js'
import type { Transport } from './transport.js'
import type { InventoryChange, PetstoreClient } from './types.js'

export function changeOperations ({ send, url }: Transport): Pick<PetstoreClient, 'listInventoryChanges' | 'inventoryChanges'> {
  return {
    async listInventoryChanges ({ after, limit } = {}) {
      return changePage(await send({ operationId: 'listInventoryChanges', method: 'GET', url: url('/inventory/changes', { after, limit }) }))
    },

    inventoryChanges ({ after, limit } = {}) {
      return followNext<InventoryChange>(url('/inventory/changes', { after, limit }),
        (next) => send({ operationId: 'listInventoryChanges', method: 'GET', url: next }), true)
    }
  }
}
