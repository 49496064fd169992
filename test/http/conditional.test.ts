import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { auth, newKey, pet, tempDir, testApp } from '../helpers/app.js'
import { importData } from '../../src/domain/import.js'

const get = (key: string, headers: Record<string, string> = {}) => ({ method: 'GET' as const, url: '/v1/inventory', headers: { ...auth(key), ...headers } })
const patch = (key: string, petId: number, quantity: number) => ({
  method: 'PATCH' as const, url: `/v1/inventory/${petId}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: JSON.stringify({ quantity })
})

/** Two apps and a CLI-like third connection on one SQLite file, without Redis: what one commits the others read. */
async function sharedFile (t: TestContext) {
  const path = join(tempDir(t), 'shared.db')
  const config = loadConfig({ AUTH_CACHE_TTL_MS: '0' })
  const stores = [new SqliteStore(path), new SqliteStore(path), new SqliteStore(path)] as const
  await stores[0].schema.migrate()
  await importData(stores[0], { pets: [pet(1)], orders: [] })
  const key = await newKey(stores[0])
  const [one, two] = await Promise.all([stores[0], stores[1]].map((store) => buildApp(config, { store, logger: false })))
  t.after(async () => {
    await Promise.all([one?.close(), two?.close()])
    await Promise.all(stores.map((store) => store.close()))
  })
  return { one: one as FastifyInstance, two: two as FastifyInstance, cli: stores[2], key }
}

/** Asks until the answer is not null (every 20 ms, at most 5 s). */
async function eventually<T> (ask: () => Promise<T | null>): Promise<T> {
  const deadline = Date.now() + 5000
  for (;;) {
    const answer = await ask()
    if (answer !== null) return answer
    if (Date.now() > deadline) throw new Error('not seen within 5 s')
    await sleep(20)
  }
}

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

  test('when another process (the CLI) changes a pet\'s status, then within the change check the ETag and body change', async (t) => {
    const { one: app, cli, key } = await sharedFile(t)
    const before = await app.inject(get(key))
    await importData(cli, { pets: [pet(1, { status: 'sold', quantity: undefined })], orders: [] })
    const after = await eventually(async () => {
      const res = await app.inject(get(key, { 'if-none-match': String(before.headers.etag) }))
      return res.statusCode === 200 ? res : null
    })
    assert.notEqual(after.headers.etag, before.headers.etag)
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

  test('when another instance on the same SQLite file changes the stock, then GETs here show it within the change check (200 ms)', async (t) => {
    const { one, two, key } = await sharedFile(t)
    assert.equal((await one.inject(get(key))).json()[0].quantity, 1)
    assert.equal((await two.inject(patch(key, 1, 42))).statusCode, 200)
    const started = Date.now()
    await eventually(async () => (await one.inject(get(key))).json()[0].quantity === 42 ? true : null)
    // A check every LISTING_POLL_MS (200 ms); the bound allows a loaded machine (a stale listing would never change here).
    assert.ok(Date.now() - started < 3000, `seen after ${Date.now() - started} ms`)
  })
})
