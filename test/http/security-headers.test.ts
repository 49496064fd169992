import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, pet, testApp } from '../helpers/app.js'

describe('security headers', () => {
  test('when any response is sent, then it carries X-Content-Type-Options: nosniff', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    for (const options of [
      { method: 'GET' as const, url: '/v1/inventory', headers: auth(key) },
      { method: 'GET' as const, url: '/v1/inventory' },
      { method: 'GET' as const, url: '/nope' },
      { method: 'GET' as const, url: '/v1/openapi.json' },
      { method: 'GET' as const, url: '/healthz' }
    ]) {
      const res = await request(options)
      assert.equal(res.headers['x-content-type-options'], 'nosniff', options.url)
    }
  })

  test('when authenticated data or its errors are sent, then Cache-Control is no-store', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const first = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    const answers = [
      first,
      await request({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), 'if-none-match': String(first.headers.etag) } }),
      await request({ method: 'GET', url: '/v1/pets/1', headers: auth(key) }),
      await request({ method: 'GET', url: '/v1/store/orders', headers: auth(key) }),
      await request({ method: 'GET', url: '/v1/inventory' })
    ]
    assert.deepEqual(answers.map((res) => res.statusCode), [200, 304, 200, 200, 401])
    for (const res of answers) assert.equal(res.headers['cache-control'], 'no-store')
  })

  test('when the public API document is sent, then it is not marked no-store', async (t) => {
    const { request } = await testApp(t)
    const res = await request({ method: 'GET', url: '/v1/openapi.json' })
    assert.equal(res.headers['cache-control'], undefined)
  })

  test('when a request comes from a browser origin, then no CORS headers are sent (CORS is off)', async (t) => {
    const { request, key } = await testApp(t)
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), origin: 'https://evil.example' } })
    assert.equal(res.headers['access-control-allow-origin'], undefined)
    const preflight = await request({ method: 'OPTIONS', url: '/v1/inventory', headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' } })
    assert.equal(preflight.headers['access-control-allow-origin'], undefined)
  })
})

describe('CORS with an explicit origin list', () => {
  const env = { CORS_ORIGINS: 'https://shop.example, http://localhost:3000' }

  test('when a listed origin calls, then it may read the answer and its rate-limit headers', async (t) => {
    const { request, key } = await testApp(t, env)
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), origin: 'https://shop.example' } })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['access-control-allow-origin'], 'https://shop.example')
    assert.match(String(res.headers['access-control-expose-headers']), /X-RateLimit-Remaining/)
    assert.match(String(res.headers['access-control-expose-headers']), /ETag/)
  })

  test('when an unlisted origin calls, then no CORS header lets it read the answer', async (t) => {
    const { request, key } = await testApp(t, env)
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), origin: 'https://evil.example' } })
    assert.equal(res.headers['access-control-allow-origin'], undefined)
  })

  test('when a listed origin sends a preflight, then it is answered without a key and without counting', async (t) => {
    const { request, key } = await testApp(t, { ...env, RATE_LIMIT_FREE: '2/100' })
    const preflight = await request({
      method: 'OPTIONS',
      url: '/v1/inventory/1',
      headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'PATCH', 'access-control-request-headers': 'authorization,content-type' }
    })
    assert.equal(preflight.statusCode, 204)
    assert.equal(preflight.headers['access-control-allow-origin'], 'http://localhost:3000')
    assert.match(String(preflight.headers['access-control-allow-methods']), /PATCH/)
    assert.match(String(preflight.headers['access-control-allow-headers']), /Authorization/)
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.headers['x-ratelimit-remaining'], '1', 'the preflight was not counted')
  })
})
