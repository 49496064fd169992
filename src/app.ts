/**
 * buildApp wires configuration and dependencies into a Fastify instance. It never listens: the process entry
 * (server.ts) does, and tests call inject().
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { Gatekeeper } from './access/admission.js'
import type { Config } from './config.js'
import { IdempotencyKeys } from './domain/idempotency.js'
import type { Transport } from './domain/webhook-dispatch.js'
import { purgeExpiredKeysEvery } from './http/idempotency-purge.js'
import { sweepHoldsEvery } from './http/hold-sweeper.js'
import { registerOpenApi } from './http/openapi.js'
import { chargeErrorPath, decorateAdmission, type AccessOptions } from './http/plugins/access.js'
import { logRequests } from './http/plugins/access-log.js'
import { bounds } from './http/plugins/bounds.js'
import { allowOrigins } from './http/plugins/cors.js'
import { registerErrorHandling } from './http/plugins/errors.js'
import { jsonBody } from './http/plugins/json-body.js'
import { routeEveryMethod } from './http/plugins/method-not-allowed.js'
import { apiRoutes, publicRoutes } from './http/routes/index.js'
import { holdConnections, serverOptions } from './http/server.js'
import { serializerCompiler } from './http/serialization.js'
import { validatorCompiler } from './http/validation.js'
import { deliverWebhooks, webhookSubscriptions } from './http/webhooks.js'
import { Lifecycle } from './lifecycle.js'
import { loggerOptions } from './logger.js'
import { instrumentRoutes } from './metrics/http.js'
import { Metrics } from './metrics/index.js'
import { instrumentStore } from './metrics/store.js'
import { MemoryLimiter } from './ratelimit/memory.js'
import type { RateLimiter } from './ratelimit/types.js'
import type { ChangeSignal } from './changes/types.js'
import type { Store } from './store/store.js'
import { traceGate } from './tracing/gate.js'
import { traceRequests } from './tracing/server.js'
import { tracingOn } from './tracing/spans.js'
import { traceStore } from './tracing/store.js'

export interface AppDeps {
  store: Store
  /** Rate-limit counters; in-process when omitted. The app does not close it. */
  limiter?: RateLimiter
  /**
   * How instances tell each other of inventory changes (src/changes), for the listing's freshness; none when omitted
   * (a single instance, or the store alone tells). With Redis its counter is read in the limiter's calls.
   */
  changes?: ChangeSignal
  /** Milliseconds since the epoch; injected so tests can move time. */
  clock?: () => number
  /** A pino logger options object, `false` for none, or an existing logger instance. */
  logger?: FastifyServerOptions['logger'] | FastifyBaseLogger
  /** This app's metrics registry (src/metrics); a fresh one, without process metrics, when omitted. */
  metrics?: Metrics
  /** Whether the instance is draining before a stop (set by the process entry on SIGTERM); never, when omitted. */
  lifecycle?: Lifecycle
  /** How webhook deliveries reach their endpoints; over HTTP with the address rules of the configuration when omitted. */
  webhookTransport?: Transport
  /**
   * Closes what the caller lent the app (its store, limiter, metrics server) once the app has stopped using them: it
   * runs after every onClose hook of the app (the webhook dispatcher recording its last outcomes, the streams
   * closing their registrations). A hook the caller added itself would run before those: Fastify runs onClose hooks
   * in reverse order of registration, and the app registers its own first.
   */
  release?: () => Promise<void>
}

export async function buildApp (config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? Date.now
  const lifecycle = deps.lifecycle ?? new Lifecycle()

  // Every store call the app makes is timed (petstore_store_*), and in a traced process a span (src/tracing); the
  // caller keeps and closes the real store.
  const metrics = deps.metrics ?? new Metrics()
  const store = instrumentStore(tracingOn() ? traceStore(deps.store) : deps.store, metrics)
  metrics.watchStore(deps.store)
  const limiter: RateLimiter = deps.limiter ?? new MemoryLimiter({ clock, maxSubjects: config.rateLimits.maxSubjects })
  metrics.watchLimiter(limiter)
  // Who may call and how often (src/access): asked for every request that is not a public route's.
  const gatekeeper = new Gatekeeper({
    store,
    limiter,
    limits: config.rateLimits,
    environment: config.environment,
    authCacheTtlMs: config.authCacheTtlMs,
    clock,
    events: { decided: (subject, outcome) => metrics.recordDecision(subject, outcome), banned: () => metrics.recordBan() },
    // Never fails a request: the next minute's use records it again.
    onUseNotRecorded: (keyId, error) => { app.log.warn({ err: error, keyId }, 'could not record the last use of an API key') }
  })
  // In a traced process the gate's decision goes on the request's server span (src/tracing/gate.ts).
  const access: AccessOptions = { environment: config.environment, gatekeeper, ...(tracingOn() ? { admit: traceGate(gatekeeper) } : {}) }

  const app = Fastify(serverOptions(config, deps.logger ?? loggerOptions(config.logLevel), access)).withTypeProvider<TypeBoxTypeProvider>()
  // Traces: each request's server span, sampled as it arrives (src/tracing/server.ts); the first hooks, so that the
  // others run in its context.
  if (tracingOn()) traceRequests(app)
  // The first onClose hook registered, so the last to run: nothing of the app touches the store once it runs.
  if (deps.release !== undefined) app.addHook('onClose', deps.release)
  holdConnections(app.server)
  routeEveryMethod(app)
  app.setValidatorCompiler(validatorCompiler)
  app.setSerializerCompiler(serializerCompiler)
  registerErrorHandling(app, (request, reply, error) => chargeErrorPath(access, request, reply, error))
  // Metrics: before any route, so that every route gets its request series (src/metrics/http.ts).
  instrumentRoutes(app, metrics)
  jsonBody(app)
  decorateAdmission(app)
  bounds(app, lifecycle)

  // Background work: expired idempotency records purged, expired holds recorded and old ones purged, and this
  // instance's webhook deliveries.
  purgeExpiredKeysEvery(app, store, clock)
  sweepHoldsEvery(app, { store, clock, retentionDays: config.holds.retentionDays })
  // What a commit on this instance wakes: the webhook dispatcher and the change streams' watch.
  const commits = new Set<() => void>()
  if (config.webhooks.deliver) deliverWebhooks(app, config, { store: deps.store, transport: deps.webhookTransport, clock, metrics, commits })
  logRequests(app)

  await registerOpenApi(app, config)
  // With CORS on, preflights are its own to answer: the scopes leave OPTIONS alone.
  await allowOrigins(app, config.corsOrigins)
  const claimOptions = config.corsOrigins.length === 0
  await app.register(publicRoutes, { config, store, limiter, lifecycle, metrics, claimOptions })
  await app.register(apiRoutes, {
    prefix: '/v1',
    config,
    store,
    access,
    clock,
    lifecycle,
    metrics,
    // Idempotency keys of stock writes: records in the store, purged once expired (above).
    idempotency: new IdempotencyKeys({ store, clock, ttlSeconds: config.idempotencyTtlSeconds }),
    webhooks: webhookSubscriptions(app, store, config, clock),
    commits,
    ...(deps.changes === undefined ? {} : { changes: deps.changes }),
    claimOptions
  })
  return app
}
