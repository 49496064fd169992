/**
 * Holes an attack on the gate found (2026-11-23), each closed as a class: client subjects bounded whatever a
 * trusted proxy forwards, no store lookups for clients over their limit, bodies that are not UTF-8 (or not
 * well-formed text) refused rather than altered, preflight-like OPTIONS without a text/plain 400, and free 304s
 * only for the one tag a client holds.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { isSafeText } from '../../src/domain/text.js'
import { importData, parseImport } from '../../src/domain/import.js'
import { MemoryLimiter } from '../../src/ratelimit/memory.js'
import { auth, newKey, pet, tempStore, testApp } from '../helpers/app.js'

const patchRaw = (key: string, body: Buffer | string, contentType = 'application/json') => ({
  method: 'PATCH' as const, url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': contentType }, payload: body
})

describe('hardening', () => {
  test('when a trusted proxy forwards text that is not an address, then every such request shares the proxy\'s subject and memory stays bounded', async (t) => {
    const store = await tempStore(t)
    // A fixed clock: forty requests must not straddle a minute boundary and see a fresh window.
    const clock = (): number => Date.parse('2026-11-22T12:00:00Z')
    const limiter = new MemoryLimiter({ clock })
    const app = await buildApp(loadConfig({ TRUST_PROXY: 'true', RATE_LIMIT_ANONYMOUS: '5/100' }), { store, limiter, logger: false, clock })
    t.after(() => app.close())
    const statuses: number[] = []
    for (let i = 0; i < 40; i++) {
      const forwarded = i % 2 === 0 ? `${i}-${'x'.repeat(15_000)}` : ['garbage', '', '1.2.3.4 ', '::g'][i % 4] as string
      statuses.push((await app.inject({ method: 'GET', url: '/v1/inventory', headers: { 'x-forwarded-for': forwarded } })).statusCode)
    }
    assert.deepEqual(statuses.slice(0, 5), [401, 401, 401, 401, 401])
    assert.ok(statuses.slice(5).every((status) => status === 429), 'one shared window: the sixth request is limited')
    assert.equal(limiter.size, 1, 'one subject, not one per forwarded string')
    // A real forwarded address is its own subject, as before.
    assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: { 'x-forwarded-for': '203.0.113.9' } })).statusCode, 401)
    assert.equal(limiter.size, 2)
  })

  test('when a client sends made-up keys, then past the keyless limit they are refused with 429 without a store lookup; valid keys still pass', async (t) => {
    const { app, store, key } = await testApp(t, { RATE_LIMIT_ANONYMOUS: '3/100', AUTH_CACHE_TTL_MS: '60000' }, { pets: [pet(1)] })
    assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 200)
    let lookups = 0
    const find = store.keys.findApiKeyByHash.bind(store.keys)
    store.keys.findApiKeyByHash = async (hash) => { lookups++; return await find(hash) }
    const made = () => auth(`psk_live_${randomBytes(32).toString('base64url')}`)
    const statuses = []
    for (let i = 0; i < 20; i++) statuses.push((await app.inject({ method: 'GET', url: '/v1/inventory', headers: made() })).statusCode)
    assert.deepEqual(statuses.slice(0, 3), [401, 401, 401])
    assert.ok(statuses.slice(3).every((status) => status === 429))
    assert.equal(lookups, 3, 'only the lookups the address had a budget for')
    assert.equal((await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 200, 'a key already known is not held up')
    assert.equal(lookups, 3)
  })

  test('when a body is not UTF-8, names another charset, or holds an unpaired surrogate, then it is refused and nothing changes', async (t) => {
    const { app, store, key } = await testApp(t, {}, { pets: [pet(1, { quantity: 4 })] })
    const cases: Array<[Buffer | string, string, number, string]> = [
      [Buffer.concat([Buffer.from('{"quantity": 11, "note": "caf'), Buffer.from([0xe9, 0x20, 0xff, 0xfe]), Buffer.from('"}')]), 'application/json', 400, 'invalid_request'],
      ['{"quantity":7,"note":"\\ud800"}', 'application/json', 400, 'invalid_request'],
      ['{"quantity":7,"note":"\\udc00x"}', 'application/json; charset=utf-8', 400, 'invalid_request'],
      ['{"quantity":7}', 'application/json; charset=utf-16', 415, 'unsupported_media_type'],
      ['{"quantity":7}', 'application/json; charset="latin1"', 415, 'unsupported_media_type']
    ]
    for (const [body, type, status, code] of cases) {
      const res = await app.inject(patchRaw(key, body, type))
      assert.equal(res.statusCode, status, String(body))
      assert.equal(res.json().code, code)
    }
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 4)
    assert.equal((await store.stock.stockHistory(1n, 10)).length, 1, 'only the import')
    const ok = await app.inject(patchRaw(key, '{"quantity":7,"note":"Caf\\u00e9 \\ud83d\\ude00"}', 'application/json; charset=UTF-8'))
    assert.equal(ok.statusCode, 200, 'a surrogate pair is one character and welcome')
    assert.equal((await store.stock.stockHistory(1n, 10)).at(-1)?.note, 'Café 😀')
  })

  test('when an import holds an unpaired surrogate in a name, then it is refused', async (t) => {
    const store = await tempStore(t)
    assert.equal(isSafeText('B\ud800'), false)
    assert.equal(isSafeText('B😀'), true)
    await assert.rejects(parseImport('{"pets":[{"id":1,"name":"B\\ud800","status":"available"}],"orders":[]}'), /name/)
    assert.deepEqual(await parseImport('{"pets":[{"id":1,"name":"B\\ud83d\\ude00","status":"available"}],"orders":[]}'),
      { pets: [{ id: 1n, name: 'B😀', status: 'available' }], orders: [] })
    assert.equal(await store.catalog.getPet(1n), null)
  })

  test('when CORS is on and an OPTIONS request is not a real preflight, then it is not answered with a text/plain 400', async (t) => {
    const { app } = await testApp(t, { CORS_ORIGINS: 'https://shop.example' })
    for (const headers of [{}, { origin: 'https://shop.example' }]) {
      const res = await app.inject({ method: 'OPTIONS', url: '/v1/inventory', headers })
      assert.ok(res.statusCode < 400 || res.headers['content-type']?.toString().startsWith('application/json'), `${res.statusCode} ${String(res.headers['content-type'])}`)
    }
  })

  test('when If-None-Match lists several tags, then a matching 304 is counted; one tag, the one held, stays free', async (t) => {
    const store = await tempStore(t)
    await importData(store, { pets: [pet(1), pet(2)], orders: [] })
    const key = await newKey(store)
    const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })
    t.after(() => app.close())
    const get = (tags: string) => app.inject({ method: 'GET', url: '/v1/inventory/1', headers: { ...auth(key), 'if-none-match': tags } })
    const first = await get('"none"')
    const remaining = Number(first.headers['x-ratelimit-remaining'])
    const guesses = Array.from({ length: 50 }, (_, i) => `"r${i}"`).join(', ')
    const guessed = await get(guesses)
    assert.equal(guessed.statusCode, 304)
    assert.equal(Number(guessed.headers['x-ratelimit-remaining']), remaining - 1, 'a list of guesses is counted')
    const held = await get(String(first.headers.etag))
    assert.equal(held.statusCode, 304)
    assert.equal(Number(held.headers['x-ratelimit-remaining']), remaining - 1, 'the one tag held is free')
  })
})
