/**
 * The gate decides on the route a request reaches, not on its URL text: however the request target is spelled
 * (percent-encoding, absolute-form, userinfo, ports, dot segments, double slashes, case, `;` parameters), a request
 * without a key never reaches a /v1 handler, and a request with a key is counted exactly once. Sent over real
 * sockets, so the target reaches the server byte for byte.
 */
import fc from 'fast-check'
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { MemoryLimiter } from '../../src/ratelimit/memory.js'
import type { ConsumeOptions, Decision, Subject, WindowLimits } from '../../src/ratelimit/types.js'
import { wrapStore } from '../../src/store/observe.js'
import { newKey, pet, tempStore } from '../helpers/app.js'
import { parseResponse, raw } from '../helpers/raw-http.js'
import { importData } from '../../src/domain/import.js'

/** Counts what the limiter charges to keys (consume decides through consumeNow, so both are counted here). */
class CountingLimiter extends MemoryLimiter {
  keyCharges = 0

  override consumeNow (subject: Subject, limits: WindowLimits, options?: ConsumeOptions): Decision {
    if (subject.kind === 'key') this.keyCharges++
    return super.consumeNow(subject, limits, options)
  }
}

// What the /v1 handlers read or write: a call means a handler ran.
const HANDLER_CALLS = ['listInventory', 'inventoryVersion', 'setQuantity', 'getStockEntry', 'getPet', 'listOrders']

