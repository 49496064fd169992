import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { createKey } from '../../src/access/keys.js'
import { auth, newKey, pet, testApp } from '../helpers/app.js'

const inventory = (headers: Record<string, string> = {}) => ({ method: 'GET' as const, url: '/v1/inventory', headers })

describe('authentication', () => {
  test('when no Authorization header is sent, then it answers 401 with a Bearer challenge without an error', async (t) => {
    const { request } = await testApp(t)
    const res = await request(inventory())
    assert.equal(res.statusCode, 401)
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore"')
    assert.deepEqual(res.json(), { code: 'unauthorized', message: 'An API key is required: send Authorization: Bearer <key>.', status: 401 })
  })

  test('when another scheme is sent, then it answers 401 with the plain challenge', async (t) => {
    const { request } = await testApp(t)
    const res = await request(inventory({ authorization: 'Basic dXNlcjpwYXNz' }))
    assert.equal(res.statusCode, 401)
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="petstore"')
  })

  for (const header of ['Bearer', 'Bearer ', 'Bearer a b', 'Bearer ä']) {
    test(`when the header is the malformed "${header}", then it answers 401 invalid_token`, async (t) => {
      const { request } = await testApp(t)
      const res = await request(inventory({ authorization: header }))
      assert.equal(res.statusCode, 401)
      assert.equal(res.json().code, 'unauthorized')
      assert.match(String(res.headers['www-authenticate']), /^Bearer realm="petstore"/)
    })
  }

  test('when an unknown key is sent, then it answers 401 with error="invalid_token" and does not echo the key', async (t) => {
    const { request } = await testApp(t)
    const res = await request(inventory(auth('psk_live_notARealKey123')))
    assert.equal(res.statusCode, 401)
    assert.match(String(res.headers['www-authenticate']), /^Bearer realm="petstore", error="invalid_token"/)
    assert.doesNotMatch(res.body + JSON.stringify(res.headers), /notARealKey123/)
  })

  test('when a production server that shares the store is sent a staging key, then it answers 401 invalid_token', async (t) => {
    const { request, store } = await testApp(t)
    const { key: staging } = await createKey(store, 'staging', { plan: 'free', name: 'staging client', perMinute: null, perDay: null })
    assert.match(staging, /^psk_test_/)
    const res = await request(inventory(auth(staging)))
    assert.equal(res.statusCode, 401)
    assert.equal(res.json().message, 'The API key belongs to another environment: this server accepts psk_live_ keys only.')
    assert.match(String(res.headers['www-authenticate']), /^Bearer realm="petstore", error="invalid_token"/)
  })

  test('when a staging server is sent a production key, then it answers 401, and its own keys pass', async (t) => {
    const { request, store, key: production } = await testApp(t, { PETSTORE_ENV: 'staging' })
    const { key: staging } = await createKey(store, 'staging', { plan: 'free', name: null, perMinute: null, perDay: null })
    const refused = await request(inventory(auth(production)))
    assert.equal(refused.statusCode, 401)
    assert.match(refused.json().message, /accepts psk_test_ keys only/)
    assert.equal((await request(inventory(auth(staging)))).statusCode, 200)
  })

  test('when the scheme name is written in any case, then the key is accepted', async (t) => {
    const { request, key } = await testApp(t)
    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
      const res = await request(inventory({ authorization: `${scheme} ${key}` }))
      assert.equal(res.statusCode, 200, scheme)
    }
  })

  test('when the key is revoked, then the response is 401', async (t) => {
    const { request, store, key } = await testApp(t)
    assert.equal((await request(inventory(auth(key)))).statusCode, 200)
    const [record] = await store.keys.listApiKeys()
    assert.ok(record)
    await store.keys.revokeApiKey(record.id, new Date())
    const res = await request(inventory(auth(key)))
    assert.equal(res.statusCode, 401)
    assert.match(String(res.headers['www-authenticate']), /error="invalid_token"/)
  })

  test('when the auth cache holds a key, then a revocation takes effect once the cache TTL has passed', async (t) => {
    const { request, store, key } = await testApp(t, { AUTH_CACHE_TTL_MS: '200' })
    assert.equal((await request(inventory(auth(key)))).statusCode, 200)
    const [record] = await store.keys.listApiKeys()
    await store.keys.revokeApiKey(record!.id, new Date())
    // Within the TTL the cached answer may still be used; after it, never.
    await new Promise((resolve) => setTimeout(resolve, 250))
    assert.equal((await request(inventory(auth(key)))).statusCode, 401)
  })

  test('when a key is warm in the cache, then requests do not query the store for it', async (t) => {
    const { request, store, key } = await testApp(t, { AUTH_CACHE_TTL_MS: '60000' })
    let lookups = 0
    const original = store.keys.findApiKeyByHash.bind(store.keys)
    store.keys.findApiKeyByHash = async (hash) => { lookups++; return original(hash) }
    for (let i = 0; i < 5; i++) assert.equal((await request(inventory(auth(key)))).statusCode, 200)
    assert.equal(lookups, 1)
  })

  test('when each plan creates a key, then every plan authenticates', async (t) => {
    const { request, store } = await testApp(t)
    for (const plan of ['free', 'pro', 'business', 'enterprise'] as const) {
      const key = await newKey(store, plan)
      assert.equal((await request(inventory(auth(key)))).statusCode, 200, plan)
    }
  })

  for (const url of ['/v1/inventory', '/v1/pets/1', '/v1/store/orders']) {
    test(`when ${url} is called without a key, then it answers 401`, async (t) => {
      const { request } = await testApp(t, {}, { pets: [pet(1)] })
      assert.equal((await request({ method: 'GET', url })).statusCode, 401)
    })
  }

  test('when PATCH is called without a key, then it answers 401 and changes nothing', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const res = await request({ method: 'PATCH', url: '/v1/inventory/1', headers: { 'content-type': 'application/json' }, payload: '{"quantity":0}' })
    assert.equal(res.statusCode, 401)
    const list = await request(inventory(auth(key)))
    assert.equal(list.json()[0].quantity, 5)
  })
})
