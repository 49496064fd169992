import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, order, testApp } from '../helpers/app.js'
import { nextPath } from '../helpers/links.js'

const orders = (n: number, status: (i: number) => 'placed' | 'approved' | 'delivered' = () => 'placed') =>
  Array.from({ length: n }, (_, i) => order(i + 1, { status: status(i + 1) }))

describe('GET /v1/store/orders', () => {
  test('when there are few orders, then it answers all of them ordered by id with no next link', async (t) => {
    const { request, key } = await testApp(t, {}, {
      orders: [order(3, { status: 'delivered', complete: true, quantity: 2 }), order(1), order(2, { status: 'approved' })]
    })
    const res = await request({ method: 'GET', url: '/v1/store/orders', headers: auth(key) })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers.link, undefined)
    assert.deepEqual(res.json(), [
      { id: 1, petId: 1, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false },
      { id: 2, petId: 1, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'approved', complete: false },
      { id: 3, petId: 1, quantity: 2, shipDate: '2026-11-20T10:00:00Z', status: 'delivered', complete: true }
    ])
  })

  test('when more orders remain than the limit, then following rel="next" walks every order exactly once', async (t) => {
    const { request, key } = await testApp(t, {}, { orders: orders(25) })
    const seen: number[] = []
    let url: string | null = '/v1/store/orders?limit=10'
    let pages = 0
    while (url !== null) {
      const res = await request({ method: 'GET', url, headers: auth(key) })
      assert.equal(res.statusCode, 200)
      seen.push(...res.json().map((o: { id: number }) => o.id))
      url = nextPath(res.headers.link, url)
      pages++
    }
    assert.equal(pages, 3)
    assert.deepEqual(seen, Array.from({ length: 25 }, (_, i) => i + 1))
  })

  test('when the limit is omitted, then pages hold 100 orders', async (t) => {
    const { request, key } = await testApp(t, {}, { orders: orders(101) })
    const res = await request({ method: 'GET', url: '/v1/store/orders', headers: auth(key) })
    assert.equal(res.json().length, 100)
    assert.match(String(res.headers.link), /^<\?limit=100&cursor=[\w-]+>; rel="next"$/)
    assert.match(String(nextPath(res.headers.link, '/v1/store/orders')), /^\/v1\/store\/orders\?limit=100&cursor=/)
  })

  test('when the page ends exactly at the last order, then there is no next link', async (t) => {
    const { request, key } = await testApp(t, {}, { orders: orders(10) })
    const res = await request({ method: 'GET', url: '/v1/store/orders?limit=10', headers: auth(key) })
    assert.equal(res.json().length, 10)
    assert.equal(res.headers.link, undefined)
  })

  test('when filtering by status, then only those orders come back and the next link keeps the filter', async (t) => {
    const { request, key } = await testApp(t, {}, { orders: orders(12, (i) => i % 2 === 0 ? 'approved' : 'placed') })
    const first = await request({ method: 'GET', url: '/v1/store/orders?status=approved&limit=4', headers: auth(key) })
    assert.deepEqual(first.json().map((o: { id: number }) => o.id), [2, 4, 6, 8])
    const next = nextPath(first.headers.link, '/v1/store/orders?status=approved&limit=4')
    assert.match(String(next), /status=approved/)
    const second = await request({ method: 'GET', url: String(next), headers: auth(key) })
    assert.deepEqual(second.json().map((o: { id: number }) => o.id), [10, 12])
    assert.equal(second.headers.link, undefined)
  })

  test('when order ids are above 2^53, then they are exact in the body and across pages', async (t) => {
    const { request, key } = await testApp(t, {}, {
      orders: [order(9007199254740993n, { petId: 9007199254740995n }), order(9007199254740994n)]
    })
    const first = await request({ method: 'GET', url: '/v1/store/orders?limit=1', headers: auth(key) })
    assert.match(first.body, /"id":9007199254740993,"petId":9007199254740995/)
    const second = await request({ method: 'GET', url: String(nextPath(first.headers.link, '/v1/store/orders?limit=1')), headers: auth(key) })
    assert.match(second.body, /^\[\{"id":9007199254740994,/)
  })

  const badQueries = ['limit=0', 'limit=1001', 'limit=abc', 'limit=1.5', 'limit=-1', 'status=lost', 'cursor=bogus',
    'cursor=' + Buffer.from('o1:abc').toString('base64url'), 'page=2', 'limit=',
    // Digits only: Ajv's coercion would read these as 1000, 16, 1, 10, 5 and 5.
    'limit=1e3', 'limit=0x10', 'limit=1.0', 'limit=010', 'limit=%2B5', 'limit=%205', 'limit=5&limit=6']
  for (const query of badQueries) {
    test(`when the query is "${query}", then it answers 400 invalid_request`, async (t) => {
      const { request, key } = await testApp(t, {}, { orders: orders(3) })
      const res = await request({ method: 'GET', url: `/v1/store/orders?${query}`, headers: auth(key) })
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().code, 'invalid_request')
      assert.equal(res.json().status, 400)
    })
  }

  test('when limit is 1000, then it is accepted', async (t) => {
    const { request, key } = await testApp(t, {}, { orders: orders(3) })
    const res = await request({ method: 'GET', url: '/v1/store/orders?limit=1000', headers: auth(key) })
    assert.equal(res.statusCode, 200)
    assert.equal(res.json().length, 3)
  })
})
