/**
 * The stock operations: the listing (whole, by page, or every entry page after page), one entry, and the three
 * writes (set a quantity, add a delta, a batch of either), each retried with its Idempotency-Key.
 */
import { int64Text } from './int64-values.js'
import { followNext, inventoryPage } from './paging.js'
import type { Answer, Transport } from './transport.js'
import type { BatchEntry, Conditional, Int64Input, InventoryItem, InventoryPageQuery, PetstoreClient, WriteResult } from './types.js'

/**
 * The page size of the inventory when none is given: the service's own default once it pages. Always sent, since a
 * listing request with neither limit nor cursor is answered the whole inventory.
 */
const INVENTORY_PAGE_SIZE = 100

type InventoryOperations = Pick<PetstoreClient, 'listInventory' | 'listInventoryPage' | 'allInventory' | 'getInventoryItem' |
  'updateInventory' | 'adjustInventory' | 'batchUpdateInventory'>

function conditional<T> ({ meta, body }: Answer): Conditional<T> {
  return meta.status === 304 ? { ...meta, notModified: true, data: null } : { ...meta, notModified: false, data: body as T }
}

function written ({ meta, body }: Answer, idempotencyKey: string): WriteResult {
  return { ...meta, data: body as InventoryItem, replayed: meta.headers.get('idempotent-replayed') === 'true', idempotencyKey }
}

export function inventoryOperations (transport: Transport): InventoryOperations {
  const { send, url, write } = transport
  const inventoryPageUrl = ({ limit = INVENTORY_PAGE_SIZE, cursor, include }: InventoryPageQuery) => url('/inventory', { limit, cursor, include })
  const petPath = (petId: Int64Input) => `/inventory/${int64Text(petId, 'petId')}`

  return {
    async listInventory ({ ifNoneMatch, include } = {}) {
      const answer = await send({ operationId: 'listInventory', method: 'GET', url: url('/inventory', { include }), headers: { 'if-none-match': ifNoneMatch } })
      return { ...conditional<InventoryItem[]>(answer), changesCursor: answer.meta.headers.get('changes-cursor') }
    },

    async listInventoryPage (query = {}) {
      return inventoryPage(await send({ operationId: 'listInventory', method: 'GET', url: inventoryPageUrl(query) }))
    },

    allInventory ({ limit, include } = {}) {
      return followNext<InventoryItem>(inventoryPageUrl({ limit, include }), (next) => send({ operationId: 'listInventory', method: 'GET', url: next }))
    },

    async getInventoryItem (petId, { ifNoneMatch, include } = {}) {
      return conditional(await send({ operationId: 'getInventoryItem', method: 'GET', url: url(petPath(petId), { include }), headers: { 'if-none-match': ifNoneMatch } }))
    },

    async updateInventory (petId, update, options = {}) {
      const call = write('updateInventory', 'PATCH', petPath(petId), update, options)
      return written(await send(call), call.idempotencyKey)
    },

    async adjustInventory (petId, adjustment, options = {}) {
      const call = write('adjustInventory', 'POST', `${petPath(petId)}/adjustments`, adjustment, options)
      return written(await send(call), call.idempotencyKey)
    },

    async batchUpdateInventory (batch, options = {}) {
      // Every id checked as the single-pet methods check theirs: a number above 2^53 may already be another pet.
      const changes = batch.changes.map((change, i) => ({ ...change, petId: BigInt(int64Text(change.petId as Int64Input, `changes[${i}].petId`)) }))
      const call = write('batchUpdateInventory', 'POST', '/inventory/batch', { ...batch, changes }, options)
      const { meta, body } = await send(call)
      return { ...meta, data: (body as { entries: BatchEntry[] }).entries, replayed: meta.headers.get('idempotent-replayed') === 'true', idempotencyKey: call.idempotencyKey }
    }
  }
}
