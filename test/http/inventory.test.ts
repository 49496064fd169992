import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, pet, testApp } from '../helpers/app.js'

const BIG = 9007199254740993n // 2^53 + 1: a double cannot hold it

describe('GET /v1/inventory', () => {
  test('when called with a key, then it lists every stock entry ordered by petId with the pet status', async (t) => {
    const { request, key } = await testApp(t, {}, {
      pets: [pet(3, { status: 'sold', quantity: 0 }), pet(1, { quantity: 5 }), pet(2, { status: 'pending', quantity: 7 })]
    })
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.statusCode, 200)
    assert.match(String(res.headers['content-type']), /^application\/json/)
    assert.deepEqual(res.json(), [
      { petId: 1, quantity: 5, status: 'available' },
      { petId: 2, quantity: 7, status: 'pending' },
      { petId: 3, quantity: 0, status: 'sold' }
    ])
  })

  test('when the store is empty, then it answers an empty array', async (t) => {
    const { request, key } = await testApp(t)
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, '[]')
  })

  test('when a pet has no stock entry, then it is not listed', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1), pet(2, { quantity: undefined })] })
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.deepEqual(res.json(), [{ petId: 1, quantity: 1, status: 'available' }])
  })

  test('when ids are above 2^53 or at the int64 edges, then they are written exactly as bare JSON numbers', async (t) => {
    const { request, key } = await testApp(t, {}, {
      pets: [pet(BIG), pet(-(2n ** 63n)), pet(2n ** 63n - 1n)]
    })
    const res = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(res.body,
      '[{"petId":-9223372036854775808,"quantity":1,"status":"available"},' +
      '{"petId":9007199254740993,"quantity":1,"status":"available"},' +
      '{"petId":9223372036854775807,"quantity":1,"status":"available"}]')
  })
})

