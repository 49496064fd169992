/**
 * Bounded input: URL length, header size, JSON nesting, and clients too slow to send their headers. Every
 * refusal is the Error shape; the server keeps serving.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { auth, pet, testApp } from '../helpers/app.js'
import { parseResponse, raw } from '../helpers/raw-http.js'

function errorOf (text: string): { status: number, body: { code: string, status: number } } {
  const [head, body] = text.split('\r\n\r\n')
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head ?? '')?.[1]), body: JSON.parse(body ?? '') as { code: string, status: number } }
}

describe('input limits', () => {
  test('when the URL is longer than 2048 characters, then it answers 414 uri_too_long with the rate-limit headers', async (t) => {
    const { request, key } = await testApp(t)
    const res = await request({ method: 'GET', url: `/v1/store/orders?status=placed&x=${'a'.repeat(2100)}`, headers: auth(key) })
    assert.equal(res.statusCode, 414)
    assert.deepEqual(res.json(), { code: 'uri_too_long', message: 'The request URL exceeds 2048 characters.', status: 414 })
    assert.match(String(res.headers['x-ratelimit-limit']), /^\d+$/)
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 200)
  })

  test('when JSON is nested thousands deep, then it answers 400 and the process keeps serving', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const deep = '{"quantity":1,"x":' + '['.repeat(5000) + ']'.repeat(5000) + '}'
    const res = await request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload: deep })
    assert.equal(res.statusCode, 400)
    assert.equal(res.json().code, 'invalid_request')
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).json()[0].quantity, 5)
  })

  test('when the headers exceed 16 KiB, then it answers 431 headers_too_large in the Error shape and keeps serving', async (t) => {
    const { app, key } = await testApp(t)
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    const { text } = await raw(port, `GET /v1/inventory HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`)
    const { status, body } = errorOf(text)
    assert.equal(status, 431)
    assert.deepEqual(body, { code: 'headers_too_large', message: 'The request headers are too large.', status: 431 })
    const ok = await fetch(`http://127.0.0.1:${port}/v1/inventory`, { headers: auth(key) })
    assert.equal(ok.status, 200)
  })

  test('when a body is shorter than its Content-Length and the client stops sending, then it answers 400 invalid_request and changes nothing', async (t) => {
    const { app, key, store } = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    const body = '{"quantity":0}'
    const { text } = await raw(port, `PATCH /v1/inventory/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length + 10}\r\n\r\n${body}`, { halfClose: true })
    const { status, body: error } = errorOf(text)
    assert.equal(status, 400)
    assert.deepEqual(error, { code: 'invalid_request', message: 'The request is invalid.', status: 400 })
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 5, 'the PATCH was not applied')
  })

  test('when a request carries more than 100 header lines, then it is refused with 431 and the rate-limit fields, never cut short', async (t) => {
    const { app, key, store } = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    // A stale If-Match placed after 1000 padding lines: Node keeps only the first lines it is allowed to.
    const padding = Array.from({ length: 1000 }, (_, i) => `X-Pad-${i}: a`).join('\r\n')
    const body = '{"quantity":0}'
    const { text } = await raw(port, `PATCH /v1/inventory/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n${padding}\r\nIf-Match: "r999"\r\n\r\n${body}`)
    const res = parseResponse(text)
    assert.equal(res.status, 431)
    assert.deepEqual(JSON.parse(res.body), { code: 'headers_too_large', message: 'The request has more than 100 header lines.', status: 431 })
    assert.match(res.headers['x-ratelimit-remaining'] ?? '', /^\d+$/)
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 5, 'the PATCH was not applied')
  })

  test('when a request carries exactly 100 header lines, then it is served', async (t) => {
    const { request, key } = await testApp(t)
    // inject() adds host and user-agent; with the authorization that makes 100.
    const headers: Record<string, string> = { ...auth(key) }
    for (let i = 0; i < 97; i++) headers[`x-pad-${i}`] = 'a'
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers })).statusCode, 200)
    headers['x-pad-97'] = 'a'
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers })).statusCode, 431)
  })

  test('when a URL has a malformed percent-escape, then the 400 carries the rate-limit fields and counts against the caller', async (t) => {
    const { request, key } = await testApp(t)
    for (const url of ['/v1/%zz', '/v1/inventory/%E0%A4%A', '/%zz/x']) {
      const res = await request({ method: 'GET', url, headers: auth(key) })
      assert.equal(res.statusCode, 400, url)
      assert.deepEqual(res.json(), { code: 'invalid_request', message: 'The request URL is malformed.', status: 400 })
      assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/)
    }
    const next = await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal(next.headers['x-ratelimit-remaining'], '56')
  })

  test('when a client sends its headers too slowly, then it gets 408 request_timeout and its connection is closed', async (t) => {
    const { app } = await testApp(t, { HEADERS_TIMEOUT_MS: '300', REQUEST_TIMEOUT_MS: '300' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    // Half a request line, then nothing: the slowloris pattern.
    const { text, closedAfterMs } = await raw(port, 'GET /v1/inventory HTTP/1.1\r\nHost: x\r\n', { pauseMs: 5000, rest: '\r\n' })
    assert.ok(closedAfterMs < 3000, `closed after ${closedAfterMs} ms`)
    const { status, body } = errorOf(text)
    assert.equal(status, 408)
    assert.equal(body.code, 'request_timeout')
  })

  test('when a client sends its body too slowly, then the request times out and its connection is closed', async (t) => {
    const { app, key } = await testApp(t, { HEADERS_TIMEOUT_MS: '300', REQUEST_TIMEOUT_MS: '500' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    // Complete headers announcing 20 bytes, then 5 of them, then nothing.
    const { text, closedAfterMs } = await raw(port, `PATCH /v1/inventory/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{"qua', { pauseMs: 5000, rest: 'ntity": 1}    ' })
    assert.ok(closedAfterMs < 3000, `closed after ${closedAfterMs} ms`)
    const { status, body } = errorOf(text)
    assert.equal(status, 408)
    assert.equal(body.code, 'request_timeout')
  })

  test('when a keep-alive connection stays idle past the keep-alive timeout, then the server closes it', async (t) => {
    const { app } = await testApp(t, { KEEP_ALIVE_TIMEOUT_MS: '200' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    const { text, closedAfterMs } = await raw(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
    assert.match(text, /^HTTP\/1\.1 200/)
    assert.ok(closedAfterMs < 2000, `closed after ${closedAfterMs} ms`)
  })
})
