/**
 * What every request gets before any scope's own hooks: its X-Request-Id and nosniff on the answer, Connection: close
 * while the instance drains, and the bounds on header lines and URL length.
 */
import type { FastifyInstance } from 'fastify'
import { AppError } from '../../errors.js'
import type { Lifecycle } from '../../lifecycle.js'
import { MAX_HEADER_LINES, MAX_URL_LENGTH } from '../limits.js'

/** The hook, on the app itself: it runs for every request, routed or not, ahead of the gate. */
export function bounds (app: FastifyInstance, lifecycle: Lifecycle): void {
  // A callback hook: nothing here waits, so no promise is made per request.
  app.addHook('onRequest', (request, reply, done) => {
    // Header names in lower case on every request's path: Fastify lowercases each name it is given, and a name
    // that changes comes back as a new string that V8 must look up in its string table before using it as a key
    // (about 0.2 µs a header); a name already in lower case is returned as it is (src/http/plugins/access.ts too).
    reply.header('x-request-id', request.id)
    // Bodies are JSON only; no browser may sniff them into something else.
    reply.header('x-content-type-options', 'nosniff')
    // While draining, each answer ends its connection: the client's next request opens a new one, which the
    // balancer gives to an instance that stays.
    if (lifecycle.draining) reply.header('connection', 'close')
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
}
