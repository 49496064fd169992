import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { StoreUnavailableError } from '../../src/errors.js'
import { auth, pet, testApp } from '../helpers/app.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

describe('routing errors', () => {
  test('when the path is unknown, then it answers 404 not_found in the Error shape', async (t) => {
    const { request, key } = await testApp(t)
    for (const url of ['/nope', '/v1/nope', '/v2/inventory', '/v1/inventory/1/extra']) {
      const res = await request({ method: 'GET', url, headers: auth(key) })
      assert.equal(res.statusCode, 404, url)
      assert.deepEqual(res.json(), { code: 'not_found', message: 'No resource exists at this path.', status: 404 })
    }
  })

  test('when a known path is called with another method, then it answers 405 with Allow', async (t) => {
    const { request, key } = await testApp(t)
    const cases: Array<[string, 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH', string]> = [
      ['/v1/inventory', 'POST', 'GET, HEAD'],
      ['/v1/inventory', 'DELETE', 'GET, HEAD'],
      ['/v1/inventory/1', 'POST', 'GET, HEAD, PATCH'],
      ['/v1/inventory/1', 'PUT', 'GET, HEAD, PATCH'],
      ['/v1/pets/1', 'PATCH', 'GET, HEAD'],
      ['/v1/store/orders', 'DELETE', 'GET, HEAD, POST'],
      ['/v1/holds', 'PUT', 'GET, HEAD, POST'],
      ['/v1/inventory/1/reorder-point', 'POST', 'GET, HEAD, PUT, DELETE']
    ]
    for (const [url, method, allow] of cases) {
      const res = await request({ method, url, headers: auth(key) })
      assert.equal(res.statusCode, 405, `${method} ${url}`)
      assert.equal(res.headers.allow, allow)
      assert.equal(res.json().code, 'method_not_allowed')
      assert.equal(res.json().status, 405)
    }
  })

  test('when an API path is called with an unusual method (TRACE, PROPFIND, PURGE, ...), then it answers 405 with Allow and the rate-limit fields', async (t) => {
    const { request, key } = await testApp(t)
    for (const method of ['TRACE', 'PROPFIND', 'PROPPATCH', 'MKCOL', 'COPY', 'MOVE', 'LOCK', 'SEARCH', 'PURGE', 'REPORT', 'QUERY']) {
      const res = await request({ method: method as 'GET', url: '/v1/inventory/1', headers: auth(key) })
      assert.equal(res.statusCode, 405, method)
      assert.equal(res.headers.allow, 'GET, HEAD, PATCH', method)
      assert.equal(res.json().message, `${method} is not allowed here; use GET, HEAD, PATCH.`)
      assert.match(String(res.headers['x-ratelimit-remaining']), /^\d+$/, method)
    }
  })

  test('when a 405 on an API path has no key, then it answers 401 first: the gate guards every route of /v1', async (t) => {
    const { request } = await testApp(t)
    for (const method of ['DELETE', 'TRACE', 'PROPFIND']) {
      assert.equal((await request({ method: method as 'GET', url: '/v1/inventory' })).statusCode, 401, method)
    }
  })

  test('when a 405 carries a body of another media type, then it is still 405, not 415', async (t) => {
    const { request, key } = await testApp(t)
    const res = await request({ method: 'POST', url: '/v1/inventory', headers: { ...auth(key), 'content-type': 'text/xml' }, payload: '<x/>' })
    assert.equal(res.statusCode, 405)
  })

  test('when the docs page, its assets, health, metrics or the API document get another method, then they answer 405 with Allow', async (t) => {
    const { request } = await testApp(t)
    const cases: Array<[string, string]> = [['/docs', 'POST'], ['/docs/', 'PUT'], ['/docs', 'DELETE'], ['/docs/', 'TRACE'],
      ['/docs/static/index.html', 'POST'], ['/healthz', 'POST'], ['/readyz', 'PROPFIND'], ['/metrics', 'DELETE'], ['/v1/openapi.json', 'PUT']]
    for (const [url, method] of cases) {
      const res = await request({ method: method as 'GET', url })
      assert.equal(res.statusCode, 405, `${method} ${url}`)
      assert.equal(res.headers.allow, 'GET, HEAD', `${method} ${url}`)
      assert.equal(res.json().code, 'method_not_allowed')
      assert.equal(res.headers['x-ratelimit-limit'], undefined, 'public routes are not rate-limited')
    }
  })

  test('when the URL is malformed, then it answers 400 in the Error shape with a request id', async (t) => {
    const { request, key } = await testApp(t)
    const res = await request({ method: 'GET', url: '/v1/pets/%E0%A4%A', headers: auth(key) })
    assert.equal(res.statusCode, 400)
    assert.equal(res.json().code, 'invalid_request')
    assert.match(String(res.headers['x-request-id']), UUID)
  })

  test('when HEAD is sent for the inventory, then it answers 200 with no body', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const res = await request({ method: 'HEAD', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, '')
  })
})

