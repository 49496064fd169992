import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { pino } from 'pino'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { loggerOptions } from '../../src/logger.js'
import { auth, newKey, pet, tempStore } from '../helpers/app.js'
import { importData } from '../../src/domain/import.js'
import { createKey, revokeKey } from '../../src/access/keys.js'
import type { ApiKeyRecord } from '../../src/model.js'

/** An app whose JSON log lines are collected in memory, at debug level. */
async function appWithLog (t: Parameters<typeof tempStore>[0], env: Record<string, string> = {}) {
  const lines: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(...chunk.toString().split('\n').filter(Boolean)); done() } })
  const store = await tempStore(t)
  await importData(store, { pets: [pet(1)], orders: [] })
  // The service's own log options (its last-line key filter included), at debug level.
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0', ...env }), { store, logger: pino(loggerOptions('debug'), stream) })
  t.after(() => app.close())
  return { app, store, lines }
}

describe('logs', () => {
  test('when a key is sent in a query string, a path, a request id or a malformed URL, then no log line holds it', async (t) => {
    const { app, store, lines } = await appWithLog(t)
    const key = await newKey(store)
    const secret = key.slice('psk_live_'.length)
    const encoded = key.replace(/_/g, '%5F')
    const requests = [
      { method: 'GET' as const, url: `/v1/inventory?access_token=${key}`, headers: auth(key) },
      { method: 'GET' as const, url: `/v1/inventory?access_token=${key}` },
      { method: 'GET' as const, url: `/v1/store/orders?limit=1&${key}` , headers: auth(key) },
      { method: 'GET' as const, url: `/v1/${key}`, headers: auth(key) },
      { method: 'GET' as const, url: `/v1/${encoded}`, headers: auth(key) },
      { method: 'GET' as const, url: `/${key}?x=${encoded}` },
      { method: 'GET' as const, url: `/v1/%zz?access_token=${key}` },
      { method: 'GET' as const, url: '/v1/inventory', headers: { ...auth(key), 'x-request-id': key } },
      // Percent-encoded, beside an escape that is not valid (decodeURIComponent gives up on the whole text).
      { method: 'GET' as const, url: `/v1/inventory?psk%5Flive_${secret}%ZZ=1` },
      { method: 'GET' as const, url: `/v1/inventory?a=1&psk%5flive%5F${secret}%E0` },
      { method: 'GET' as const, url: `/v1/inventory#psk%5Flive_${secret}%ZZ` },
      { method: 'GET' as const, url: `/v1/psk%255Flive_${secret}%ZZ` },
      { method: 'GET' as const, url: `/v1/${'%70%73%6B'}_live_${secret}%E0` }
    ]
    for (const request of requests) await app.inject(request)
    // A server error, logged with its stack, for a request that carries the key in its query.
    store.catalog.getPet = async () => { throw new Error(`boom near ${key}`) }
    assert.equal((await app.inject({ method: 'GET', url: `/v1/pets/1?k=${key}`, headers: auth(key) })).statusCode, 500)
    assert.ok(lines.length >= requests.length)
    for (const line of lines) assert.ok(!line.includes(secret), `a log line holds the key: ${line}`)
    const urls = lines.map((line) => JSON.parse(line) as { url?: string }).map((e) => e.url).filter((u) => u !== undefined)
    assert.ok(urls.includes('/v1/inventory?access_token=[redacted]'), urls.join(' '))
    assert.ok(urls.includes('/v1/psk_live_[redacted]'), urls.join(' '))
  })


  test('when a webhook secret, a signature or credentials reach a log line, then the line shows their marker, not them', async (t) => {
    const { app, store, lines } = await appWithLog(t)
    const key = await newKey(store)
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
    const signature = 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='
    const token = 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'
    await app.inject({ method: 'GET', url: `/v1/webhooks/${secret}`, headers: auth(key) })
    // A server error whose message (and stack) quote them, logged at error.
    store.catalog.getPet = async () => { throw new Error(`boom: ${secret} ${signature} Authorization: Bearer ${token}`) }
    assert.equal((await app.inject({ method: 'GET', url: '/v1/pets/1', headers: auth(key) })).statusCode, 500)
    for (const needle of [secret.slice(6), signature.slice(3), token]) {
      assert.deepEqual(lines.filter((line) => line.includes(needle)), [], `${needle} in the logs`)
    }
    const error = lines.map((line) => JSON.parse(line) as { msg: string, err?: { message: string } }).find((entry) => entry.err !== undefined)
    assert.equal(error?.err?.message, 'boom: whsec_[redacted] v1,[redacted] Authorization: Bearer [redacted]')
    assert.ok(lines.some((line) => line.includes('"url":"/v1/webhooks/whsec_[redacted]"')), 'the access line shows what was there')
  })

  test('when requests with valid, unknown and malformed keys are served, then no key appears in the logs', async (t) => {
    const { app, store, lines } = await appWithLog(t)
    const key = await newKey(store)
    const secretPart = key.slice('psk_live_'.length)
    await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    await app.inject({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload: '{"quantity":"x"}' })
    await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth('psk_live_UnknownSecretValue') })
    await app.inject({ method: 'GET', url: '/v1/inventory', headers: { authorization: `Basic ${key}` } })
    await app.inject({ method: 'GET', url: `/v1/nope?token=x`, headers: auth(key) })
    const log = lines.join('\n')
    const access = lines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((e) => e.msg === 'request completed')
    assert.equal(access.length, 5, 'one access line per request')
    const [record] = await store.keys.listApiKeys()
    assert.deepEqual(access.map((e) => [e.operation ?? null, e.status, e.keyId ?? null]), [
      ['listInventory', 200, record?.id],
      ['updateInventory', 400, record?.id],
      ['listInventory', 401, null],
      ['listInventory', 401, null],
      [null, 404, record?.id]
    ])
    assert.ok(access.every((e) => typeof e.ms === 'number' && typeof e.requestId === 'string'))
    assert.ok(!log.includes(secretPart), 'the key never appears')
    assert.ok(!log.includes('UnknownSecretValue'), 'an unknown token never appears')
    assert.match(log, /"requestId":"[0-9a-f-]{36}"/)
  })

  test('when a request names a known key, then every line it writes carries the key id, refusals included, and never the key', async (t) => {
    const { app, store, lines } = await appWithLog(t, { RATE_LIMIT_FREE: '3/100', BAN_STRIKES: '1' })
    const issue = async (input: Partial<Parameters<typeof createKey>[2]> = {}, now = new Date()) =>
      await createKey(store, 'production', { plan: 'free', name: 'test', perMinute: null, perDay: null, ...input }, now)
    const ok = await issue()
    const reader = await issue({ scope: 'read' })
    const expired = await issue({ expiresAt: new Date(Date.now() - 1000) }, new Date(Date.now() - 60_000))
    const revoked = await issue()
    await revokeKey(store, revoked.record.id)
    const limited = await issue()
    const send = (id: string, key: string, init: { method?: 'GET' | 'PATCH', url?: string, payload?: string } = {}) =>
      app.inject({ method: init.method ?? 'GET', url: init.url ?? '/v1/inventory', headers: { ...auth(key), 'content-type': 'application/json', 'x-request-id': id }, payload: init.payload })
    const cases: Array<[string, string, number, ApiKeyRecord]> = []
    const expect = async (id: string, key: { key: string, record: ApiKeyRecord }, status: number, init?: Parameters<typeof send>[2]) => {
      assert.equal((await send(id, key.key, init)).statusCode, status, id)
      cases.push([id, key.key, status, key.record])
    }
    await expect('ok-200', ok, 200)
    await expect('scope-403', reader, 403, { method: 'PATCH', url: '/v1/inventory/1', payload: '{"quantity":2}' })
    await expect('expired-401', expired, 401)
    await expect('revoked-401', revoked, 401)
    for (let i = 0; i < 3; i++) await send(`spend-${i}`, limited.key)
    await expect('limited-429', limited, 429)
    // A strike (before the Retry-After) reaches the threshold: the ban is logged as the request's own line.
    await expect('banned-429', limited, 429)
    store.catalog.getPet = async () => { throw new Error('disk on fire') }
    await expect('failed-500', ok, 500, { url: '/v1/pets/1' })
    assert.equal((await send('unknown-401', 'psk_live_UnknownSecretValue')).statusCode, 401)

    const entries = lines.map((line) => JSON.parse(line) as { requestId?: string, keyId?: string, msg: string, status?: number })
    for (const [id, key, status, record] of cases) {
      const own = entries.filter((e) => e.requestId === id)
      assert.ok(own.some((e) => e.msg === 'request completed' && e.status === status), `${id}: an access line`)
      for (const entry of own) assert.equal(entry.keyId, record.id, `${id}: ${JSON.stringify(entry)}`)
      assert.ok(!lines.join('\n').includes(key.slice('psk_live_'.length)), `${id}: the key is never written`)
    }
    assert.ok(entries.some((e) => e.requestId === 'banned-429' && /banned/.test(e.msg)), 'the ban has its own line')
    assert.ok(entries.some((e) => e.requestId === 'failed-500' && e.msg !== 'request completed'), 'the 500 has its error line')
    assert.deepEqual(entries.filter((e) => e.requestId === 'unknown-401').map((e) => e.keyId), [undefined], 'a key nobody issued has no id')
  })

  test('when a 500 happens, then it is logged with the request id', async (t) => {
    const { app, store, lines } = await appWithLog(t)
    const key = await newKey(store)
    store.stock.inventoryPages = async function * () { yield * []; throw new Error('disk on fire') }
    const res = await app.inject({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), 'x-request-id': 'trace-500' } })
    assert.equal(res.statusCode, 500)
    const entry = lines.map((line) => JSON.parse(line) as { level: number, requestId?: string, err?: { message: string } })
      .find((e) => e.level >= 50 && e.err?.message === 'disk on fire')
    assert.equal(entry?.requestId, 'trace-500')
  })

  test('when a key is banned, then the ban is logged with the key id, never the key', async (t) => {
    const { app, store, lines } = await appWithLog(t, { RATE_LIMIT_FREE: '1/100' })
    const key = await newKey(store)
    // Admitted, refused, then refused again before the Retry-After passed: a strike, and the threshold (1).
    for (let i = 0; i < 3; i++) await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    const [record] = await store.keys.listApiKeys()
    const ban = lines.map((line) => JSON.parse(line) as { msg: string, keyId?: string, banSeconds?: number }).find((e) => /banned/.test(e.msg))
    assert.equal(ban?.keyId, record?.id)
    assert.equal(ban?.banSeconds, 900)
    assert.ok(!lines.join('\n').includes(key.slice(9)))
  })
  test('when requests write no log line (level warn), then no per-request child logger is made; a 500 still logs its request id', async (t) => {
    const lines: string[] = []
    const stream = new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(...chunk.toString().split('\n').filter(Boolean)); done() } })
    const logger = pino(loggerOptions('warn'), stream)
    let children = 0
    const child = logger.child.bind(logger)
    logger.child = ((...args: Parameters<typeof child>) => { children++; return child(...args) }) as typeof logger.child
    const store = await tempStore(t)
    await importData(store, { pets: [pet(1)], orders: [] })
    const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger })
    t.after(() => app.close())
    const key = await newKey(store)
    await app.ready()
    const before = children
    for (let i = 0; i < 20; i++) assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 200)
    assert.equal(children, before)
    store.keys.findApiKeyByHash = async () => { throw new Error('disk on fire') }
    await sleep(10) // past the key cache's lifetime (AUTH_CACHE_TTL_MS=0 keeps a lookup 1 ms)
    const res = await app.inject({ method: 'GET', url: '/v1/inventory', headers: { ...auth(key), 'x-request-id': 'trace-lazy' } })
    assert.equal(res.statusCode, 500)
    assert.equal(children, before + 1)
    assert.equal(lines.map((line) => JSON.parse(line) as { requestId?: string }).find((e) => e.requestId === 'trace-lazy')?.requestId, 'trace-lazy')
  })
  test('when a URL is malformed, then the request is charged and leaves an access line with its request id', async (t) => {
    const { app, store, lines } = await appWithLog(t)
    const key = await newKey(store)
    const res = await app.inject({ method: 'GET', url: '/v1/inventory%C0%AF', headers: { ...auth(key), 'x-request-id': 'probe-malformed-1' } })
    assert.equal(res.statusCode, 400)
    const line = lines.map((text) => JSON.parse(text) as { requestId?: string, status?: number, msg: string }).find((e) => e.requestId === 'probe-malformed-1')
    assert.equal(line?.msg, 'request completed')
    assert.equal(line?.status, 400)
  })
})