describe('PATCH /v1/inventory/{petId}', () => {
  const patch = (petId: string, body: unknown, key: string, headers: Record<string, string> = {}) => ({
    method: 'PATCH' as const,
    url: `/v1/inventory/${petId}`,
    headers: { ...auth(key), 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body)
  })

  test('when the quantity is valid, then it answers the updated entry and the store keeps it', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(7, { status: 'pending', quantity: 2 })] })
    const res = await request(patch('7', { quantity: 42 }, key))
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { petId: 7, quantity: 42, status: 'pending' })
    const list = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.deepEqual(list.json(), [{ petId: 7, quantity: 42, status: 'pending' }])
  })

  test('when the quantity changes, then the pet status stays as it was', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1, { status: 'sold', quantity: 0 })] })
    const res = await request(patch('1', { quantity: 10 }, key))
    assert.equal(res.json().status, 'sold')
  })

  for (const quantity of [0, 1_000_000_000]) {
    test(`when the quantity is the bound ${quantity}, then it is accepted`, async (t) => {
      const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
      const res = await request(patch('1', { quantity }, key))
      assert.equal(res.statusCode, 200)
      assert.equal(res.json().quantity, quantity)
    })
  }

  test('when the petId is above 2^53, then exactly that entry is updated', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(BIG, { quantity: 1 }), pet(BIG - 1n, { quantity: 1 })] })
    const res = await request(patch(String(BIG), { quantity: 99 }, key))
    assert.equal(res.statusCode, 200)
    assert.equal(res.body, '{"petId":9007199254740993,"quantity":99,"status":"available"}')
    const list = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(list.body,
      '[{"petId":9007199254740992,"quantity":1,"status":"available"},{"petId":9007199254740993,"quantity":99,"status":"available"}]')
  })

  test('when the petId is at the int64 edges, then it is accepted', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(2n ** 63n - 1n), pet(-(2n ** 63n))] })
    assert.equal((await request(patch('9223372036854775807', { quantity: 3 }, key))).statusCode, 200)
    assert.equal((await request(patch('-9223372036854775808', { quantity: 3 }, key))).statusCode, 200)
  })

  test('when no entry exists for the petId, then it answers 404 not_found', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1), pet(2, { quantity: undefined })] })
    for (const id of ['999', '2']) {
      const res = await request(patch(id, { quantity: 1 }, key))
      assert.equal(res.statusCode, 404)
      assert.deepEqual(res.json(), { code: 'not_found', message: `No inventory entry exists for pet ${id}.`, status: 404 })
    }
  })

  const badBodies: Array<[string, string]> = [
    ['a missing quantity', '{}'],
    ['a null quantity', '{"quantity":null}'],
    ['a fractional quantity', '{"quantity":1.5}'],
    ['a string quantity', '{"quantity":"5"}'],
    ['a boolean quantity', '{"quantity":true}'],
    ['a negative quantity', '{"quantity":-1}'],
    ['a quantity above one billion', '{"quantity":1000000001}'],
    ['a huge quantity', '{"quantity":1e400}'],
    ['an array body', '[{"quantity":1}]'],
    ['a string body', '"5"'],
    ['a number body', '5'],
    ['a null body', 'null'],
    ['malformed JSON', '{"quantity":'],
    ['an empty body', ''],
    ['a __proto__ key', '{"quantity":1,"__proto__":{"x":1}}'],
    ['a constructor.prototype key', '{"quantity":1,"constructor":{"prototype":{"x":1}}}'],
    // Numbers are exact or refused: JSON.parse would read these as 0, 5, 5, 1000 and 2.
    ['a quantity that underflows to zero', '{"quantity":1e-400}'],
    ['a quantity just below an integer', '{"quantity":4.9999999999999999}'],
    ['a quantity with a zero fraction', '{"quantity":5.0}'],
    ['a quantity with an exponent', '{"quantity":1e3}'],
    ['a negative zero exponent', '{"quantity":0e0}'],
    ['a repeated member', '{"quantity":7,"quantity":2}'],
    ['a repeated member with the same value', '{"quantity":2,"quantity":2}'],
    ['a repeated member inside a nested object', '{"quantity":1,"note":"x","reason":"arrival","x":{"a":1,"a":2}}'],
    ['a leading zero', '{"quantity":05}'],
    ['a trailing comma', '{"quantity":5,}'],
    ['an unescaped control character in a string', '{"quantity":5,"note":"a\u0001b"}'],
    ['data after the value', '{"quantity":5} {}']
  ]
  for (const [what, body] of badBodies) {
    test(`when the body has ${what}, then it answers 400 invalid_request and changes nothing`, async (t) => {
      const { request, key } = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
      const res = await request(patch('1', body, key))
      assert.equal(res.statusCode, 400)
      const error = res.json()
      assert.equal(error.code, 'invalid_request')
      assert.equal(error.status, 400)
      assert.equal(typeof error.message, 'string')
      const list = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
      assert.deepEqual(list.json(), [{ petId: 1, quantity: 5, status: 'available' }])
    })
  }

  test('when a number is not an integer literal, or a member repeats, then the 400 says so by name', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    assert.equal((await request(patch('1', '{"quantity":1e-400}', key))).json().message, 'body.quantity must be an integer.')
    assert.equal((await request(patch('1', '{"quantity":7,"quantity":2}', key))).json().message,
      'The request body repeats the member "quantity" in one object.')
  })

  test('when the body has an unknown field, then the 400 names the field', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const res = await request(patch('1', { quantity: 1, reasons: 'arrival' }, key))
    assert.equal(res.statusCode, 400)
    assert.equal(res.json().message, 'body.reasons is not a known field.')
  })

  test('when there is no body at all, then it answers 400', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const res = await request({ method: 'PATCH', url: '/v1/inventory/1', headers: auth(key) })
    assert.equal(res.statusCode, 400)
    assert.equal(res.json().code, 'invalid_request')
  })

  test('when the content type is application/json with a charset, then it is accepted', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const res = await request(patch('1', { quantity: 2 }, key, { 'content-type': 'application/json; charset=utf-8' }))
    assert.equal(res.statusCode, 200)
  })

  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x']) {
    test(`when the content type is ${type}, then it answers 415 unsupported_media_type`, async (t) => {
      const { request, key } = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
      const res = await request(patch('1', '{"quantity":2}', key, { 'content-type': type }))
      assert.equal(res.statusCode, 415)
      assert.deepEqual(res.json(), { code: 'unsupported_media_type', message: 'The request body must be application/json.', status: 415 })
    })
  }

  test('when the body exceeds 16 KiB, then it answers 413 payload_too_large', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const body = JSON.stringify({ quantity: 1, pad: 'x'.repeat(16 * 1024) })
    const res = await request(patch('1', body, key))
    assert.equal(res.statusCode, 413)
    assert.equal(res.json().code, 'payload_too_large')
  })

  test('when the body is just under 16 KiB, then size is not the reason it fails', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    const body = JSON.stringify({ quantity: 1 }).padEnd(16 * 1024, ' ')
    const res = await request(patch('1', body, key))
    assert.equal(res.statusCode, 200)
  })

  const badIds = ['abc', '1.5', '1e3', '0x10', '', '9223372036854775808', '-9223372036854775809', '99999999999999999999', '+1', '01', ' 1']
  for (const id of badIds) {
    test(`when the petId is "${id}", then it answers 400 invalid_request`, async (t) => {
      const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
      const res = await request(patch(encodeURIComponent(id), { quantity: 1 }, key))
      assert.equal(res.statusCode, 400)
      assert.equal(res.json().code, 'invalid_request')
      assert.match(res.json().message, /params\.petId/)
    })
  }
})
