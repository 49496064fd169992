/**
 * METRICS_PORT with a real listening server (startServer, as `petstore serve` runs it): /metrics moves to its
 * own port, keeps the token rule there, and closes with the server.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import type { AddressInfo } from 'node:net'
import { loadConfig } from '../../src/config.js'
import { startServer } from '../../src/server.js'
import { tempDir } from '../helpers/app.js'
import { freePort } from '../helpers/net.js'

const TOKEN = 'metrics-port-token-0123456789'

async function serve (t: TestContext, env: Record<string, string>) {
  const metricsPort = await freePort()
  const config = loadConfig({
    PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', DATABASE_URL: join(tempDir(t), 'petstore.db'), METRICS_PORT: String(metricsPort), ...env
  })
  const app = await startServer(config, { seedDemo: false, command: 'petstore' })
  let closed = false
  t.after(async () => { if (!closed) await app.close() })
  const main = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const metrics = `http://127.0.0.1:${metricsPort}`
  return { main, metrics, close: async () => { closed = true; await app.close() } }
}

describe('METRICS_PORT', () => {
  test('when METRICS_PORT is set, then /metrics answers there and not on the main port', async (t) => {
    const { main, metrics } = await serve(t, {})
    assert.equal((await fetch(`${main}/healthz`)).status, 200)

    const onMain = await fetch(`${main}/metrics`)
    assert.equal(onMain.status, 404)
    assert.equal((await onMain.json() as { code: string }).code, 'not_found')

    const scrape = await fetch(`${metrics}/metrics`)
    assert.equal(scrape.status, 200)
    assert.match(scrape.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
    const text = await scrape.text()
    assert.match(text, /^petstore_http_requests_total\{operation="healthz",method="GET",status="200"\} 1$/m)
    assert.match(text, /^petstore_http_requests_total\{operation="unknown",method="GET",status="404"\} 1$/m)
    assert.match(text, /^process_cpu_seconds_total /m, 'the server exports the process metrics')
  })

  test('when the metrics port is asked for another path or method, then it answers 404 or 405 in the Error shape', async (t) => {
    const { metrics } = await serve(t, {})
    const other = await fetch(`${metrics}/v1/inventory`)
    assert.equal(other.status, 404)
    assert.deepEqual(Object.keys(await other.json() as object), ['code', 'message', 'status'])
    const post = await fetch(`${metrics}/metrics`, { method: 'POST' })
    assert.equal(post.status, 405)
    assert.equal(post.headers.get('allow'), 'GET, HEAD')
    assert.equal((await post.json() as { code: string }).code, 'method_not_allowed')
    const head = await fetch(`${metrics}/metrics`, { method: 'HEAD' })
    assert.equal(head.status, 200)
  })

  test('when METRICS_TOKEN is set, then the metrics port wants it as a bearer token', async (t) => {
    const { metrics } = await serve(t, { METRICS_TOKEN: TOKEN })
    for (const headers of [{}, { authorization: 'Bearer wrong-token-0123456789' }] as Array<Record<string, string>>) {
      const res = await fetch(`${metrics}/metrics`, { headers })
      assert.equal(res.status, 401)
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer realm="metrics"/)
      const body = await res.json() as { code: string, status: number }
      assert.equal(body.code, 'unauthorized')
      assert.equal(body.status, 401)
    }
    assert.equal((await fetch(`${metrics}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200)
  })

  test('when the server closes, then the metrics port closes with it', async (t) => {
    const { metrics, close } = await serve(t, {})
    assert.equal((await fetch(`${metrics}/metrics`)).status, 200)
    await close()
    await assert.rejects(fetch(`${metrics}/metrics`, { signal: AbortSignal.timeout(2000) }))
  })

  test('when METRICS_PORT is already taken, then the start fails', async (t) => {
    const { metrics } = await serve(t, {})
    const port = new URL(metrics).port
    const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', DATABASE_URL: join(tempDir(t), 'other.db'), METRICS_PORT: port })
    await assert.rejects(startServer(config, { seedDemo: false, command: 'petstore' }), /EADDRINUSE/)
  })
})
