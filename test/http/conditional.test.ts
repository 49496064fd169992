import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { SqliteStore } from '../../src/store/sqlite/index.js'
import { auth, newKey, pet, tempDir, testApp } from '../helpers/app.js'
import { importData } from '../../src/domain/import.js'

const get = (key: string, headers: Record<string, string> = {}) => ({ method: 'GET' as const, url: '/v1/inventory', headers: { ...auth(key), ...headers } })
const patch = (key: string, petId: number, quantity: number) => ({
  method: 'PATCH' as const, url: `/v1/inventory/${petId}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: JSON.stringify({ quantity })
})

describe('ETag and conditional GET /v1/inventory', () => {
  test('when the inventory is read twice without a change, then both answers carry the same strong ETag and bytes', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1), pet(2)] })
    const first = await request(get(key))
    const second = await request(get(key))
    assert.match(String(first.headers.etag), /^"inv-\d+"$/)
    assert.equal(second.headers.etag, first.headers.etag)
    assert.equal(second.body, first.body)
    assert.equal(first.body, '[{"petId":1,"quantity":1,"status":"available"},{"petId":2,"quantity":1,"status":"available"}]')
  })

  test('when If-None-Match holds the current ETag, then it answers 304 with no body, the ETag and the rate-limit headers', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const { headers } = await request(get(key))
    for (const condition of [String(headers.etag), `W/${String(headers.etag)}`, `"other", ${String(headers.etag)}`, '*', ` ${String(headers.etag)} `]) {
      const res = await request(get(key, { 'if-none-match': condition }))
      assert.equal(res.statusCode, 304, condition)
      assert.equal(res.body, '')
      assert.equal(res.headers.etag, headers.etag)
      assert.match(String(res.headers['x-ratelimit-remaining']), /^\d+$/)
      assert.match(String(res.headers.ratelimit), /^"minute";r=\d+;t=\d+, "day";r=\d+;t=\d+$/)
    }
  })

  test('when If-None-Match holds another ETag, then it answers 200 with the body', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const res = await request(get(key, { 'if-none-match': '"inv-999999"' }))
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, '[{"petId":1,"quantity":1,"status":"available"}]')
  })

  test('when the stock changes, then the ETag changes and the old one gets the new body', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const before = await request(get(key))
    assert.equal((await request(patch(key, 1, 5))).statusCode, 200)
    const after = await request(get(key, { 'if-none-match': String(before.headers.etag) }))
    assert.equal(after.statusCode, 200)
    assert.notEqual(after.headers.etag, before.headers.etag)
    assert.equal(after.body, '[{"petId":1,"quantity":5,"status":"available"}]')
  })

  test('when a pet status changes, then the ETag changes', async (t) => {
    const { request, key, store } = await testApp(t, {}, { pets: [pet(1)] })
    const before = await request(get(key))
    await importData(store, { pets: [pet(1, { status: 'sold', quantity: undefined })], orders: [] })
    const after = await request(get(key, { 'if-none-match': String(before.headers.etag) }))
    assert.equal(after.statusCode, 200)
    assert.equal(after.json()[0].status, 'sold')
  })

  test('when conditional GETs answer 304, then they do not count against the rate limit', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '2/100', BAN_SECONDS: '0' }, { pets: [pet(1)] })
    const first = await request(get(key))
    assert.equal(first.headers['x-ratelimit-remaining'], '1')
    for (let i = 0; i < 5; i++) {
      const res = await request(get(key, { 'if-none-match': String(first.headers.etag) }))
      assert.equal(res.statusCode, 304)
      assert.equal(res.headers['x-ratelimit-remaining'], '1')
    }
    assert.equal((await request(get(key))).statusCode, 200)
    assert.equal((await request(get(key))).statusCode, 429)
  })

  test('when If-None-Match is *, then the 304 is counted like any request', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '3/100', BAN_SECONDS: '0' }, { pets: [pet(1)] })
    const remaining = []
    for (let i = 0; i < 3; i++) {
      const res = await request(get(key, { 'if-none-match': '*' }))
      assert.equal(res.statusCode, 304)
      remaining.push(res.headers['x-ratelimit-remaining'])
    }
    assert.deepEqual(remaining, ['2', '1', '0'])
  })

  test('when a key has spent its minute, then neither * nor the held tag gets a 304: both are refused with 429', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '1/100', BAN_SECONDS: '0' }, { pets: [pet(1)] })
    const first = await request(get(key))
    for (const condition of ['*', String(first.headers.etag), `"other", ${String(first.headers.etag)}`]) {
      for (let i = 0; i < 50; i++) {
        const res = await request(get(key, { 'if-none-match': condition }))
        assert.equal(res.statusCode, 429, condition)
        assert.equal(res.json().code, 'rate_limited')
      }
    }
  })

  test('when a spent key sends conditional GETs after its 429, then they are strikes and lead to a ban', async (t) => {
    const { request, key } = await testApp(t, { RATE_LIMIT_FREE: '2/100' }, { pets: [pet(1)] })
    const first = await request(get(key))
    await request(get(key))
    const codes = []
    for (let i = 0; i < 4; i++) codes.push((await request(get(key, { 'if-none-match': String(first.headers.etag) }))).json().code)
    assert.deepEqual(codes, ['rate_limited', 'rate_limited', 'key_banned', 'key_banned'])
  })

  test('when a conditional GET has no valid key, then it answers 401, not 304', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const { headers } = await request(get(key))
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: { 'if-none-match': String(headers.etag) } })
    assert.equal(res.statusCode, 401)
  })

  test('when another instance changes the stock, then the next GET here shows it (the cache is never stale)', async (t) => {
    const path = join(tempDir(t), 'shared.db')
    const config = loadConfig({ AUTH_CACHE_TTL_MS: '0' })
    const stores = [new SqliteStore(path), new SqliteStore(path)]
    await stores[0]!.migrate()
    await importData(stores[0]!, { pets: [pet(1)], orders: [] })
    const key = await newKey(stores[0]!)
    const [one, two] = await Promise.all(stores.map((store) => buildApp(config, { store, logger: false })))
    t.after(async () => {
      await Promise.all([one!.close(), two!.close()])
      await Promise.all(stores.map((store) => store.close()))
    })
    assert.equal((await one!.inject(get(key))).json()[0].quantity, 1)
    assert.equal((await two!.inject(patch(key, 1, 42))).statusCode, 200)
    assert.equal((await one!.inject(get(key))).json()[0].quantity, 42)
  })
})
