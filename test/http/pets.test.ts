import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, pet, testApp } from '../helpers/app.js'

const DEPRECATED = '2026-06-01T00:00:00Z'
const SUNSET = '2027-12-31T23:59:59Z'
const env = { PETS_DEPRECATED_AT: DEPRECATED, PETS_SUNSET: SUNSET, DOCS_URL: 'https://docs.example.test' }

function assertDeprecationHeaders (headers: Record<string, unknown>): void {
  assert.equal(headers.deprecation, `@${Date.parse(DEPRECATED) / 1000}`)
  assert.equal(headers.sunset, 'Fri, 31 Dec 2027 23:59:59 GMT')
  assert.equal(headers.link,
    '<https://docs.example.test/deprecations/get-pet-by-id>; rel="deprecation"; type="text/html", ' +
    '<https://docs.example.test/sunset-policy>; rel="sunset"; type="text/html"')
}

describe('GET /v1/pets/{petId} (deprecated)', () => {
  test('when the pet exists, then it answers the whole pet record with exact int64 ids', async (t) => {
    const { request, key } = await testApp(t, env, {
      pets: [pet(9007199254740993n, {
        name: 'Rex',
        status: 'pending',
        category: { id: 9007199254740995n, name: 'Dogs' },
        tags: [{ id: 9223372036854775807n, name: 'big' }],
        photoUrls: ['https://img.example/rex.jpg']
      })]
    })
    const res = await request({ method: 'GET', url: '/v1/pets/9007199254740993', headers: auth(key) })
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, '{"id":9007199254740993,"name":"Rex","status":"pending",' +
      '"category":{"id":9007199254740995,"name":"Dogs"},"tags":[{"id":9223372036854775807,"name":"big"}],' +
      '"photoUrls":["https://img.example/rex.jpg"]}')
  })

  test('when optional fields are absent, then they are omitted', async (t) => {
    const { request, key } = await testApp(t, env, { pets: [pet(1, { name: 'Plain' })] })
    const res = await request({ method: 'GET', url: '/v1/pets/1', headers: auth(key) })
    assert.deepEqual(res.json(), { id: 1, name: 'Plain', status: 'available' })
  })

  test('when the pet is found, then Deprecation, Sunset and Link headers are present', async (t) => {
    const { request, key } = await testApp(t, env, { pets: [pet(1)] })
    const res = await request({ method: 'GET', url: '/v1/pets/1', headers: auth(key) })
    assertDeprecationHeaders(res.headers)
  })

  test('when the pet is unknown, then it answers 404 not_found with the deprecation headers', async (t) => {
    const { request, key } = await testApp(t, env)
    const res = await request({ method: 'GET', url: '/v1/pets/42', headers: auth(key) })
    assert.equal(res.statusCode, 404)
    assert.deepEqual(res.json(), { code: 'not_found', message: 'No pet exists with id 42.', status: 404 })
    assertDeprecationHeaders(res.headers)
  })

  test('when the key is missing, then the 401 also carries the deprecation headers', async (t) => {
    const { request } = await testApp(t, env)
    const res = await request({ method: 'GET', url: '/v1/pets/1' })
    assert.equal(res.statusCode, 401)
    assertDeprecationHeaders(res.headers)
  })

  test('when the id is not an int64, then it answers 400 with the deprecation headers', async (t) => {
    const { request, key } = await testApp(t, env)
    const res = await request({ method: 'GET', url: '/v1/pets/9223372036854775808', headers: auth(key) })
    assert.equal(res.statusCode, 400)
    assertDeprecationHeaders(res.headers)
  })

  test('when the sunset has passed, then it answers 410 gone with the deprecation headers', async (t) => {
    const { request, key, clock } = await testApp(t, env, { pets: [pet(1)] })
    clock.now = Date.parse(SUNSET)
    const res = await request({ method: 'GET', url: '/v1/pets/1', headers: auth(key) })
    assert.equal(res.statusCode, 410)
    assert.equal(res.json().code, 'gone')
    assert.equal(res.json().status, 410)
    assertDeprecationHeaders(res.headers)
  })

  test('when the sunset is one second away, then it still answers 200', async (t) => {
    const { request, key, clock } = await testApp(t, env, { pets: [pet(1)] })
    clock.now = Date.parse(SUNSET) - 1000
    const res = await request({ method: 'GET', url: '/v1/pets/1', headers: auth(key) })
    assert.equal(res.statusCode, 200)
  })

  test('when the default dates are used, then the sunset lies in the future and not before the deprecation', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const res = await request({ method: 'GET', url: '/v1/pets/1', headers: auth(key) })
    const sunset = Date.parse(String(res.headers.sunset))
    const deprecation = Number(String(res.headers.deprecation).slice(1)) * 1000
    assert.ok(sunset > Date.now())
    assert.ok(sunset >= deprecation)
    assert.match(String(res.headers.sunset), /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/)
  })

  test('when other operations answer, then they carry no deprecation headers', async (t) => {
    const { request, key } = await testApp(t, env)
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.headers.deprecation, undefined)
    assert.equal(res.headers.sunset, undefined)
  })
})