async function listening (t: TestContext) {
  const store = await tempStore(t)
  await importData(store, { pets: [pet(1, { quantity: 5 })], orders: [] })
  const key = await newKey(store, 'enterprise')
  const handlerCalls: string[] = []
  // The store as the app sees it, recording the calls handlers make.
  const watched = wrapStore(store, (operation, call) => (...args) => {
    if (HANDLER_CALLS.includes(operation)) handlerCalls.push(operation)
    return call(args)
  })
  const limiter = new CountingLimiter()
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '60000', RATE_LIMIT_ANONYMOUS: '1000000/100000000' }), { store: watched, limiter, logger: false })
  t.after(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  const send = async (method: string, target: string, headers: Record<string, string> = {}, body?: string) => {
    const lines = [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close',
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)]
    if (body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`)
    return parseResponse((await raw(port, `${lines.join('\r\n')}\r\n\r\n${body ?? ''}`)).text)
  }
  return { store, key, limiter, handlerCalls, send }
}

describe('the gate decides on the matched route', () => {
  const spellings: Array<[string, string]> = [
    ['GET', '/%761/inventory'],
    ['GET', '/%76%31/inventory'],
    ['GET', '/v%31/%69nventory'],
    ['GET', 'http://x/v1/inventory'],
    ['GET', 'https://user:secret@x:8443/v1/inventory'],
    ['GET', '/v1/inventory/%31'],
    ['GET', '/v1/store/%6frders?limit=1'],
    ['GET', '/v1/pets/1'],
    ['HEAD', '/%761/inventory'],
    ['PATCH', 'http://x/v1/inventory/1'],
    ['PATCH', '/v1/%69nventory/1']
  ]

  test('when a /v1 operation is reached through any spelling of its target without a key, then it answers 401 and no handler runs', async (t) => {
    const { send, handlerCalls, store } = await listening(t)
    for (const [method, target] of spellings) {
      const res = await send(method, target, {}, method === 'PATCH' ? '{"quantity":0}' : undefined)
      assert.equal(res.status, 401, `${method} ${target}`)
      assert.match(res.headers['x-ratelimit-remaining'] ?? '', /^\d+$/, `${method} ${target}`)
    }
    assert.deepEqual(handlerCalls, [])
    assert.equal((await store.stock.listInventory())[0]?.quantity, 5, 'no stock was changed')
  })

  test('when the same spellings carry a key, then each reaches its operation and is counted once', async (t) => {
    const { send, key, limiter } = await listening(t)
    for (const [method, target] of spellings) {
      const before = limiter.keyCharges
      const res = await send(method, target, { Authorization: `Bearer ${key}` }, method === 'PATCH' ? '{"quantity":4}' : undefined)
      assert.equal(res.status, 200, `${method} ${target}: ${res.body}`)
      assert.equal(limiter.keyCharges - before, 1, `${method} ${target}`)
    }
  })

  // The operations, and the ways a target can be respelled without (necessarily) changing what the router matches.
  const operations: Array<[string, string]> = [
    ['GET', '/v1/inventory'], ['GET', '/v1/inventory/1'], ['PATCH', '/v1/inventory/1'], ['GET', '/v1/store/orders'],
    ['GET', '/v1/pets/1'], ['HEAD', '/v1/inventory'], ['DELETE', '/v1/inventory'], ['TRACE', '/v1/inventory/1']
  ]
  const percentEncode = (c: string, upper: boolean) => {
    const hex = c.charCodeAt(0).toString(16).padStart(2, '0')
    return `%${upper ? hex.toUpperCase() : hex}`
  }
  const edit = fc.oneof(
    // Percent-encode a letter or digit, in either hex case.
    fc.tuple(fc.nat(), fc.boolean()).map(([i, upper]) => (path: string) => {
      const places = [...path].map((c, at) => [c, at] as const).filter(([c]) => /[A-Za-z0-9]/.test(c))
      const [c, at] = places[i % places.length] as readonly [string, number]
      return path.slice(0, at) + percentEncode(c, upper) + path.slice(at + 1)
    }),
    // Change the case of a letter.
    fc.nat().map((i) => (path: string) => {
      const places = [...path].map((c, at) => [c, at] as const).filter(([c]) => /[a-z]/.test(c))
      const [c, at] = places[i % places.length] as readonly [string, number]
      return path.slice(0, at) + c.toUpperCase() + path.slice(at + 1)
    }),
    // A dot segment, a double slash or a ;parameter after one of the segments.
    // (A ;parameter goes at the end of a segment, never before the leading slash.)
    fc.tuple(fc.nat(), fc.constantFrom('/.', '/x/..', '/', ';p=1', ';')).map(([i, insert]) => (path: string) => {
      const slashes = [...path].map((c, at) => [c, at] as const).filter(([c, at]) => c === '/' && (at > 0 || !insert.startsWith(';')))
      const at = (slashes[i % slashes.length] as readonly [string, number])[1]
      return path.slice(0, at) + insert + path.slice(at)
    })
  )
  const authority = fc.oneof(
    fc.constant(''),
    fc.tuple(fc.constantFrom('http', 'https', 'HTTP'), fc.constantFrom('', 'user@', 'user:pw@'), fc.constantFrom('x', 'localhost', '127.0.0.1'),
      fc.constantFrom('', ':80', ':8443')).map(([scheme, userinfo, host, port]) => `${scheme}://${userinfo}${host}${port}`)
  )
  const target = fc.tuple(fc.constantFrom(...operations), fc.array(edit, { maxLength: 4 }), authority, fc.constantFrom('', '?a=1', '?limit=2'))
    .map(([[method, path], edits, prefix, query]) => ({ method, target: prefix + edits.reduce((p, e) => e(p), path) + query }))

  test('when generated request targets are sent without a key, then none is answered by a /v1 handler', async (t) => {
    const { send, handlerCalls, store } = await listening(t)
    await fc.assert(fc.asyncProperty(target, async ({ method, target }) => {
      const res = await send(method, target, {}, method === 'PATCH' ? '{"quantity":0}' : undefined)
      assert.ok(res.status >= 400 && res.status < 500 && res.status !== 0, `${method} ${target}: ${res.status}`)
      assert.deepEqual(handlerCalls, [], `${method} ${target} reached a handler`)
    }), { numRuns: 250 })
    assert.equal((await store.stock.listInventory())[0]?.quantity, 5)
  })

  test('when generated request targets are sent with a key, then each is counted exactly once', async (t) => {
    const { send, key, limiter } = await listening(t)
    await fc.assert(fc.asyncProperty(target, async ({ method, target }) => {
      const before = limiter.keyCharges
      const res = await send(method, target, { Authorization: `Bearer ${key}` }, method === 'PATCH' ? '{"quantity":3}' : undefined)
      assert.ok(res.status !== 0 && res.status < 500, `${method} ${target}: ${res.status}`)
      assert.equal(limiter.keyCharges - before, 1, `${method} ${target} answered ${res.status}`)
      assert.match(res.headers['x-ratelimit-remaining'] ?? '', /^\d+$/, `${method} ${target} answered ${res.status} without rate-limit fields`)
    }), { numRuns: 250 })
  })
})

describe('the gate fails closed', () => {
  test('when admission fails with something that is not an Error, then the request is answered 500 and no handler runs', async (t) => {
    const store = await tempStore(t)
    await importData(store, { pets: [pet(1, { quantity: 5 })], orders: [] })
    const key = await newKey(store, 'enterprise')
    const memory = new MemoryLimiter()
    let listed = 0
    const watched = wrapStore(store, (operation, call) => (...args) => {
      if (operation === 'listInventory' || operation === 'inventoryPages') listed++
      return call(args)
    })
    // A limiter without consumeNow whose decisions reject with nothing at all.
    const limiter = {
      kind: 'broken',
      consume: async () => await Promise.reject(undefined),
      peek: async (subject: Subject, limits: WindowLimits) => await memory.peek(subject, limits),
      reset: async () => {},
      close: async () => {}
    }
    const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '60000' }), { store: watched, limiter, logger: false })
    t.after(() => app.close())
    const res = await app.inject({ method: 'GET', url: '/v1/inventory', headers: { authorization: `Bearer ${key}` } })
    assert.equal(res.statusCode, 500)
    assert.deepEqual(Object.keys(res.json()).sort(), ['code', 'message', 'status'])
    assert.equal(res.json().code, 'internal_error')
    assert.equal(listed, 0, 'the listing was never read')
  })
})
