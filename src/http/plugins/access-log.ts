/**
 * The access log: one line per request (Fastify's own two are turned off, src/http/server.ts) with the request id (the
 * logger's label), operation, status, latency and key id; never the key, and no query values (a client may put
 * anything there).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { loggedUrl } from '../../redact.js'

/** Whether a logger at `level` writes the access lines at all (pino would drop them, after the work of building them). */
export const accessLogOn = (level: string): boolean => ['trace', 'debug', 'info'].includes(level)

/**
 * The access log line of a request. The key id comes with the request's logger, bound by the gate
 * (src/http/plugins/access.ts) as on every line of the request.
 */
export function accessLog (request: FastifyRequest, reply: FastifyReply): void {
  request.log.info({
    method: request.method,
    url: loggedUrl(request.url),
    operation: request.routeOptions?.schema?.operationId,
    status: reply.statusCode,
    ms: Math.round(reply.elapsedTime * 100) / 100
  }, 'request completed')
}

/** Writes the access line of every routed request once it is answered; registered only when the app logs info lines. */
export function logRequests (app: FastifyInstance): void {
  if (accessLogOn(app.log.level)) app.addHook('onResponse', async (request, reply) => { accessLog(request, reply) })
}
