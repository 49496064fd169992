/**
 * Serving and recording metrics over HTTP: the per-route request series, GET /metrics on the main port, the
 * optional bearer-token guard, and the small separate server used when METRICS_PORT is set.
 */
import type { FastifyInstance, onResponseHookHandler } from 'fastify'
import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AppError, errorBody, type ErrorCode } from '../errors.js'
import type { Metrics } from './index.js'

const METRICS_PATH = '/metrics'

/** Routes outside the API document get a fixed operation name. */
const FIXED_OPERATIONS: ReadonlyArray<[RegExp, string]> = [
  [/^\/healthz$/, 'healthz'],
  [/^\/readyz$/, 'readyz'],
  [/^\/metrics$/, 'metrics'],
  [/^\/v1\/openapi\.json$/, 'openapi'],
  [/^\/docs(\/|$)/, 'docs'],
  // @fastify/cors answers preflights on a catch-all OPTIONS route.
  [/^\*$/, 'preflight']
]

/** The label of requests that matched no route (404): never the path, which a client chooses freely. */
const UNKNOWN_OPERATION = 'unknown'

/**
 * Records petstore_http_requests_total and petstore_http_request_duration_seconds. Call before any route is
 * registered: each route gets its own onResponse hook with its series bound once (no lookup by URL per
 * request); requests that match no route are recorded as `unknown` by one global hook.
 *
 * A route's operation is its OpenAPI operationId; else a fixed name (healthz, readyz, metrics, openapi,
 * docs, preflight); else `method_not_allowed` for the 405 routes claimed on an API path; else `other`.
 */
export function instrumentRoutes (app: FastifyInstance, metrics: Metrics): void {
  const apiPaths = new Set<string>()
  const ours = new WeakSet<onResponseHookHandler>()

  app.addHook('onRoute', (route) => {
    const url = route.url ?? route.path
    const operationId = (route.schema as { operationId?: unknown } | undefined)?.operationId
    let operation: string
    if (typeof operationId === 'string') {
      operation = operationId
      apiPaths.add(url)
    } else {
      operation = FIXED_OPERATIONS.find(([pattern]) => pattern.test(url))?.[1] ??
        (apiPaths.has(url) ? 'method_not_allowed' : 'other')
    }
    const series = metrics.operation(operation)
    const record: onResponseHookHandler = (request, reply, done) => {
      series.record(request.method, reply.statusCode, reply.elapsedTime / 1000)
      done()
    }
    ours.add(record)
    // Fastify may hand the same options to onRoute twice (a prefixed '/' route and its twin): one hook only.
    const existing = [route.onResponse ?? []].flat().filter((hook) => !ours.has(hook as onResponseHookHandler))
    route.onResponse = [record, ...existing] as typeof route.onResponse
  })

  const unknown = metrics.operation(UNKNOWN_OPERATION)
  app.addHook('onResponse', (request, reply, done) => {
    if (request.is404) unknown.record(request.method, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}

/** The outcome of checking a scrape's Authorization header. */
type Check = { ok: true } | { ok: false, message: string, challenge: string }

const REALM = 'Bearer realm="metrics"'
const BEARER = /^Bearer[ ]+([^ ]+)[ ]*$/i

const digest = (text: string): Buffer => createHash('sha256').update(text).digest()

/**
 * The METRICS_TOKEN check (null: open). Compares SHA-256 digests in constant time, so neither the content nor
 * the length of the token leaks through timing. The token is never logged or echoed.
 */
function metricsGuard (token: string | null): (authorization: string | undefined) => Check {
  if (token === null) return () => ({ ok: true })
  const expected = digest(token)
  return (authorization) => {
    const match = authorization === undefined ? null : BEARER.exec(authorization)
    if (match === null) {
      return { ok: false, message: 'A metrics token is required: send Authorization: Bearer <METRICS_TOKEN>.', challenge: REALM }
    }
    if (!timingSafeEqual(digest(match[1] as string), expected)) {
      return { ok: false, message: 'The metrics token is wrong.', challenge: `${REALM}, error="invalid_token"` }
    }
    return { ok: true }
  }
}

/** GET /metrics on the app's own port: no API key, not rate-limited (outside /v1), hidden from the document. */
export function registerMetricsRoute (app: FastifyInstance, metrics: Metrics, token: string | null): void {
  const check = metricsGuard(token)
  app.get(METRICS_PATH, { schema: { hide: true } }, async (request, reply) => {
    const result = check(request.headers.authorization)
    if (!result.ok) throw new AppError('unauthorized', result.message, { 'WWW-Authenticate': result.challenge })
    let text: string
    try {
      text = await metrics.exposition()
    } catch (error) {
      // Only in a cluster: the primary did not collect every worker's metrics in time.
      request.log.warn({ err: error }, 'metrics scrape failed')
      throw new AppError('service_unavailable', 'The metrics could not be collected; try again.', { 'Retry-After': '1' })
    }
    return reply.header('Cache-Control', 'no-store').type(metrics.contentType).send(text)
  })
}

/** What the separate metrics server serves. */
export interface MetricsSource {
  exposition: () => Promise<string>
  contentType: string
}

export interface MetricsServerOptions {
  host: string
  port: number
  token: string | null
  /** Where failed scrapes are reported. */
  log: { warn: (obj: object, msg: string) => void }
}

export interface MetricsServer {
  /** The bound address (the real port when 0 was asked for). */
  address: AddressInfo
  close: () => Promise<void>
}

function sendError (res: ServerResponse, code: ErrorCode, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(errorBody(code, message))
  res.writeHead(errorBody(code).status, {
    ...headers,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'X-Content-Type-Options': 'nosniff'
  })
  res.end(body)
}

/**
 * The metrics port (METRICS_PORT): a bare node:http server with one path, GET/HEAD /metrics, under the same
 * token rule as the main port; every other path is 404 and every other method 405, in the service's Error shape.
 */
export async function startMetricsServer (source: MetricsSource, options: MetricsServerOptions): Promise<MetricsServer> {
  const check = metricsGuard(options.token)
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = req.url ?? '/'
    const query = url.indexOf('?')
    const path = query === -1 ? url : url.slice(0, query)
    if (path !== METRICS_PATH) return sendError(res, 'not_found', 'Only /metrics is served on this port.')
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return sendError(res, 'method_not_allowed', `${req.method ?? ''} is not allowed here; use GET, HEAD.`, { Allow: 'GET, HEAD' })
    }
    const result = check(req.headers.authorization)
    if (!result.ok) return sendError(res, 'unauthorized', result.message, { 'WWW-Authenticate': result.challenge })
    let text: string
    try {
      text = await source.exposition()
    } catch (error) {
      options.log.warn({ err: error }, 'metrics scrape failed')
      return sendError(res, 'service_unavailable', 'The metrics could not be collected; try again.', { 'Retry-After': '1' })
    }
    res.writeHead(200, { 'Content-Type': source.contentType, 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store' })
    res.end(req.method === 'HEAD' ? undefined : text)
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      options.log.warn({ err: error }, 'metrics request failed')
      if (!res.headersSent) sendError(res, 'internal_error', 'An internal error occurred.')
      else res.destroy()
    })
  })
  // A scraper sends a small GET: slow or idle clients are cut off early.
  server.headersTimeout = 10_000
  server.requestTimeout = 10_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, options.host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return {
    address: server.address() as AddressInfo,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  }
}
