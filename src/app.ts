/**
 * buildApp wires configuration and dependencies into a Fastify instance. It never listens: the process entry
 * (server.ts) does, and tests call inject().
 */
import cors from '@fastify/cors'
import swagger from '@fastify/swagger'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { Config } from './config.js'
import { AppError } from './errors.js'
import { Authenticator } from './domain/keys.js'
import { clientErrorHandler, handleError, registerErrorHandling } from './http/plugins/errors.js'
import { registerDocs } from './http/plugins/docs.js'
import { trackRoutesForMethodNotAllowed } from './http/plugins/method-not-allowed.js'
import { registerRateLimit } from './http/plugins/rate-limit.js'
import { BODY_LIMIT_BYTES, MAX_URL_LENGTH } from './http/limits.js'
import { healthRoutes } from './http/routes/health.js'
import { inventoryRoutes } from './http/routes/inventory.js'
import { orderRoutes } from './http/routes/orders.js'
import { petRoutes } from './http/routes/pets.js'
import { RESPONSE_HEADERS } from './http/schemas/common.js'
import { validatorCompiler } from './http/validation.js'
import { Metrics } from './metrics/index.js'
import { instrumentRoutes, registerMetricsRoute } from './metrics/http.js'
import { instrumentStore } from './metrics/store.js'
import { MemoryLimiter } from './ratelimit/memory.js'
import type { RateLimiter } from './ratelimit/types.js'
import type { Store } from './store/types.js'


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
}

// A client's X-Request-Id is kept when it is a sane token; anything else is replaced.
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

function requestId (request: IncomingMessage): string {
  const given = request.headers['x-request-id']
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID()
}

function trustHops (hops: number): (address: string, hop: number) => boolean {
  return (_address, hop) => hop < hops
}

export async function buildApp (config: Config, deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? Date.now
  const logger = deps.logger ?? { level: config.logLevel }
  const isInstance = typeof logger === 'object' && logger !== null && 'child' in logger
  const app = Fastify({
    ...(isInstance ? { loggerInstance: logger as FastifyBaseLogger } : { logger: logger as FastifyServerOptions['logger'] }),
    genReqId: requestId,
    requestIdHeader: false,
    // One log line per request (onResponse below) instead of Fastify's two.
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
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
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 100 },
    // Errors raised before routing (malformed URLs) get the same Error body as everything else.
    frameworkErrors: (error, request, reply) => {
      reply.header('X-Request-Id', request.id)
      handleError(error, request, reply)
    }
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.setValidatorCompiler(validatorCompiler)
  registerErrorHandling(app)
  // Metrics: before any route, so that every route gets its request series (src/metrics/http.ts).
  const metrics = deps.metrics ?? new Metrics()
  instrumentRoutes(app, metrics)
  // Only JSON bodies are accepted; without this, text/plain would reach validation as a string.
  app.removeContentTypeParser(['text/plain'])
  app.decorateRequest('apiKey', null)
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id)
    // Bodies are JSON only; no browser may sniff them into something else.
    reply.header('X-Content-Type-Options', 'nosniff')
  })
  // The access log: request id (the logger's label), operation, status, latency and key id; never the key.
  app.addHook('onResponse', async (request, reply) => {
    request.log.info({
      method: request.method,
      url: request.url,
      operation: request.routeOptions.schema?.operationId,
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      keyId: request.apiKey?.id
    }, 'request completed')
  })

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Petstore Inventory Service',
        version: '1.0.0',
        description: 'Tracks the stock of pets in a store. Every operation requires an API key sent as ' +
          '`Authorization: Bearer <key>`. Errors are `{code, message, status}`. See docs/decisions.md for the ' +
          'choices made where the specification is silent.'
      },
      servers: [
        { url: `${config.servers.production}/v1`, description: 'Production' },
        { url: `${config.servers.staging}/v1`, description: 'Staging' }
      ],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key (psk_live_... or psk_test_...)' }
        }
      },
      security: [{ bearerAuth: [] }],
      tags: [
        { name: 'inventory', description: 'Stock levels' },
        { name: 'pets', description: 'Pets (deprecated)' },
        { name: 'store', description: 'Store orders' }
      ]
    },
    // The servers carry the /v1 prefix, so the paths are relative to it.
    transform: ({ schema, url }) => ({ schema, url: url.replace(/^\/v1(?=\/)/, '') })
  })
  // The API reference page (/docs): outside /v1, so no key and no rate limit; hidden from the document. Before
  // the 405 tracking: the tracker does not see Fastify's '/docs/' twin of the prefixed '/' route and would
  // collide with it, so other methods on /docs get the plain 404.
  await registerDocs(app)

  if (config.corsOrigins.length > 0) {
    // Before authentication: preflights carry no key and are answered here, uncounted.
    await app.register(cors, {
      origin: [...config.corsOrigins],
      methods: ['GET', 'HEAD', 'PATCH'],
      allowedHeaders: ['Authorization', 'Content-Type', 'If-Match', 'If-None-Match', 'X-Request-Id'],
      // The headers on every /v1 answer, plus those of some answers.
      exposedHeaders: [...Object.keys(RESPONSE_HEADERS), 'ETag', 'Link', 'Retry-After', 'Deprecation', 'Sunset'],
      maxAge: 600
    })
  }

  const registerMethodNotAllowed = trackRoutesForMethodNotAllowed(app, { claimOptions: config.corsOrigins.length === 0 })

  // Every store call the app makes is timed (petstore_store_*); the caller keeps and closes the real store.
  const store = instrumentStore(deps.store, metrics)
  metrics.watchStore(deps.store)
  const authenticator = new Authenticator(store, config.authCacheTtlMs)
  const limiter = deps.limiter ?? new MemoryLimiter({ clock, maxSubjects: config.rateLimits.maxSubjects })
  metrics.watchLimiter(limiter)
  registerRateLimit(app, { limiter, authenticator, store, config: config.rateLimits, clock, metrics })
  // After authentication and counting, so that the 414 carries the rate-limit headers like every /v1 answer.
  app.addHook('onRequest', async (request) => {
    if (request.url.length > MAX_URL_LENGTH) throw new AppError('uri_too_long', `The request URL exceeds ${MAX_URL_LENGTH} characters.`)
  })
  await app.register(healthRoutes, { store })
  // Outside /v1: no key, never rate-limited. With METRICS_PORT it is served there instead (server.ts).
  if (config.metrics.port === null) registerMetricsRoute(app, metrics, config.metrics.token)
  await app.register(async (v1) => {
    await v1.register(inventoryRoutes, { store, clock })
    await v1.register(orderRoutes, { store })
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
  }, { prefix: '/v1' })

  // The document is built once, at ready, from the route schemas; served without a key.
  let document: string | undefined
  app.get('/v1/openapi.json', { schema: { hide: true } }, async (_request, reply) => {
    document ??= JSON.stringify(app.swagger(), null, 2)
    return reply.type('application/json; charset=utf-8').send(document)
  })

  registerMethodNotAllowed()
  return app
}
