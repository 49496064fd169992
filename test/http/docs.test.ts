import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { testApp, type TestApp } from '../helpers/app.js'

// inject() needs an origin to resolve the page's references against; anything else is outside the service.
const ORIGIN = 'http://localhost'

/** GETs a URL as a browser would, following the plugin's redirects (e.g. /docs/static/index.html -> /docs/). */
async function browse (request: TestApp['request'], url: string): Promise<{ res: LightMyRequestResponse, url: string }> {
  for (let hops = 0; hops < 5; hops++) {
    const res = await request({ method: 'GET', url })
    const location = res.headers.location
    if (res.statusCode < 300 || res.statusCode >= 400 || typeof location !== 'string') return { res, url }
    url = new URL(location, ORIGIN + url).pathname
  }
  throw new Error(`too many redirects from ${url}`)
}

/** The same-origin paths of every href and src in a page; fails on anything pointing elsewhere. */
function referencedPaths (html: string, pageUrl: string): string[] {
  const references = [...html.matchAll(/\b(?:href|src)="([^"]*)"/g)].map((m) => m[1] ?? '')
  return references.map((reference) => {
    const url = new URL(reference, ORIGIN + pageUrl)
    assert.equal(url.origin, ORIGIN, `the page references ${reference}, outside the service`)
    return url.pathname
  })
}

const EXPECTED_TYPE: Record<string, RegExp> = {
  css: /^text\/css\b/,
  js: /^(?:application|text)\/javascript\b/,
  png: /^image\/png$/
}

function rateLimitHeaders (res: LightMyRequestResponse): string[] {
  return Object.keys(res.headers).filter((name) => /^(?:x-)?ratelimit/i.test(name))
}

describe('GET /docs (the API reference page)', () => {
  test('when opened without a key, then it answers the HTML page, uncounted and cacheable', async (t) => {
    const { request } = await testApp(t)
    const { res } = await browse(request, '/docs')
    assert.equal(res.statusCode, 200)
    assert.match(String(res.headers['content-type']), /^text\/html\b/)
    assert.match(res.body, /<div id="swagger-ui">/)
    assert.deepEqual(rateLimitHeaders(res), [])
    assert.notEqual(res.headers['cache-control'], 'no-store')
    assert.equal(res.headers['x-content-type-options'], 'nosniff')
  })

  test('when the old static index is asked for, then it leads to the same page', async (t) => {
    const { request } = await testApp(t)
    const { res, url } = await browse(request, '/docs/static/index.html')
    assert.equal(url, '/docs/')
    assert.equal(res.statusCode, 200)
    assert.match(res.body, /<div id="swagger-ui">/)
  })

  for (const page of ['/docs', '/docs/']) {
    test(`when ${page} is loaded, then every asset it references is served by the service with its content type`, async (t) => {
      const { request } = await testApp(t)
      const { res, url } = await browse(request, page)
      const paths = referencedPaths(res.body, url)
      assert.ok(paths.some((p) => p.endsWith('/swagger-ui-bundle.js')), 'the page loads the Swagger UI bundle')
      assert.ok(paths.some((p) => p.endsWith('/swagger-initializer.js')), 'the page loads its initializer')
      for (const path of paths) {
        const asset = await request({ method: 'GET', url: path })
        assert.equal(asset.statusCode, 200, path)
        const extension = path.slice(path.lastIndexOf('.') + 1)
        // nosniff is on every answer: a script or style sheet with another type would be refused by browsers.
        assert.match(String(asset.headers['content-type']), EXPECTED_TYPE[extension] ?? /^$/, path)
        assert.equal(asset.headers['x-content-type-options'], 'nosniff', path)
        assert.deepEqual(rateLimitHeaders(asset), [], path)
        assert.notEqual(asset.headers['cache-control'], 'no-store', path)
      }
    })
  }

  test('when the page, its style sheets and its initializer are read, then none loads anything from elsewhere', async (t) => {
    const { request } = await testApp(t)
    const { res, url } = await browse(request, '/docs')
    assert.doesNotMatch(res.body, /https?:\/\//i)
    for (const path of referencedPaths(res.body, url)) {
      const asset = await request({ method: 'GET', url: path })
      if (path.endsWith('.css')) {
        // Inline data: images (SVGs name their XML namespace) are fine; a url(http...) or @import is a download.
        assert.doesNotMatch(asset.body, /url\(\s*["']?(?:https?:)?\/\//i, path)
        assert.doesNotMatch(asset.body, /@import/i, path)
      }
      if (path.endsWith('/swagger-initializer.js')) {
        // Whole-line comments may cite a web page; the code itself must not.
        const code = asset.body.replace(/^\s*\/\/.*$/gm, '')
        assert.doesNotMatch(code, /https?:\/\//i, path)
        assert.match(code, /validatorUrl: null/, 'no online validator badge is fetched')
      }
    }
  })

  test('when the page is served, then its Content-Security-Policy allows only the service itself', async (t) => {
    const { request } = await testApp(t)
    const { res } = await browse(request, '/docs')
    const csp = String(res.headers['content-security-policy'])
    assert.match(csp, /default-src 'self'/)
    assert.match(csp, /script-src 'self'(;|$)/)
    assert.doesNotMatch(csp, /https:|upgrade-insecure-requests/)
  })

  test('when the page loads its document, then it is /v1/openapi.json with this server listed first', async (t) => {
    const { request } = await testApp(t)
    // The initializer points Swagger UI at ./json next to the page.
    const initializer = await request({ method: 'GET', url: '/docs/static/swagger-initializer.js' })
    assert.match(initializer.body, /url: resolveUrl\('\.\/json'\)/)
    const shown = await request({ method: 'GET', url: '/docs/json' })
    assert.equal(shown.statusCode, 200)
    assert.deepEqual(rateLimitHeaders(shown), [])
    const api = await request({ method: 'GET', url: '/v1/openapi.json' })
    const { servers: shownServers, ...shownRest } = shown.json() as { servers: unknown[] }
    const { servers: apiServers, ...apiRest } = api.json() as { servers: unknown[] }
    assert.deepEqual(shownServers, [{ url: '/v1', description: 'This server' }, ...apiServers])
    assert.deepEqual(shownRest, apiRest)
  })

  test('when the page has loaded its document first, then /v1/openapi.json still lists only the public servers and API paths', async (t) => {
    const { request } = await testApp(t, { PRODUCTION_URL: 'https://api.example.test', STAGING_URL: 'https://staging.example.test' })
    assert.equal((await request({ method: 'GET', url: '/docs/json' })).statusCode, 200)
    const doc = (await request({ method: 'GET', url: '/v1/openapi.json' })).json() as { servers: Array<{ url: string }>, paths: Record<string, unknown> }
    assert.deepEqual(doc.servers.map((s) => s.url), ['https://api.example.test/v1', 'https://staging.example.test/v1'])
    assert.ok('/inventory' in doc.paths)
    assert.deepEqual(Object.keys(doc.paths).filter((path) => path.startsWith('/docs')), [], 'the page\'s routes are hidden')
  })

  test('when an asset that does not exist is asked for, then the answer is the usual 404 Error body', async (t) => {
    const { request } = await testApp(t)
    const res = await request({ method: 'GET', url: '/docs/static/nope.js' })
    assert.equal(res.statusCode, 404)
    assert.deepEqual(res.json(), { code: 'not_found', message: 'No resource exists at this path.', status: 404 })
    assert.equal(res.headers['x-content-type-options'], 'nosniff')
  })
})
