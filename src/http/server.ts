/**
 * The HTTP server under the app: Fastify's options (request ids, logging, bounds, timeouts, proxies, errors raised
 * before routing) and the Node server's connection handling.
 */
import { LogController, type FastifyBaseLogger, type FastifyHttpOptions, type FastifyServerOptions } from 'fastify'
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'
import type { Config } from '../config.js'
import { lazyChildLoggerFactory } from '../logger.js'
import { mentionsSecret } from '../redact.js'
import { BODY_LIMIT_BYTES } from './limits.js'
import { chargeErrorPath, type AccessOptions } from './plugins/access.js'
import { accessLog, accessLogOn } from './plugins/access-log.js'
import { clientErrorHandler, handleError } from './plugins/errors.js'

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

/**
 * Fastify's options for the app: `logger` is pino's options, `false`, or a logger instance to use as it is; `access`
 * charges the errors raised before routing to their caller.
 */
export function serverOptions (config: Config, logger: FastifyServerOptions['logger'] | FastifyBaseLogger, access: AccessOptions): FastifyHttpOptions<Server> {
  const isInstance = typeof logger === 'object' && logger !== null && 'child' in logger
  return {
    ...(isInstance ? { loggerInstance: logger as FastifyBaseLogger } : { logger: logger as FastifyServerOptions['logger'] }),
    genReqId: requestId,
    requestIdHeader: false,
    // One log line per request (src/http/plugins/access-log.ts) instead of Fastify's two.
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
  }
}

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

/** How the Node server treats its connections: every header line read, half-closed requests answered, silent ones closed. */
export function holdConnections (server: Server & { httpAllowHalfOpen?: boolean }): void {
  // Header lines: Node's count cap is off (0), so no line is ever dropped (Node 20 silently kept only the first
  // 2000 names and values) and none is refused before a request exists (Node 22 and later); the 16 KiB size cap
  // still bounds them to a few thousand. Above MAX_HEADER_LINES the bounds (src/http/plugins/bounds.ts) answer 431
  // with the rate-limit fields.
  server.maxHeadersCount = 0
  // A client that sends a complete request and then closes its sending side (a half-close) still gets its
  // answer: without this, Node ends the connection as soon as the client's FIN arrives, and an answer that needs
  // an asynchronous step (a PostgreSQL or Redis round trip) is lost after the request has been counted.
  server.httpAllowHalfOpen = true
  closeSilentConnectionsOnClose(server)
}
