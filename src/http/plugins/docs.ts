/**
 * The interactive API reference at /docs: Swagger UI (served by @fastify/swagger-ui from its bundled
 * swagger-ui-dist, so the page works offline) rendering the document of /v1/openapi.json. Outside /v1: no key,
 * not rate-limited.
 */
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'

const DOCS_PREFIX = '/docs'

// Relative, so "Try it out" calls whatever host and port served the page.
const THIS_SERVER = Object.freeze({ url: '/v1', description: 'This server' })

// The plugin's default CSP without what an offline page on plain HTTP cannot use: no https: sources (nothing
// comes from elsewhere), no validator.swagger.io image (validatorUrl stays null), and no
// upgrade-insecure-requests: opened over http:// at anything but localhost (a LAN address, a host behind a
// plain-HTTP proxy), that directive rewrites the page's own scripts and calls to https:// and nothing loads.
// form-action is added: nothing on the page submits a form to another address.
const CSP = [
  "default-src 'self'",
  "base-uri 'self'",
  "font-src 'self' data:",
  "frame-ancestors 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self'",
  "form-action 'self'"
].join('; ')

/**
 * Registers the page. Call after @fastify/swagger: the page shows the same generated document, with this
 * server prepended to `servers` in the page's copy only (the production and staging addresses are not
 * reachable from wherever the page is opened).
 */
export async function registerDocs (app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    staticCSP: CSP,
    // The plugin hands over a deep clone of app.swagger(), so /v1/openapi.json keeps its servers.
    transformSpecification: (document) => ({ ...document, servers: [THIS_SERVER, ...(document.servers ?? [])] }),
    uiConfig: {
      // No top bar: its box loads any other document by URL, and its Swagger logo carries an inline <style>
      // that the CSP above blocks. The page is about this API only.
      layout: 'BaseLayout',
      // Every tag open with its operations listed; an opened operation has Try it out on already; the key
      // stays across reloads (browser local storage) until Logout.
      docExpansion: 'list',
      displayOperationId: true,
      tryItOutEnabled: true,
      persistAuthorization: true,
      displayRequestDuration: true,
      defaultModelsExpandDepth: 1
    },
    theme: { title: 'Petstore Inventory Service API reference' }
  })
}
