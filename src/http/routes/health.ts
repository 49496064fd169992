import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { Store } from '../../store/types.js'
import { sendError, STORE_RETRY_AFTER_SECONDS } from '../plugins/errors.js'

const Health = Type.Object({ status: Type.String() }, { additionalProperties: false })

/** Liveness and readiness, outside /v1 and without a key; hidden from the API document. */
export const healthRoutes: FastifyPluginAsyncTypebox<{ store: Store }> = async (app, { store }) => {
  app.get('/healthz', { schema: { hide: true, response: { 200: Health } } }, async () => ({ status: 'ok' }))

  app.get('/readyz', { schema: { hide: true, response: { 200: Health } } }, async (request, reply) => {
    try {
      await store.ping()
      return { status: 'ready' }
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed')
      return sendError(reply, 'service_unavailable', 'The store is not reachable.', { 'Retry-After': String(STORE_RETRY_AFTER_SECONDS) })
    }
  })
}
