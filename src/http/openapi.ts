/**
 * The OpenAPI document's own text (the paths come from the route schemas): what the service is, its servers, its
 * security scheme and tags, and the events it sends. Served at GET /v1/openapi.json (src/http/routes/index.ts).
 */
import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { WEBHOOKS_DOCUMENT } from './routes/webhooks.js'

/** Registers the document's generator; routes added from now on are described in it. */
export async function registerOpenApi (app: FastifyInstance, config: Config): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Petstore Inventory Service',
        version: '1.0.0',
        description: 'Tracks the stock of pets in a store. Every operation requires an API key sent as ' +
          '`Authorization: Bearer <key>` and names the scope it needs: `inventory:read` to read, `inventory:sell` to ' +
          'place and move holds and orders, `inventory:write` to change stock and webhooks (each includes the one before). Errors are `{code, message, status}`; every answer carries `X-Request-Id` and the key\'s rate-limit ' +
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
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key (psk_live_... or psk_test_...). Each operation names the scope it needs: inventory:read (any key), inventory:sell (keys of scope storefront or write: holds and orders) or inventory:write (keys of scope write: stock and webhooks).' }
        }
      },
      security: [{ bearerAuth: [] }],
      tags: [
        { name: 'inventory', description: 'Stock levels' },
        { name: 'pets', description: 'Pets (deprecated)' },
        { name: 'store', description: 'Store orders' },
        { name: 'holds', description: 'Stock held for a checkout: confirmed on payment (sold), released on abandonment, or expired' },
        { name: 'keys', description: 'The calling API key' },
        { name: 'webhooks', description: 'Stock changes pushed to your endpoints: signed (Standard Webhooks), retried for 24 hours, at least once' }
      ],
      // The events the service sends (OpenAPI 3.1): plain JSON Schema, which the plugin's types do not describe.
      webhooks: WEBHOOKS_DOCUMENT as never
    },
    // The servers carry the /v1 prefix, so the paths are relative to it.
    transform: ({ schema, url }) => ({ schema, url: url.replace(/^\/v1(?=\/)/, '') })
  })
}

/** Serves the document, built once, at the first request, from the route schemas of the whole app. */
export function serveOpenApi (scope: FastifyInstance): void {
  let document: string | undefined
  scope.get('/v1/openapi.json', { schema: { hide: true } }, async (_request, reply) => {
    document ??= JSON.stringify(scope.swagger(), null, 2)
    return reply.type('application/json; charset=utf-8').send(document)
  })
}
