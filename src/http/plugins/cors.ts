/** CORS for the browser origins the configuration allows (CORS_ORIGINS); none, no CORS. */
import cors from '@fastify/cors'
import type { FastifyInstance } from 'fastify'
import { RESPONSE_HEADERS } from '../schemas/common.js'

/** Registers CORS when there are origins to allow; before any scope, so that preflights (no key) are answered uncounted. */
export async function allowOrigins (app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return
  await app.register(cors, {
    origin: [...origins],
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
