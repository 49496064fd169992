/**
 * buildApp wires configuration and dependencies into a Fastify instance. It never listens: the process entry
 * (server.ts) does, and tests call inject().
 */
import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'
import { Gatekeeper } from './access/admission.js'
import { IdempotencyKeys, purgeExpiredKeys } from './domain/idempotency.js'
import type { Config } from './config.js'
import { AppError, StoreReadOnlyError } from './errors.js'
import { chargeErrorPath, chargeMore, keyStanding, registerGate, type AccessOptions } from './http/plugins/access.js'
import { clientErrorHandler, errorStatus, handleError, registerErrorHandling } from './http/plugins/errors.js'
import { registerDocs } from './http/plugins/docs.js'
import { routeEveryMethod, trackRoutesForMethodNotAllowed } from './http/plugins/method-not-allowed.js'
import { JsonBodyError, parseJsonBody } from './http/json-body.js'
import { BODY_LIMIT_BYTES, MAX_HEADER_LINES, MAX_URL_LENGTH } from './http/limits.js'
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
import { mentionsSecret } from './redact.js'
import { validatorCompiler } from './http/validation.js'
import { lazyChildLoggerFactory, loggerOptions } from './logger.js'
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
import { loggedUrl } from './redact.js'


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

// A client's X-Request-Id is kept when it is a sane token (and nothing secret-shaped, such as a key: request ids
// are logged, traced and stored in the stock ledger); anything else is replaced.
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

function requestId (request: IncomingMessage): string {
  const given = request.headers['x-request-id']
  return typeof given === 'string' && REQUEST_ID.test(given) && !mentionsSecret(given) ? given : randomUUID()
}

function trustHops (hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops
}

const accessLogOn = (level: string): boolean => ['trace', 'debug', 'info'].includes(level)

/**
 * The access log line of a request: never the key, and no query values (a client may put anything there). The key
 * id comes with the request's logger, bound by the gate (src/http/plugins/access.ts) as on every line of the request.
 */
function accessLog (request: FastifyRequest, reply: FastifyReply): void {
  request.log.info({
    method: request.method,
    url: loggedUrl(request.url),
    operation: request.routeOptions?.schema?.operationId,
    status: reply.statusCode,
    ms: Math.round(reply.elapsedTime * 100) / 100
  }, 'request completed')
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

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * Makes the server's close also close the connections that were accepted and have sent nothing yet (a client pool's
 * or a browser's spare connection): they are idle, and server.close() closes idle connections, but before Node 26 not
 * those (Node's fix: "http: close pre-request sockets in closeIdleConnections"), so that a close waited until the
 * client dropped one, for undici about the keep-alive timeout (72 s) later. server.close() calls
 * closeIdleConnections(), extended here for this server.
 */
function closeSilentConnectionsOnClose (server: Server): void {
  const connections = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    connections.add(socket)
    socket.once('close', () => { connections.delete(socket) })
  })
  const closeIdleConnections = server.closeIdleConnections.bind(server)
  server.closeIdleConnections = () => {
    closeIdleConnections()
    for (const socket of connections) if (socket.bytesRead === 0) socket.destroy()
  }
}

