/**
 * The app's two scopes of routes: the public ones, without a key and never counted, and the API under /v1, every
 * route, 404 and 405 of which is behind the gate (src/http/plugins/access.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Config } from '../../config.js'
import type { IdempotencyKeys } from '../../domain/idempotency.js'
import type { Webhooks } from '../../domain/webhooks.js'
import type { Lifecycle } from '../../lifecycle.js'
import { registerMetricsRoute } from '../../metrics/http.js'
import type { Metrics } from '../../metrics/index.js'
import type { RateLimiter } from '../../ratelimit/types.js'
import type { ChangeSignal } from '../../changes/types.js'
import type { Store } from '../../store/store.js'
import { serveOpenApi } from '../openapi.js'
import { chargeMore, keyStanding, registerGate, type AccessOptions } from '../plugins/access.js'
import { registerDocs } from '../plugins/docs.js'
import { trackRoutesForMethodNotAllowed } from '../plugins/method-not-allowed.js'
import { changeRoutes } from './changes.js'
import { healthRoutes } from './health.js'
import { holdRoutes } from './holds.js'
import { inventoryListing, inventoryRoutes } from './inventory.js'
import { orderRoutes } from './orders.js'
import { petRoutes } from './pets.js'
import { rateLimitRoutes } from './rate-limit.js'
import { reorderPointRoutes } from './reorder-points.js'
import { streamRoutes } from './stream.js'
import { webhookRoutes } from './webhooks.js'

export interface PublicRouteOptions {
  config: Config
  store: Store
  limiter: RateLimiter
  lifecycle: Lifecycle
  metrics: Metrics
  /** Whether the scope answers OPTIONS with 405 (false when CORS answers preflights). */
  claimOptions: boolean
}

/** Health, metrics, the API document and its /docs page. */
export const publicRoutes: FastifyPluginAsyncTypebox<PublicRouteOptions> = async (open, { config, store, limiter, lifecycle, metrics, claimOptions }) => {
  const claimOtherMethods = trackRoutesForMethodNotAllowed(open, { claimOptions })
  await registerDocs(open)
  await open.register(healthRoutes, { store, limiter, lifecycle })
  // With METRICS_PORT it is served there instead (server.ts).
  if (config.metrics.port === null) registerMetricsRoute(open, metrics, config.metrics.token)
  serveOpenApi(open)
  claimOtherMethods()
}

export interface ApiRouteOptions {
  config: Config
  store: Store
  /** Who may call and how often: the gate of the scope. */
  access: AccessOptions
  clock: () => number
  lifecycle: Lifecycle
  metrics: Metrics
  idempotency: IdempotencyKeys
  webhooks: Webhooks
  /** What a commit on this instance wakes (the webhook dispatcher, the change streams). */
  commits: Set<() => void>
  /** How instances tell each other of inventory changes, for the listing's freshness (absent: none). */
  changes?: ChangeSignal
  /** Whether the scope answers OPTIONS with 405 (false when CORS answers preflights). */
  claimOptions: boolean
}

/** The API's operations; register with the /v1 prefix. */
export const apiRoutes: FastifyPluginAsyncTypebox<ApiRouteOptions> = async (v1, options) => {
  const { config, store, access, clock, lifecycle, metrics, commits } = options
  registerGate(v1, access)
  const claimOtherMethods = trackRoutesForMethodNotAllowed(v1, { claimOptions: options.claimOptions })
  const listing = inventoryListing({
    store,
    committed: () => { for (const wake of commits) wake() },
    ...(options.changes === undefined ? {} : { changes: options.changes })
  })
  v1.addHook('onClose', async () => { listing.close() })
  await v1.register(inventoryRoutes, {
    store,
    clock,
    idempotency: options.idempotency,
    listing,
    chargeMore: (request, reply, extra, what) => chargeMore(access, request, reply, extra, what)
  })
  await v1.register(holdRoutes, { store, clock, settings: config.holds, idempotency: options.idempotency, listing })
  await v1.register(reorderPointRoutes, { store, clock })
  await v1.register(changeRoutes, { store })
  await v1.register(streamRoutes, { store, config: config.streams, lifecycle, metrics, clock, commits, standing: (request) => keyStanding(access, request) })
  await v1.register(webhookRoutes, { webhooks: options.webhooks })
  await v1.register(orderRoutes, { store, clock, idempotency: options.idempotency, holds: config.holds, listing })
  await v1.register(rateLimitRoutes)
  await v1.register(petRoutes, {
    store,
    clock,
    policy: {
      deprecatedAt: config.pets.deprecatedAt,
      sunset: config.pets.sunset,
      deprecationLink: `${config.docsUrl}/deprecations/get-pet-by-id`,
      sunsetLink: `${config.docsUrl}/sunset-policy`
    }
  })
  claimOtherMethods()
}
