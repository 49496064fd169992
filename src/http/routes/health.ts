import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import type { Lifecycle } from '../../lifecycle.js'
import { ResilientLimiter } from '../../ratelimit/resilient.js'
import type { RateLimiter } from '../../ratelimit/types.js'
import type { Store } from '../../store/store.js'
import { VERSION } from '../../version.js'
import { LIMITER_RETRY_AFTER_SECONDS, sendError, STORE_RETRY_AFTER_SECONDS } from '../plugins/errors.js'

/** Liveness: the process answers, and which release it runs (package.json's version). */
const Liveness = Type.Object({
  status: Type.Literal('ok'),
  version: Type.String()
}, { additionalProperties: false })

const Health = Type.Object({
  status: Type.String(),
  /** Where the rate limits are counted now: in this process (configured so, or while Redis is away), or in Redis. */
  rateLimiter: Type.Optional(Type.Union([Type.Literal('in-process'), Type.Literal('redis'), Type.Literal('in-process-fallback')]))
}, { additionalProperties: false })

/** Which limiter answers now, for /readyz; null when none does (Redis away and RATE_LIMIT_ON_REDIS_DOWN=deny). */
function answeringLimiter (limiter: RateLimiter): 'in-process' | 'redis' | 'in-process-fallback' | null {
  if (!(limiter instanceof ResilientLimiter)) return limiter.kind === 'redis' ? 'redis' : 'in-process'
  switch (limiter.backend) {
    case 'redis': return 'redis'
    case 'memory-fallback': return 'in-process-fallback'
    case 'unavailable': return null
  }
}

/** Liveness and readiness, outside /v1 and without a key; hidden from the API document. */
export const healthRoutes: FastifyPluginAsyncTypebox<{ store: Pick<Store, 'ping'>, limiter: RateLimiter, lifecycle: Lifecycle }> = async (app, { store, limiter, lifecycle }) => {
  // The answer never changes while the process runs: made once.
  const alive = { status: 'ok', version: VERSION } as const
  app.get('/healthz', { schema: { hide: true, response: { 200: Liveness } } }, async () => alive)

  // Ready: the instance is not stopping, the store answers and a rate limiter decides. The limiter is named, so a
  // fallback to per-instance counting (Redis away) shows here as well as in the metrics.
  app.get('/readyz', { schema: { hide: true, response: { 200: Health } } }, async (request, reply) => {
    // Draining: the balancer's next check takes the instance out while it still serves what it is sent. No
    // Retry-After: this instance will not become ready again.
    if (lifecycle.draining) return sendError(reply, 'service_unavailable', 'This instance is shutting down; it serves what it is sent until it stops.')
    try {
      await store.ping()
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed')
      return sendError(reply, 'service_unavailable', 'The store is not reachable.', { 'Retry-After': String(STORE_RETRY_AFTER_SECONDS) })
    }
    const rateLimiter = answeringLimiter(limiter)
    if (rateLimiter === null) {
      return sendError(reply, 'service_unavailable', 'Redis, which counts the rate limits, is not reachable, and RATE_LIMIT_ON_REDIS_DOWN=deny refuses requests until it is.',
        { 'Retry-After': String(LIMITER_RETRY_AFTER_SECONDS) })
    }
    return { status: 'ready', rateLimiter }
  })
}