describe('request ids', () => {
  test('when any response is sent, then it carries an X-Request-Id', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const responses = await Promise.all([
      request({ method: 'GET', url: '/v1/inventory', headers: auth(key) }),
      request({ method: 'GET', url: '/v1/inventory' }),
      request({ method: 'GET', url: '/missing' }),
      request({ method: 'DELETE', url: '/v1/inventory' }),
      request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload: '{' }),
      request({ method: 'GET', url: '/healthz' }),
      request({ method: 'GET', url: '/v1/openapi.json' })
    ])
    const ids = responses.map((res) => String(res.headers['x-request-id']))
    for (const id of ids) assert.match(id, UUID)
    assert.equal(new Set(ids).size, ids.length)
  })

  test('when the client sends a well-formed X-Request-Id, then it is kept', async (t) => {
    const { request, key } = await testApp(t)
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), 'x-request-id': 'client-abc.123' } })
    assert.equal(res.headers['x-request-id'], 'client-abc.123')
  })

  test('when the client sends a malformed X-Request-Id, then a fresh one replaces it', async (t) => {
    const { request, key } = await testApp(t)
    for (const given of ['has space', 'x'.repeat(200), '<script>']) {
      const res = await request({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), 'x-request-id': given } })
      assert.match(String(res.headers['x-request-id']), UUID)
    }
  })
})

describe('server-side failures', () => {
  test('when the store throws unexpectedly, then it answers 500 internal_error without internals and keeps serving', async (t) => {
    const { request, store, key } = await testApp(t, {}, { pets: [pet(1)] })
    const original = store.stock.inventoryPages.bind(store.stock)
    store.stock.inventoryPages = async function * () { yield * []; throw new Error('SQLITE_CORRUPT: secret/path/to/file.db') }
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.statusCode, 500)
    assert.deepEqual(res.json(), { code: 'internal_error', message: 'An internal error occurred.', status: 500 })
    assert.doesNotMatch(res.body, /SQLITE|secret|at /)
    store.stock.inventoryPages = original
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 200)
  })

  test('when the store is unreachable, then it answers 503 service_unavailable with Retry-After', async (t) => {
    const { request, store, key } = await testApp(t, {}, { pets: [pet(1)] })
    store.stock.inventoryPages = async function * () { yield * []; throw new StoreUnavailableError('connection refused') }
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.statusCode, 503)
    assert.equal(res.headers['retry-after'], '5')
    assert.deepEqual(res.json(), { code: 'service_unavailable', message: 'The service is temporarily unavailable.', status: 503 })
  })
})

describe('health', () => {
  test('when the process is up, then /healthz answers 200 without a key, naming the release it runs', async (t) => {
    const { request } = await testApp(t)
    const res = await request({ method: 'GET', url: '/healthz' })
    assert.equal(res.statusCode, 200)
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    assert.deepEqual(res.json(), { status: 'ok', version })
  })

  test('when the store answers, then /readyz answers 200 without a key', async (t) => {
    const { request } = await testApp(t)
    const res = await request({ method: 'GET', url: '/readyz' })
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { status: 'ready', rateLimiter: 'in-process' })
  })

  test('when the store cannot be reached, then /readyz answers 503 in the Error shape', async (t) => {
    const { request, store } = await testApp(t)
    store.ping = async () => { throw new StoreUnavailableError('down') }
    const res = await request({ method: 'GET', url: '/readyz' })
    assert.equal(res.statusCode, 503)
    assert.equal(res.json().code, 'service_unavailable')
  })
})
