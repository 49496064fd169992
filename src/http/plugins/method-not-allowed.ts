/**
 * 405 for a known path with another method, with an Allow header (RFC 9110 section 15.5.6). Fastify answers
 * 404 there by itself; this records each route of a scope as it is added and then claims, on the same paths,
 * every other method the server parses (all of Node's, but CONNECT).
 */
import type { FastifyInstance, HTTPMethods } from 'fastify'
import { METHODS } from 'node:http'
import { AppError } from '../../errors.js'

// The order of the Allow header: the common methods first, then the rest alphabetically.
const COMMON: readonly string[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * Makes the server route every method Node's parser accepts, so that a request with an unusual method (TRACE,
 * PROPFIND, ...) reaches the route of its path and can be answered 405, rather than falling through to 404.
 * The added methods carry no body for Fastify: a 405 is answered without reading one. Call on the root
 * instance before any route.
 */
export function routeEveryMethod (app: FastifyInstance): void {
  const known = new Set(app.supportedMethods)
  for (const method of METHODS) {
    if (method !== 'CONNECT' && !known.has(method)) app.addHttpMethod(method)
  }
}

interface Resource { methods: Set<string>, urls: Set<string> }

/**
 * Call on a scope before registering its routes; call the returned function after they are all registered.
 * The 405 is raised in the claiming route's onRequest hook: after the scope's own onRequest hooks (so a guarded
 * scope still authenticates and counts it) and before any body is parsed (so it is a 405, not a 415). With
 * CORS on, OPTIONS is left to the CORS plugin's preflight handling (claimOptions: false).
 */
export function trackRoutesForMethodNotAllowed (scope: FastifyInstance, { claimOptions = true } = {}): () => void {
  const resources = new Map<string, Resource>()
  let tracking = true
  scope.addHook('onRoute', (route) => {
    if (!tracking) return
    // A route at a prefix's root answers on '/prefix' and '/prefix/' (Fastify reports the second twin for HEAD
    // only): both are one resource with one set of methods.
    const twin = route.routePath === '' || route.routePath === '/'
    const key = twin ? route.url.replace(/\/$/, '') : route.url
    const resource = resources.get(key) ?? { methods: new Set<string>(), urls: new Set<string>() }
    for (const method of [route.method].flat()) resource.methods.add(method)
    resource.urls.add(route.url)
    resources.set(key, resource)
  })
  return () => {
    tracking = false
    const supported = scope.supportedMethods.filter((m) => m !== 'CONNECT')
    const order = (m: string) => COMMON.includes(m) ? COMMON.indexOf(m) : COMMON.length
    for (const { methods, urls } of resources.values()) {
      const allow = [...methods].sort((a, b) => order(a) - order(b) || a.localeCompare(b)).join(', ')
      const others = supported.filter((m) => !methods.has(m) && (claimOptions || m !== 'OPTIONS')) as HTTPMethods[]
      if (others.length === 0) continue
      for (const url of urls) {
        scope.route({
          method: others,
          url: url.slice(scope.prefix.length),
          schema: { hide: true },
          onRequest: async (request) => {
            throw new AppError('method_not_allowed', `${request.method} is not allowed here; use ${allow}.`, { Allow: allow })
          },
          handler: async () => {}
        })
      }
    }
  }
}
