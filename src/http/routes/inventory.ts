import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import fastJson from 'fast-json-stringify'
import { Type } from 'typebox'
import { updateQuantity } from '../../domain/inventory.js'
import type { Store } from '../../store/types.js'
import { InventoryCache } from '../inventory-cache.js'
import { COMMON_ERRORS, ErrorResponse, INVALID_REQUEST, Int64Text, NOT_FOUND, RESPONSE_HEADERS } from '../schemas/common.js'
import { InventoryItem, InventoryUpdate } from '../schemas/resources.js'

const ETAG_HEADER = { ETag: Type.String({ description: 'Strong validator of the whole inventory; send it back in If-None-Match' }) }

const InventoryList = Type.Array(InventoryItem, {
  description: 'All stock entries, ordered by petId',
  headers: { ...RESPONSE_HEADERS, ...ETAG_HEADER }
})

export const inventoryRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, { store }) => {
  // The same schema as the 200 response, compiled once: the cached bytes are what Fastify would have sent.
  const cache = new InventoryCache(store, fastJson(InventoryList))

  app.get('/inventory', {
    // Lets the rate-limit hook answer a matching If-None-Match with 304 before anything is counted.
    config: { currentETag: () => cache.etag() },
    schema: {
      operationId: 'listInventory',
      summary: 'List the stock entries of all pets',
      description: 'Returns current stock levels for all pets in the store, ordered by petId. The response carries a ' +
        'strong ETag; a request with a matching If-None-Match gets 304 without a body, and (as on GitHub) a 304 does ' +
        'not count against the rate limit.',
      tags: ['inventory'],
      headers: Type.Object({
        'if-none-match': Type.Optional(Type.String({ description: 'ETag of a representation the client holds' }))
      }),
      response: {
        200: InventoryList,
        304: Type.Null({ description: 'Not Modified: the inventory is unchanged since the ETag sent; no body.', headers: { ...RESPONSE_HEADERS, ...ETAG_HEADER } }),
        ...COMMON_ERRORS
      }
    }
  }, async (_request, reply) => {
    const { etag, body } = await cache.current()
    // Already-serialized bytes: Fastify sends a Buffer as it is (the type provider expects the object form).
    return reply.header('ETag', etag).type('application/json; charset=utf-8').send(body as never)
  })

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
