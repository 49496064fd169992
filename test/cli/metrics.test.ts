/**
 * Metrics as `petstore serve` runs them: METRICS_PORT validation, and under --workers the whole cluster's
 * numbers whichever process is scraped (the primary on METRICS_PORT, or any worker on the main port).
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { REDIS_URL, redisKeyPrefix, requireRedis } from '../ratelimit/redis-env.js'
import { cliFor, EXIT_TIMEOUT_MS, freePort, startServe, within } from './run.js'

const TOKEN = 'cluster-metrics-token-0123'

/** The value of one sample line, e.g. `petstore_http_requests_total{operation="readyz",...}`; undefined when absent. */
function sample (text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

const READYZ = 'petstore_http_requests_total{operation="readyz",method="GET",status="200"}'
const REDIS_BACKEND = 'petstore_ratelimit_backend{backend="redis"}'

describe('petstore serve: metrics configuration', () => {
  test('when METRICS_PORT equals PORT, then it exits 2 naming the variable', async (t) => {
    const cli = cliFor(t)
    const port = String(await freePort())
    const res = await cli.run(['serve'], { PORT: port, METRICS_PORT: port })
    assert.equal(res.code, 2)
    assert.match(res.stderr, /METRICS_PORT must differ from PORT/)
  })

  test('when METRICS_TOKEN is too short, then it exits 2 without echoing it', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['serve'], { PORT: '0', METRICS_TOKEN: 'tiny-secret' })
    assert.equal(res.code, 2)
    assert.match(res.stderr, /METRICS_TOKEN/)
    assert.ok(!res.stderr.includes('tiny-secret'))
  })

  test('when METRICS_PORT is set, then the server logs where metrics listen and serves them there', async (t) => {
    const cli = cliFor(t, { LOG_LEVEL: 'info' })
    const metricsPort = await freePort()
    const { base, server } = await startServe(cli, [], { METRICS_PORT: String(metricsPort) })
    assert.equal((await fetch(`${base}/metrics`)).status, 404)
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).status, 200)
    await server.waitForOutput(new RegExp(`"port":${metricsPort}.*"msg":"metrics listening"`))
    server.child.kill('SIGTERM')
    assert.equal((await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM')).code, 0)
  })
})

if (await requireRedis('metrics of serve --workers')) {
  describe('petstore serve --workers: metrics', () => {
    test('when METRICS_PORT is set, then the primary serves the sum of every worker and the main port has no /metrics', async (t) => {
      const cli = cliFor(t)
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      const metricsPort = await freePort()
      const { base, server } = await startServe(cli, ['--workers', '2'],
        { REDIS_URL, REDIS_KEY_PREFIX, METRICS_PORT: String(metricsPort), METRICS_TOKEN: TOKEN })
      const metrics = `http://127.0.0.1:${metricsPort}/metrics`
      const scrape = async () => {
        const res = await fetch(metrics, { headers: { authorization: `Bearer ${TOKEN}` } })
        assert.equal(res.status, 200)
        return await res.text()
      }
      // startServe returns once one worker answers; the gauge counts the workers whose limiter reached Redis. Until
      // both workers are up (each checks Redis at start), a scrape may wait for the late one and answer 503.
      const deadline = Date.now() + 15_000
      while (await fetch(metrics, { headers: { authorization: `Bearer ${TOKEN}` } })
        .then(async (r) => r.status !== 200 || sample(await r.text(), REDIS_BACKEND) !== 2)) {
        assert.ok(Date.now() < deadline, 'both workers on Redis within 15 s')
        await sleep(100)
      }
      // New connections each time, so that both workers answer some.
      for (let i = 0; i < 12; i++) assert.equal((await fetch(`${base}/readyz`, { headers: { connection: 'close' } })).status, 200)
      assert.equal((await fetch(`${base}/metrics`, { headers: { connection: 'close' } })).status, 404)

      assert.equal((await fetch(metrics)).status, 401)
      const text = await scrape()
      assert.equal(sample(text, READYZ), 12)
      assert.equal(sample(text, REDIS_BACKEND), 2, 'one per worker')

      server.child.kill('SIGTERM')
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
    })

    test('when /metrics is scraped on the main port, then whichever worker answers shows the whole cluster', async (t) => {
      const cli = cliFor(t)
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      const { base, server } = await startServe(cli, ['--workers', '2'], { REDIS_URL, REDIS_KEY_PREFIX })
      // Until both workers are up, a scrape may wait for the late one (and answer 503 after 5 s).
      const deadline = Date.now() + 15_000
      while (await fetch(`${base}/metrics`).then(async (r) => r.status !== 200 || sample(await r.text(), REDIS_BACKEND) !== 2)) {
        assert.ok(Date.now() < deadline, 'both workers on Redis within 15 s')
        await sleep(100)
      }
      for (let i = 0; i < 10; i++) assert.equal((await fetch(`${base}/readyz`, { headers: { connection: 'close' } })).status, 200)

      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${base}/metrics`, { headers: { connection: 'close' } })
        assert.equal(res.status, 200)
        assert.equal(sample(await res.text(), READYZ), 10)
      }
      server.child.kill('SIGTERM')
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
    })
  })
}
