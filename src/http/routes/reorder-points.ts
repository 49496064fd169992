/**
 * A pet's reorder point: PUT, GET and DELETE /v1/inventory/{petId}/reorder-point. The point decides when the pet's
 * stock is low; the crossing's inventory.low_stock event is recorded by the stores (src/domain/alerts.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { clearReorderPoint, getReorderPoint, setReorderPoint } from '../../domain/alerts.js'
import { ReorderPoint, ReorderPointUpdate } from '../../domain/entities.js'
import type { AlertStore } from '../../store/alerts/types.js'
import { COMMON_ERRORS, Int64Text, INVALID_REQUEST, NOT_FOUND, PAYLOAD_TOO_LARGE, RESPONSE_HEADERS, UNSUPPORTED_MEDIA_TYPE } from '../schemas/common.js'

const PetIdParams = Type.Object({ petId: Int64Text('The pet whose reorder point is meant') })

const Answer = Type.Object(ReorderPoint.properties, { additionalProperties: false, description: 'The reorder point of the pet', headers: RESPONSE_HEADERS })

/** What the operations say of a crossing, once: the rule a shop relies on. */
const CROSSING = 'When the pet\'s on-hand quantity goes from above its point to at or below it, or a point is set at or above ' +
  'the quantity of a pet that is not low, one `inventory.low_stock` event is recorded with the stock write, in its transaction, ' +
  'and the pet is low; it is low until the quantity rises above the point again (no event), after which the next fall is ' +
  'a crossing again. A point is not part of the stock entry: setting or clearing it changes no ETag and no listing version. ' +
  '`GET /v1/inventory?lowStock=true` lists the pets at or below their point.'

export const reorderPointRoutes: FastifyPluginAsyncTypebox<{ store: { readonly alerts: AlertStore }, clock: () => number }> = async (app, { store, clock }) => {
  app.put('/inventory/:petId/reorder-point', {
    config: { scope: 'write' },
    schema: {
      operationId: 'setReorderPoint',
      summary: 'Set the reorder point of one pet',
      description: `Sets (or replaces) the stock count at or below which the pet is low. ${CROSSING} 404 for a pet without a stock ` +
        'entry. Beta: an addition to the specification.',
      tags: ['inventory'],
      'x-stability': 'beta',
      params: PetIdParams,
      body: ReorderPointUpdate,
      response: {
        200: Answer,
        400: INVALID_REQUEST,
        404: NOT_FOUND,
        413: PAYLOAD_TOO_LARGE,
        415: UNSUPPORTED_MEDIA_TYPE,
        ...COMMON_ERRORS
      }
    }
  }, async (request) => {
    return await setReorderPoint(store, BigInt(request.params.petId), request.body.reorderPoint,
      { keyId: request.apiKey?.id ?? null, requestId: request.id }, clock)
  })

  app.get('/inventory/:petId/reorder-point', {
    config: { scope: 'read' },
    schema: {
      operationId: 'getReorderPoint',
      summary: 'Get the reorder point of one pet',
      description: `The pet's reorder point and whether it is low now. ${CROSSING} 404 for a pet without a stock entry or without a ` +
        'point. Beta: an addition to the specification.',
      tags: ['inventory'],
      'x-stability': 'beta',
      params: PetIdParams,
      response: { 200: Answer, 400: INVALID_REQUEST, 404: NOT_FOUND, ...COMMON_ERRORS }
    }
  }, async (request) => await getReorderPoint(store, BigInt(request.params.petId)))

  app.delete('/inventory/:petId/reorder-point', {
    config: { scope: 'write' },
    schema: {
      operationId: 'clearReorderPoint',
      summary: 'Remove the reorder point of one pet',
      description: 'Removes the pet\'s reorder point: no `inventory.low_stock` event is recorded for it until a point is set again ' +
        '(a new point starts as not low). Removing a point the pet does not have succeeds. 404 for a pet without a stock entry. ' +
        'Beta: an addition to the specification.',
      tags: ['inventory'],
      'x-stability': 'beta',
      params: PetIdParams,
      response: { 204: Type.Null({ description: 'The pet has no reorder point now', headers: RESPONSE_HEADERS }), 400: INVALID_REQUEST, 404: NOT_FOUND, ...COMMON_ERRORS }
    }
  }, async (request, reply) => {
    await clearReorderPoint(store, BigInt(request.params.petId))
    return await reply.code(204).send(null)
  })
}
