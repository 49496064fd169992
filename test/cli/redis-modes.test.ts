/**
 * `petstore serve` with each Redis topology, through the real process: a Redis that cannot be used as configured
 * stops the start with exit 2 and the reason; an outage at run time follows RATE_LIMIT_ON_REDIS_DOWN (in-process
 * counting, visible in /readyz, or 503 refusals); Cluster and Sentinel serve with limits shared across instances.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { requireRedisServer, startRedisCluster, startRedisServer, startSentinel } from '../helpers/redis-servers.js'
import { cliFor, startServe, type Cli } from './run.js'

async function key (cli: Cli): Promise<string> {
  const res = await cli.run(['keys', 'create', '--plan', 'free', '--name', 'redis-modes'])
  assert.equal(res.code, 0, res.stderr)
  return res.stdout.trim()
}

const get = (base: string, token: string): Promise<Response> => fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${token}` } })

if (await requireRedisServer('serve with Redis Cluster and Sentinel')) {
  describe('petstore serve: a Redis that cannot be used as configured stops the start (exit 2)', () => {
    test('a Cluster node given as REDIS_URL in the default standalone mode: exit 2 naming REDIS_MODE=cluster, and nothing is served', async (t) => {
      const servers = await startRedisCluster(t.after.bind(t))
      const cli = cliFor(t)
      const res = await cli.run(['serve'], { PORT: '0', REDIS_URL: servers.nodes[0]!.url })
      assert.equal(res.code, 2, res.stderr)
      assert.match(res.stderr, /cannot serve the rate limiter: it is a Redis Cluster node: set REDIS_MODE=cluster/)
      assert.doesNotMatch(res.stdout + res.stderr, /Petstore Inventory Service: API/, 'it never listened')
    })

    test('REDIS_MODE=cluster on a plain server, a replica, and a wrong password: exit 2 with each reason', async (t) => {
      const plain = await startRedisServer(t.after.bind(t), ['--requirepass', 'right'])
      const cli = cliFor(t)
      const cases: Array<[Record<string, string>, RegExp]> = [
        [{ REDIS_MODE: 'cluster', REDIS_URL: `redis://:right@127.0.0.1:${plain.port}` }, /not a Cluster node: set REDIS_MODE=standalone/],
        [{ REDIS_URL: `redis://:wrong@127.0.0.1:${plain.port}` }, /credentials are wrong or missing/]
      ]
      const primary = await startRedisServer(t.after.bind(t))
      const replica = await startRedisServer(t.after.bind(t), ['--replicaof', '127.0.0.1', String(primary.port)])
      cases.push([{ REDIS_URL: replica.url }, /read-only replica/])
      for (const [env, reason] of cases) {
        const res = await cli.run(['serve'], { PORT: '0', ...env })
        assert.equal(res.code, 2, `${JSON.stringify(env)}: ${res.stderr}`)
        assert.match(res.stderr, reason)
        assert.doesNotMatch(res.stderr, /wrong@|:right@/, 'no password in the message')
      }
    })
  })

  describe('petstore serve: Redis away at run time', () => {
    test('local (the default): requests are still answered, counted per instance, and /readyz says so; Redis back, shared again', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const cli = cliFor(t)
      const { base } = await startServe(cli, [], { REDIS_URL: server.url, BAN_SECONDS: '0' })
      const token = await key(cli)
      assert.deepEqual(await (await fetch(`${base}/readyz`)).json(), { status: 'ready', rateLimiter: 'redis' })
      await server.kill()
      assert.equal((await get(base, token)).status, 200)
      assert.deepEqual(await (await fetch(`${base}/readyz`)).json(), { status: 'ready', rateLimiter: 'in-process-fallback' })
      const metrics = await (await fetch(`${base}/metrics`)).text()
      assert.match(metrics, /petstore_ratelimit_backend\{backend="memory"\} 1/)
      assert.match(metrics, /petstore_ratelimit_fallbacks_total [1-9]/)
      await server.restart()
      const deadline = Date.now() + 10_000
      let ready: unknown
      while (Date.now() < deadline) {
        await get(base, token)
        ready = await (await fetch(`${base}/readyz`)).json()
        if ((ready as { rateLimiter?: string }).rateLimiter === 'redis') break
        await sleep(200)
      }
      assert.deepEqual(ready, { status: 'ready', rateLimiter: 'redis' })
    })

    test('deny: gated requests get 503 with Retry-After and the Error body, /readyz is 503, public routes still answer; Redis back, served again', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const cli = cliFor(t)
      const { base } = await startServe(cli, [], { REDIS_URL: server.url, RATE_LIMIT_ON_REDIS_DOWN: 'deny', BAN_SECONDS: '0' })
      const token = await key(cli)
      assert.equal((await get(base, token)).status, 200)
      await server.kill()
      for (const res of [await get(base, token), await get(base, token), await fetch(`${base}/v1/inventory`)]) {
        assert.equal(res.status, 503)
        assert.equal(res.headers.get('retry-after'), '1')
        const body = await res.json() as { code: string, status: number, message: string }
        assert.equal(body.code, 'service_unavailable')
        assert.equal(body.status, 503)
        assert.match(body.message, /Rate limiting is temporarily unavailable/)
      }
      const ready = await fetch(`${base}/readyz`)
      assert.equal(ready.status, 503)
      assert.match((await ready.json() as { message: string }).message, /RATE_LIMIT_ON_REDIS_DOWN=deny/)
      assert.equal((await fetch(`${base}/healthz`)).status, 200, 'alive, only not ready')
      assert.match(await (await fetch(`${base}/metrics`)).text(), /petstore_ratelimit_backend\{backend="none"\} 1/)
      await server.restart()
      const deadline = Date.now() + 10_000
      let status = 0
      while (status !== 200 && Date.now() < deadline) {
        status = (await get(base, token)).status
        if (status !== 200) await sleep(200)
      }
      assert.equal(status, 200)
    })
  })

  describe('petstore serve on Redis Cluster and Sentinel', () => {
    test('REDIS_MODE=cluster: two instances share one key\'s limit exactly', async (t) => {
      const servers = await startRedisCluster(t.after.bind(t))
      const cli = cliFor(t)
      const env = { REDIS_MODE: 'cluster', REDIS_URL: servers.seeds, RATE_LIMIT_FREE: '9/1000', BAN_SECONDS: '0' }
      const one = await startServe(cli, ['--seed-demo'], env)
      const two = await startServe(cli, [], env)
      const token = await key(cli)
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => get(i % 2 === 0 ? one.base : two.base, token)))
      assert.equal(answers.filter((res) => res.status === 200).length, 9)
      assert.equal(answers.filter((res) => res.status === 429).length, 11)
      assert.deepEqual(await (await fetch(`${one.base}/readyz`)).json(), { status: 'ready', rateLimiter: 'redis' })
    })

    test('REDIS_MODE=sentinel: serves through the primary the Sentinel names', async (t) => {
      const servers = await startSentinel(t.after.bind(t))
      const cli = cliFor(t)
      const { base } = await startServe(cli, ['--seed-demo'], {
        REDIS_MODE: 'sentinel', REDIS_SENTINELS: `127.0.0.1:${servers.sentinel.port}`, REDIS_SENTINEL_NAME: servers.name, RATE_LIMIT_FREE: '3/1000', BAN_SECONDS: '0'
      })
      const token = await key(cli)
      const statuses = []
      for (let i = 0; i < 4; i++) statuses.push((await get(base, token)).status)
      assert.deepEqual(statuses, [200, 200, 200, 429])
      assert.deepEqual(await (await fetch(`${base}/readyz`)).json(), { status: 'ready', rateLimiter: 'redis' })
    })
  })
}
