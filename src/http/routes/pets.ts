import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { getPet } from '../../domain/pets.js'
import type { CatalogReads } from '../../store/catalog/types.js'
import { deprecationHooks, type DeprecationPolicy } from '../plugins/deprecation.js'
import { COMMON_ERRORS, ErrorResponse, INVALID_REQUEST, Int64Text, NOT_FOUND, RESPONSE_HEADERS } from '../schemas/common.js'
import { Pet } from '../../domain/entities.js'

const DEPRECATION_HEADERS = {
  ...RESPONSE_HEADERS,
  Deprecation: Type.String({ description: 'RFC 9745: when the operation was deprecated, as @<unix-seconds>' }),
  Sunset: Type.String({ description: 'RFC 8594: when the operation stops working (HTTP-date)' }),
  Link: Type.String({ description: 'rel="deprecation" and rel="sunset" links to the documentation' })
}

export const petRoutes: FastifyPluginAsyncTypebox<{ store: { readonly catalog: Pick<CatalogReads, 'getPet'> }, policy: DeprecationPolicy, clock: () => number }> =
  async (app, { store, policy, clock }) => {
    const hooks = deprecationHooks(policy, clock)
    app.get('/pets/:petId', {
      config: { scope: 'read' },
      onSend: hooks.onSend,
      preHandler: hooks.preHandler,
      schema: {
        operationId: 'getPetById',
        summary: 'Find a pet by id (deprecated)',
        description: `Deprecated since ${policy.deprecatedAt.toISOString()}; sunset on ${policy.sunset.toISOString()}, ` +
          'after which it answers 410 Gone. Every response carries Deprecation, Sunset and Link headers.',
        tags: ['pets'],
        deprecated: true,
        params: Type.Object({ petId: Int64Text('The id of the pet') }),
        response: {
          200: Type.Object(Pet.properties, { additionalProperties: false, description: 'The pet', headers: DEPRECATION_HEADERS }),
          400: INVALID_REQUEST,
          404: NOT_FOUND,
          410: ErrorResponse(['gone'], 'The sunset date has passed; the operation is no longer available.', DEPRECATION_HEADERS),
          ...COMMON_ERRORS
        }
      }
    }, async (request) => getPet(store, BigInt(request.params.petId)))
  }
