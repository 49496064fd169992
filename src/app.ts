/**
 * buildApp wires configuration and dependencies into a Fastify instance. It never listens: the process entry
 * (server.ts) does, and tests call inject().
 */
import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import { Gatekeeper } from './access/admission.js'
import { IdempotencyKeys, purgeExpiredKeys } from './domain/idempotency.js'
import type { Config } from './config.js'
import { StoreReadOnlyError } from './errors.js'
import { chargeErrorPath, chargeMore, keyStanding, registerGate, type AccessOptions } from './http/plugins/access.js'
import { errorStatus, registerErrorHandling } from './http/plugins/errors.js'
import { registerDocs } from './http/plugins/docs.js'
import { routeEveryMethod, trackRoutesForMethodNotAllowed } from './http/plugins/method-not-allowed.js'
import { jsonBody } from './http/plugins/json-body.js'
import { bounds } from './http/plugins/bounds.js'
import { logRequests } from './http/plugins/access-log.js'
import { holdConnections, serverOptions } from './http/server.js'
import { Lifecycle } from './lifecycle.js'
import { healthRoutes } from './http/routes/health.js'
import { ChangeWatch } from './http/inventory-cache.js'
import { changeRoutes } from './http/routes/changes.js'
import { streamRoutes } from './http/routes/stream.js'
import { inventoryRoutes } from './http/routes/inventory.js'
import { orderRoutes } from './http/routes/orders.js'
import { petRoutes } from './http/routes/pets.js'
import { rateLimitRoutes } from './http/routes/rate-limit.js'
import { RESPONSE_HEADERS } from './http/schemas/common.js'
import { validatorCompiler } from './http/validation.js'
import { loggerOptions } from './logger.js'
import { Metrics } from './metrics/index.js'
import { instrumentRoutes, registerMetricsRoute } from './metrics/http.js'
import { instrumentStore } from './metrics/store.js'
import { MemoryLimiter } from './ratelimit/memory.js'
import type { RateLimiter } from './ratelimit/types.js'
import { observeDecisions } from './ratelimit/observed.js'
import type { Store } from './store/store.js'
import { tracingOn } from './tracing/spans.js'
import { traceHandlers } from './tracing/handler.js'
import { traceStore } from './tracing/store.js'
import { traceGate } from './tracing/gate.js'
import { WebhookDispatcher, type Transport } from './domain/webhook-dispatch.js'
import { Webhooks } from './domain/webhooks.js'
import { WEBHOOKS_DOCUMENT, webhookRoutes } from './http/routes/webhooks.js'
import { checkDestination, DestinationError } from './webhooks/destination.js'
import { HttpSender } from './webhooks/sender.js'


