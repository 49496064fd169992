import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { listInventory, updateQuantity } from '../../domain/inventory.js'
import type { Store } from '../../store/types.js'
import { COMMON_ERRORS, ErrorResponse, INVALID_REQUEST, Int64Text, NOT_FOUND, RESPONSE_HEADERS } from '../schemas/common.js'
import { InventoryItem, InventoryUpdate } from '../schemas/resources.js'

export const inventoryRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, { store }) => {
  app.get('/inventory', {
    schema: {
      operationId: 'listInventory',
      summary: 'List the stock entries of all pets',
      description: 'Returns current stock levels for all pets in the store, ordered by petId.',
      tags: ['inventory'],
      response: {
        200: Type.Array(InventoryItem, { description: 'All stock entries, ordered by petId', headers: RESPONSE_HEADERS }),
        ...COMMON_ERRORS
      }
    }
  }, async () => listInventory(store))

  app.patch('/inventory/:petId', {
    schema: {
      operationId: 'updateInventory',
      summary: 'Set the stock quantity of one pet',
      description: 'Sets the stock quantity of one pet (arrivals, returns, manual adjustments). ' +
        'Experimental: the request shape may change before it becomes stable. The pet\'s status is not changed.',
      tags: ['inventory'],
      'x-stability': 'experimental',
      params: Type.Object({ petId: Int64Text('The pet whose stock is updated') }),
      body: InventoryUpdate,
      response: {
        200: Type.Object(InventoryItem.properties, { additionalProperties: false, description: 'The updated stock entry', headers: RESPONSE_HEADERS }),
        400: INVALID_REQUEST,
        404: NOT_FOUND,
        413: ErrorResponse(['payload_too_large'], 'The body exceeds 16 KiB.'),
        415: ErrorResponse(['unsupported_media_type'], 'The body is not application/json.'),
        ...COMMON_ERRORS
      }
    }
  }, async (request) => updateQuantity(store, BigInt(request.params.petId), request.body.quantity))
}
