/**
 * A span per route handler, in traced processes only (the app registers it when tracingOn()), under the request's
 * server span (./server.ts) when the request is traced. Whatever the handler throws is not a failure by itself: a 404
 * or a 400 the handler answers by throwing is the client's. The handler's span fails only when the answer is a 5xx (`failed` decides, from the error mapping); a client's error leaves it unset, as OpenTelemetry's
 * HTTP conventions leave the server span of a 4xx.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import { endSpan, failSpan, serverSpanOf, SpanKind, startChildSpan, within } from './spans.js'

type Handler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown

/** The span's name: the route's operationId (`handler updateInventory`), else its path (`handler /docs/*`). */
function spanName (route: RouteOptions): string {
  const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId
  return `handler ${typeof operationId === 'string' ? operationId : route.url}`
}

/**
 * Wraps every route's handler registered from now on (call before any route) in a span under the request's server
 * span. `failed` tells an error that fails the request (answered 5xx) from one the client caused.
 */
export function traceHandlers (app: FastifyInstance, failed: (error: unknown) => boolean): void {
  const wrapped = new WeakSet<object>()
  app.addHook('onRoute', (route) => {
    // Fastify may hand the same options to onRoute twice (a prefixed '/' route and its twin): one span only.
    if (wrapped.has(route.handler)) return
    const handler = route.handler as Handler
    const name = spanName(route)
    const attributes = { 'http.route': route.url }
    route.handler = function traced (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply): unknown {
      const server = serverSpanOf(request)
      const span = server === undefined ? null : startChildSpan(server, name, SpanKind.INTERNAL, attributes)
      if (span === null) return handler.call(this, request, reply)
      const settle = (error: unknown): void => {
        if (failed(error)) failSpan(span, error)
        else endSpan(span)
      }
      let result: unknown
      try {
        result = within(span, () => handler.call(this, request, reply))
      } catch (error) {
        settle(error)
        throw error
      }
      if (!(result instanceof Promise)) {
        endSpan(span)
        return result
      }
      return result.then((value: unknown) => {
        endSpan(span)
        return value
      }, (error: unknown) => {
        settle(error)
        throw error
      })
    } as RouteOptions['handler']
    wrapped.add(route.handler)
  })
}