export interface AppDeps {
  store: Store
  /** Rate-limit counters; in-process when omitted. The app does not close it. */
  limiter?: RateLimiter
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

/** How often expired idempotency records are deleted: a minute's worth at a time keeps each purge short. */
const IDEMPOTENCY_PURGE_INTERVAL_MS = 60_000

/**
 * Deletes expired idempotency records once the app is ready and then every `intervalMs`, off the request path (a
 * timer that does not keep the process alive); a failed purge is logged and tried again at the next tick.
 */
function purgeExpiredKeysEvery (app: FastifyInstance, intervalMs: number, store: Store, clock: () => number): void {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<unknown> = Promise.resolve()
  const purge = (): void => {
    running = purgeExpiredKeys(store, clock).catch((error: unknown) => {
      // A store a newer release migrated is not ours to clean (the instance serves reads only).
      if (!(error instanceof StoreReadOnlyError)) app.log.warn({ err: error }, 'could not purge expired idempotency keys')
    })
  }
  app.addHook('onReady', async () => {
    purge()
    timer = setInterval(purge, intervalMs).unref()
  })
  app.addHook('onClose', async () => {
    clearInterval(timer)
    await running
  })
}

/**
 * Starts this instance's webhook dispatcher once the app is ready and stops it when the app closes (attempts in
 * flight get a moment, then their leases go back). It works on the store as given (not timed per call: its polling
 * would swamp the request series); on a store this release may only read, its steps fail quietly and it delivers nothing.
 */
function deliverWebhooks (app: FastifyInstance, config: Config, deps: AppDeps, clock: () => number, metrics: Metrics): WebhookDispatcher {
  const policy = config.webhooks
  const dispatcher = new WebhookDispatcher({
    store: deps.store,
    transport: deps.webhookTransport ?? new HttpSender({
      timeoutMs: policy.timeoutMs,
      policy: { allowPrivateNetworks: policy.allowPrivateNetworks },
      // The subscriber's deliveries log names the host only; the operator may want to know where it pointed.
      refused: ({ host, address, range }) => { app.log.info({ host, address, range }, 'webhook delivery refused: the host resolved to an address that is not public') }
    }),
    policy: { ...policy, perQuota: policy.concurrencyPerQuota, perSubscription: policy.concurrencyPerSubscription },
    owner: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    clock,
    events: {
      attempted: (outcome) => { metrics.recordWebhookAttempt(outcome) },
      disabled: (webhookId, reason) => { app.log.warn({ webhookId, reason }, 'webhook subscription disabled') },
      failed: (error) => {
        if (!(error instanceof StoreReadOnlyError)) app.log.warn({ err: error }, 'webhook delivery step failed; trying again')
      }
    }
  })
  metrics.watchWebhooks(deps.store, clock)
  app.addHook('onReady', async () => { dispatcher.start() })
  app.addHook('onClose', async () => { await dispatcher.stop() })
  return dispatcher
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
  // A shared limiter also carries the inventory's change counter: its decisions tell the listing cache whether a
  // change was acknowledged anywhere since it last checked (src/http/inventory-cache.ts).
  const watch = limiter.announceChange === undefined ? undefined : new ChangeWatch()
  const announceChange = limiter.announceChange?.bind(limiter)
  // Who may call and how often (src/access): asked for every request that is not a public route's.
  const gatekeeper = new Gatekeeper({
    store,
    limiter: watch === undefined ? limiter : observeDecisions(limiter, (decision) => { watch.observe(decision.changes) }),
    limits: config.rateLimits,
    environment: config.environment,
    authCacheTtlMs: config.authCacheTtlMs,
    clock,
    events: { decided: (subject, outcome) => metrics.recordDecision(subject, outcome), banned: () => metrics.recordBan() },
    // Never fails a request: the next minute's use records it again.
    onUseNotRecorded: (keyId, error) => { app.log.warn({ err: error, keyId }, 'could not record the last use of an API key') }
  })
  // In a traced process the gate's admission is a span (src/tracing/gate.ts).
  const access: AccessOptions = { environment: config.environment, gatekeeper, ...(tracingOn() ? { admit: traceGate(gatekeeper) } : {}) }

  // Idempotency keys of stock writes: records in the store, purged once expired (below).
  const idempotency = new IdempotencyKeys({ store, clock, ttlSeconds: config.idempotencyTtlSeconds })

  // Webhooks: subscriptions managed through the API, delivered by this instance's dispatcher (src/domain/webhook-dispatch.ts).
  const destinationPolicy = { allowPrivateNetworks: config.webhooks.allowPrivateNetworks }
  const webhooks = new Webhooks(store, {
    maxPerQuota: config.webhooks.maxPerQuota,
    retryForMs: config.webhooks.retryForMs,
    clock,
    checkUrl: async (url) => {
      try {
        return { url: (await checkDestination(url, destinationPolicy)).href }
      } catch (error) {
        if (!(error instanceof DestinationError)) throw error
        // The subscriber's answer names the host only; the operator's log says what it resolved to.
        // (The host alone: a URL's path and query may carry the subscriber's own tokens.)
        if (error.address !== undefined) app.log.info({ host: URL.parse(url)?.hostname, address: error.address, range: error.range }, 'webhook URL refused: not a public address')
        return { refusal: error.message }
      }
    }
  })

  const app = Fastify(serverOptions(config, deps.logger ?? loggerOptions(config.logLevel), access)).withTypeProvider<TypeBoxTypeProvider>()

  // The first onClose hook registered, so the last to run: nothing of the app touches the store once it runs.
  if (deps.release !== undefined) app.addHook('onClose', deps.release)

  holdConnections(app.server)
  routeEveryMethod(app)
  app.setValidatorCompiler(validatorCompiler)
  registerErrorHandling(app, (request, reply, error) => chargeErrorPath(access, request, reply, error))
  // Metrics: before any route, so that every route gets its request series (src/metrics/http.ts).
  instrumentRoutes(app, metrics)
  // Traces: a span per route handler, failed only by a 5xx answer (src/tracing/handler.ts); before any route too.
  if (tracingOn()) traceHandlers(app, (error) => errorStatus(error) >= 500)
  jsonBody(app)
  app.decorateRequest('apiKey', null)
  app.decorateRequest('admission', null)
  bounds(app, lifecycle)
  purgeExpiredKeysEvery(app, IDEMPOTENCY_PURGE_INTERVAL_MS, store, clock)
  const dispatcher = config.webhooks.deliver ? deliverWebhooks(app, config, deps, clock, metrics) : null
  // What a commit on this instance wakes: the webhook dispatcher and the change streams' watch.
  const commits = new Set<() => void>()
  if (dispatcher !== null) commits.add(() => { dispatcher.committed() })
  logRequests(app)

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Petstore Inventory Service',
        version: '1.0.0',
        description: 'Tracks the stock of pets in a store. Every operation requires an API key sent as ' +
          '`Authorization: Bearer <key>` and names the scope it needs (`inventory:read`, or `inventory:write` for ' +
          'changes). Errors are `{code, message, status}`; every answer carries `X-Request-Id` and the key\'s rate-limit ' +
          'fields (`X-RateLimit-*`, `RateLimit-Policy`, `RateLimit`; 429 with `Retry-After` over the limit). Writes taking ' +
          '`Idempotency-Key` may be retried safely with the same key, and `If-Match` with an entry\'s `ETag` applies a ' +
          'change only if the entry is unchanged. Operations marked beta are additions to the specification.',
        contact: { name: 'Petstore Inventory Service', url: config.docsUrl },
        license: { name: 'MIT', identifier: 'MIT' }
      },
      servers: [
        { url: `${config.servers.production}/v1`, description: 'Production' },
        { url: `${config.servers.staging}/v1`, description: 'Staging' }
      ],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key (psk_live_... or psk_test_...). Each operation names the scope it needs: inventory:read (any key) or inventory:write (keys of scope write).' }
        }
      },
      security: [{ bearerAuth: [] }],
      tags: [
        { name: 'inventory', description: 'Stock levels' },
        { name: 'pets', description: 'Pets (deprecated)' },
        { name: 'store', description: 'Store orders' },
        { name: 'keys', description: 'The calling API key' },
        { name: 'webhooks', description: 'Stock changes pushed to your endpoints: signed (Standard Webhooks), retried for 24 hours, at least once' }
      ],
      // The events the service sends (OpenAPI 3.1): plain JSON Schema, which the plugin's types do not describe.
      webhooks: WEBHOOKS_DOCUMENT as never
    },
    // The servers carry the /v1 prefix, so the paths are relative to it.
    transform: ({ schema, url }) => ({ schema, url: url.replace(/^\/v1(?=\/)/, '') })
  })

  const claimOptions = config.corsOrigins.length === 0
  if (!claimOptions) {
    // Before any scope: preflights carry no key and are answered here, uncounted.
    await app.register(cors, {
      origin: [...config.corsOrigins],
      methods: ['GET', 'HEAD', 'PATCH', 'POST'],
      allowedHeaders: ['Authorization', 'Content-Type', 'Idempotency-Key', 'If-Match', 'If-None-Match', 'X-Request-Id'],
      // The headers on every /v1 answer, plus those of some answers.
      exposedHeaders: [...Object.keys(RESPONSE_HEADERS), 'ETag', 'Idempotent-Replayed', 'Link', 'Changes-Cursor', 'Retry-After', 'Deprecation', 'Sunset'],
      maxAge: 600,
      // An OPTIONS without Origin or Access-Control-Request-Method is answered like a preflight (204, no CORS
      // fields) rather than with the plugin's text/plain 400, which is not the Error body every 4xx must carry.
      strictPreflight: false
    })
  }

  // Public routes, without a key and never counted: health, metrics, the API document and its /docs page.
  await app.register(async (open) => {
    const claimOtherMethods = trackRoutesForMethodNotAllowed(open, { claimOptions })
    await registerDocs(open)
    await open.register(healthRoutes, { store, limiter, lifecycle })
    // With METRICS_PORT it is served there instead (server.ts).
    if (config.metrics.port === null) registerMetricsRoute(open, metrics, config.metrics.token)
    // The document is built once, at ready, from the route schemas.
    let document: string | undefined
    open.get('/v1/openapi.json', { schema: { hide: true } }, async (_request, reply) => {
      document ??= JSON.stringify(app.swagger(), null, 2)
      return reply.type('application/json; charset=utf-8').send(document)
    })
    claimOtherMethods()
  })

  // The API: every route, 404 and 405 of this scope is behind the gate.
  await app.register(async (v1) => {
    registerGate(v1, access)
    const claimOtherMethods = trackRoutesForMethodNotAllowed(v1, { claimOptions })
    await v1.register(inventoryRoutes, {
      store,
      clock,
      idempotency,
      chargeMore: (request, reply, extra, what) => chargeMore(access, request, reply, extra, what),
      committed: () => { for (const wake of commits) wake() },
      ...(watch === undefined ? {} : { watch }), ...(announceChange === undefined ? {} : { announceChange }) })
    await v1.register(changeRoutes, { store })
    await v1.register(streamRoutes, { store, config: config.streams, lifecycle, metrics, clock, commits, standing: (request) => keyStanding(access, request) })
    await v1.register(webhookRoutes, { webhooks })
    await v1.register(orderRoutes, { store })
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
  }, { prefix: '/v1' })

  return app
}
