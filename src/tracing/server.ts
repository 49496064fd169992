/**
 * The server span of each traced request, in traced processes only (the app registers these hooks first, when
 * tracingOn()). Ours rather than an instrumentation's (docs/adr/0044-tracing-costs-what-it-samples.md): the sampler
 * is asked once, as the request arrives (startServerSpan), and a request it leaves out costs that question and
 * nothing more: no span, no context, no attributes. A traced request's remaining hooks, handler and store calls run in its span's context; the span
 * ends as the answer is handed to Node (onSend: a change stream's span is its opening, not its hours).
 */
import type { FastifyInstance } from 'fastify'
import { context } from '@opentelemetry/api'
import { endServerSpan, startServerSpan } from './spans.js'

/** Requests that make no trace: probes and scrapes, which would otherwise be most of the traces. */
const UNTRACED = /^\/(?:healthz|readyz|metrics)(?:[?#]|$)/

/** Registers the hooks that start and end each request's server span; call before any other hook and any route. */
export function traceRequests (app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    const traced = UNTRACED.test(request.url) ? null : startServerSpan(request)
    if (traced === null) done()
    else context.with(traced, done)
  })
  app.addHook('onSend', (request, reply, payload, done) => {
    endServerSpan(request, reply.statusCode)
    done(null, payload)
  })
}
