/**
 * Hostile and malformed input, generated (fast-check): no input gives a 5xx, every 4xx is the Error shape,
 * and a rejected request never changes stock.
 */
import fc from 'fast-check'
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ERROR_CATALOGUE } from '../../src/errors.js'
import { auth, pet, testApp } from '../helpers/app.js'

const RUNS = 300

function assertErrorShape (res: { statusCode: number, body: string, headers: Record<string, unknown> }, method = 'GET'): void {
  assert.ok(res.statusCode < 500, `status ${res.statusCode}: ${res.body}`)
  // Answers to HEAD have no body to check.
  if (res.statusCode < 400 || method === 'HEAD') return
  const body = JSON.parse(res.body) as { code: string, message: string, status: number }
  assert.deepEqual(Object.keys(body).sort(), ['code', 'message', 'status'])
  assert.equal(body.status, res.statusCode)
  assert.equal(ERROR_CATALOGUE[body.code as keyof typeof ERROR_CATALOGUE]?.status, res.statusCode)
  assert.equal(typeof body.message, 'string')
}

// Anything JSON can hold, plus shapes close to the real body.
const jsonValue = fc.oneof(
  fc.jsonValue(),
  fc.record({ quantity: fc.oneof(fc.integer(), fc.double(), fc.string(), fc.constant(null), fc.bigInt().map(String)) }),
  fc.dictionary(fc.oneof(fc.string(), fc.constantFrom('__proto__', 'constructor', 'prototype', 'quantity')), fc.jsonValue())
)

describe('generated hostile input', () => {
  test('when PATCH bodies are arbitrary, then there is no 5xx, every error is the Error shape, and only valid bodies change stock', async (t) => {
    const { request, key, store } = await testApp(t, { RATE_LIMIT_FREE: '100000/1000000' }, { pets: [pet(1, { quantity: 5 })] })
    await fc.assert(fc.asyncProperty(fc.oneof(jsonValue.map((v) => JSON.stringify(v)), fc.string()), async (payload) => {
      const [before] = await store.stock.listInventory()
      const res = await request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload })
      assertErrorShape(res)
      const [after] = await store.stock.listInventory()
      if (res.statusCode !== 200) assert.deepEqual(after, before, `a rejected body changed stock: ${payload}`)
      else assert.equal(after?.quantity, (JSON.parse(payload) as { quantity: number }).quantity)
    }), { numRuns: RUNS })
  })

  test('when path ids, query strings and headers are arbitrary, then there is no 5xx and every error is the Error shape', async (t) => {
    const { request, key, store } = await testApp(t, { RATE_LIMIT_FREE: '100000/1000000', RATE_LIMIT_ANONYMOUS: '100000/1000000' }, { pets: [pet(1, { quantity: 5 })] })
    const headerValue = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 300 })
    await fc.assert(fc.asyncProperty(
      fc.string({ maxLength: 40 }), fc.string({ maxLength: 80 }), headerValue, headerValue, fc.constantFrom('GET', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'POST'),
      async (id, query, authorization, requestId, method) => {
        const responses = await Promise.all([
          request({ method: 'GET', url: `/v1/pets/${encodeURIComponent(id)}`, headers: auth(key) }),
          request({ method: 'GET', url: `/v1/store/orders?${query}`, headers: auth(key) }),
          request({ method: 'GET', url: '/v1/inventory', headers: { authorization, 'x-request-id': requestId } }),
          request({ method: method as 'GET', url: `/v1/inventory/${encodeURIComponent(id)}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: method === 'GET' || method === 'HEAD' ? undefined : '{"quantity":1}' })
        ])
        responses.forEach((res, i) => assertErrorShape(res, i === 3 ? method : 'GET'))
      }), { numRuns: RUNS })
    // Only a well-formed PATCH of pet 1 may have changed it, and only to 1.
    assert.ok([1, 5].includes((await store.stock.listInventory())[0]?.quantity ?? -1))
  })
})