export async function buildApp (config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? Date.now
  const lifecycle = deps.lifecycle ?? new Lifecycle()
  const logger = deps.logger ?? loggerOptions(config.logLevel)
  const isInstance = typeof logger === 'object' && logger !== null && 'child' in logger

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

  const app = Fastify({
    ...(isInstance ? { loggerInstance: logger as FastifyBaseLogger } : { logger: logger as FastifyServerOptions['logger'] }),
    genReqId: requestId,
    requestIdHeader: false,
    // One log line per request (onResponse below) instead of Fastify's two.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    childLoggerFactory: lazyChildLoggerFactory,
    bodyLimit: BODY_LIMIT_BYTES,
    // A hop count trusts that many proxies in front of the service (proxy-addr semantics).
    trustProxy: typeof config.trustProxy === 'number' ? trustHops(config.trustProxy) : config.trustProxy,
    requestTimeout: config.timeouts.requestMs,
    keepAliveTimeout: config.timeouts.keepAliveMs,
    // Node's limit for the request line and headers (16 KiB) stays; slow senders are cut off after this.
    http: {
      headersTimeout: config.timeouts.headersMs,
      // Node checks for slow senders on an interval (30 s by default): check often enough for the timeout to hold.
      connectionsCheckingInterval: Math.max(100, Math.min(5000, Math.floor(config.timeouts.headersMs / 2)))
    },
    clientErrorHandler,
    // A request that arrives on an open connection after the listener closed is served like any other (Fastify
    // would answer a 503 body of its own, not the Error body): the drain before the close already asked every
    // client to reconnect elsewhere, so only a request racing the close lands here.
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 100 },
    // Errors raised before routing (malformed URLs) get the same Error body as everything else, and count
    // against their caller like every answer that is not a public route's.
    frameworkErrors: (error, request, reply) => {
      reply.header('X-Request-Id', request.id).header('X-Content-Type-Options', 'nosniff')
      // No route, so no onResponse hook: the access line is written here (a charged request leaves a trace).
      if (accessLogOn(request.log.level)) reply.raw.once('finish', () => { accessLog(request, reply) })
      chargeErrorPath(access, request, reply, error).then((answer) => handleError(answer, request, reply), (failure: unknown) => {
        request.log.error({ err: failure }, 'could not answer a framework error')
        handleError(error, request, reply)
      })
    }
  }).withTypeProvider<TypeBoxTypeProvider>()

  // The first onClose hook registered, so the last to run: nothing of the app touches the store once it runs.
  if (deps.release !== undefined) app.addHook('onClose', deps.release)

  const server = app.server as Server & { httpAllowHalfOpen?: boolean }
  // Header lines: Node's count cap is off (0), so no line is ever dropped (Node 20 silently kept only the first
  // 2000 names and values) and none is refused before a request exists (Node 22 and later); the 16 KiB size cap
  // still bounds them to a few thousand. Above MAX_HEADER_LINES the onRequest hook below answers 431 with the
  // rate-limit fields.
  server.maxHeadersCount = 0
  // A client that sends a complete request and then closes its sending side (a half-close) still gets its
  // answer: without this, Node ends the connection as soon as the client's FIN arrives, and an answer that needs
  // an asynchronous step (a PostgreSQL or Redis round trip) is lost after the request has been counted.
  server.httpAllowHalfOpen = true
  closeSilentConnectionsOnClose(server)

  routeEveryMethod(app)
  app.setValidatorCompiler(validatorCompiler)
  registerErrorHandling(app, (request, reply, error) => chargeErrorPath(access, request, reply, error))
  // Metrics: before any route, so that every route gets its request series (src/metrics/http.ts).
  instrumentRoutes(app, metrics)
  // Traces: a span per route handler, failed only by a 5xx answer (src/tracing/handler.ts); before any route too.
  if (tracingOn()) traceHandlers(app, (error) => errorStatus(error) >= 500)
  // Only JSON bodies are accepted (text/plain would otherwise reach validation as a string), read exactly.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // JSON is UTF-8 (RFC 8259): another charset is not read as if it were, and bytes that are not UTF-8 are
    // refused rather than replaced with U+FFFD.
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(request.headers['content-type'] ?? '')?.[1]
    if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
      return done(new AppError('unsupported_media_type', 'The body must be application/json in UTF-8.'), undefined)
    }
    let text: string
    try {
      text = UTF8.decode(body as Buffer)
    } catch {
      return done(new AppError('invalid_request', 'The request body is not valid UTF-8.'), undefined)
    }
    if (text === '') return done(new AppError('invalid_request', 'The request body is empty; send a JSON object.'), undefined)
    try {
      done(null, parseJsonBody(text))
    } catch (error) {
      done(error instanceof JsonBodyError ? new AppError('invalid_request', error.message) : error as Error, undefined)
    }
  })
  app.decorateRequest('apiKey', null)
  app.decorateRequest('admission', null)
  // A callback hook: nothing here waits, so no promise is made per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id)
    // Bodies are JSON only; no browser may sniff them into something else.
    reply.header('X-Content-Type-Options', 'nosniff')
    // While draining, each answer ends its connection: the client's next request opens a new one, which the
    // balancer gives to an instance that stays.
    if (lifecycle.draining) reply.header('Connection', 'close')
    // Bounds that hold for every request. Raised here, before any scope's own hooks: a guarded scope's error
    // handler still counts the request and sends the rate-limit fields with the answer.
    if (request.raw.rawHeaders.length > 2 * MAX_HEADER_LINES) {
      done(new AppError('headers_too_large', `The request has more than ${MAX_HEADER_LINES} header lines.`))
    } else if (request.url.length > MAX_URL_LENGTH) {
      done(new AppError('uri_too_long', `The request URL exceeds ${MAX_URL_LENGTH} characters.`))
    } else {
      done()
    }
  })
  purgeExpiredKeysEvery(app, IDEMPOTENCY_PURGE_INTERVAL_MS, store, clock)
  const dispatcher = config.webhooks.deliver ? deliverWebhooks(app, config, deps, clock, metrics) : null
  // What a commit on this instance wakes: the webhook dispatcher and the change streams' watch.
  const commits = new Set<() => void>()
  if (dispatcher !== null) commits.add(() => { dispatcher.committed() })
  // The access log: request id (the logger's label), operation, status, latency and key id; never the key,
  // and no query values (a client may put anything there).
  // Registered only when info lines are written at all (pino would drop them, after the work of building them).
  if (accessLogOn(app.log.level)) app.addHook('onResponse', async (request, reply) => { accessLog(request, reply) })

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
