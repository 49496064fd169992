/**
 * 405 for a known path with another method, with an Allow header (RFC 9110 section 15.5.6). Fastify answers
 * 404 there by itself; this records every route as it is added and then claims the remaining methods.
 */
import type { FastifyInstance, HTTPMethods } from 'fastify'
import { AppError } from '../../errors.js'

const METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * Call before registering routes; call the returned function after all routes are registered. With CORS on,
 * OPTIONS is left to the CORS plugin's preflight handling (claimOptions: false).
 */
export function trackRoutesForMethodNotAllowed (app: FastifyInstance, { claimOptions = true } = {}): () => void {
  const methodsByUrl = new Map<string, Set<string>>()
  let tracking = true
  app.addHook('onRoute', (route) => {
    if (!tracking) return
    const methods = methodsByUrl.get(route.url) ?? new Set<string>()
    for (const method of [route.method].flat()) methods.add(method)
    methodsByUrl.set(route.url, methods)
  })
  return () => {
    tracking = false
    for (const [url, methods] of methodsByUrl) {
      const allow = METHODS.filter((m) => methods.has(m)).join(', ')
      const others = METHODS.filter((m) => !methods.has(m) && (claimOptions || m !== 'OPTIONS'))
      if (others.length === 0) continue
      app.route({
        method: others,
        url,
        schema: { hide: true },
        handler: async (request) => {
          throw new AppError('method_not_allowed', `${request.method} is not allowed here; use ${allow}.`, { Allow: allow })
        }
      })
    }
  }
}
