/**
 * The Redis topologies of the shared limiter (REDIS_MODE standalone, cluster, sentinel) and the start check: a
 * Redis that answers but cannot be used as configured is a configuration error (RedisSetupError, which `serve`
 * turns into exit 2); one that cannot be reached is an outage. Each test runs its own private redis-server(s).
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitFor, WAIT_TIMEOUT_MS } from '../helpers/wait.js'
import { Redis } from 'ioredis'
import type { RedisConfig } from '../../src/config.js'
import { RedisChangeSignal } from '../../src/changes/redis.js'
import { checkRedis, openRedis, RedisSetupError } from '../../src/redis/connect.js'
import { RedisLimiter, redisKeys } from '../../src/ratelimit/redis.js'
import { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { LimiterUnavailableError } from '../../src/ratelimit/types.js'
import { freePort } from '../helpers/net.js'
import { requireRedisServer, startRedisCluster, startRedisServer, startSentinel } from '../helpers/redis-servers.js'

const quiet = { warn: () => {}, info: () => {} }
const limits = { perMinute: 1000, perDay: 1000 }
const key = (id: string) => ({ kind: 'key' as const, id })

/**
 * Opens the configured client with the limiter and the change signal on it (as src/redis/connect.ts sharedRedis
 * does, each reading of the counter also recorded in `reads`), closed after the test, and runs the start check.
 */
async function check (t: TestContext, config: RedisConfig, waitMs = 5000) {
  const client = openRedis(config)
  t.after(() => client.disconnect())
  const prefix = 'test:topology:'
  const changes = new RedisChangeSignal({ client, prefix })
  const reads: Array<number | undefined> = []
  const { key: counter, seen } = changes.piggyback
  const limiter = new RedisLimiter({ client, prefix, piggyback: { key: counter, seen: (value) => { reads.push(value); seen(value) } } })
  return { client, limiter, reads, result: await checkRedis(config, client, { limiter, changes }, waitMs) }
}

async function refused (t: TestContext, config: RedisConfig, hint: RegExp): Promise<void> {
  await assert.rejects(check(t, config), (error: unknown) => {
    assert.ok(error instanceof RedisSetupError, String(error))
    assert.match(error.message, hint)
    assert.doesNotMatch(error.message, /s3cret/, 'no password in the message')
    return true
  })
}

const standalone = (url: string): RedisConfig => ({ mode: 'standalone', url, onDown: 'local', commandTimeoutMs: 500 })
const cluster = (seeds: string): RedisConfig => ({ mode: 'cluster', seeds: seeds.split(','), onDown: 'local', commandTimeoutMs: 500 })

if (await requireRedisServer('Redis topology tests')) {
  describe('the start check refuses a Redis that answers but cannot be used as configured', () => {
    test('a Redis Cluster node addressed as one server (REDIS_MODE=standalone) names REDIS_MODE=cluster', async (t) => {
      const servers = await startRedisCluster(t.after.bind(t))
      await refused(t, standalone(servers.nodes[0]!.url), /REDIS_MODE=cluster/)
    })

    test('REDIS_MODE=cluster on a server without cluster support names REDIS_MODE=standalone', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      await refused(t, cluster(server.url), /not a Cluster node: set REDIS_MODE=standalone/)
    })

    test('a cluster whose slots are not all served (CLUSTERDOWN) is refused', async (t) => {
      const servers = await startRedisCluster(t.after.bind(t))
      const admin = new Redis(servers.nodes[0]!.port, '127.0.0.1')
      t.after(() => admin.disconnect())
      // One slot handed back: the cluster stops serving (cluster-require-full-coverage).
      await admin.cluster('DELSLOTS', 0)
      const deadline = Date.now() + 10_000
      while (!/cluster_state:fail/.test(await admin.cluster('INFO')) && Date.now() < deadline) await sleep(100)
      await refused(t, cluster(servers.seeds), /does not serve all its slots/)
    })

    test('a read-only replica is refused with the advice to address the primary', async (t) => {
      const primary = await startRedisServer(t.after.bind(t))
      const replica = await startRedisServer(t.after.bind(t), ['--replicaof', '127.0.0.1', String(primary.port)])
      await refused(t, standalone(replica.url), /read-only replica: point REDIS_URL at the primary/)
    })

    test('a missing or wrong password is refused, and the password is never shown', async (t) => {
      const server = await startRedisServer(t.after.bind(t), ['--requirepass', 'right-one'])
      await refused(t, standalone(server.url), /credentials are wrong or missing/)
      await refused(t, standalone(`redis://:s3cret@127.0.0.1:${server.port}`), /credentials are wrong or missing/)
      const ok = await check(t, standalone(`redis://:right-one@127.0.0.1:${server.port}`))
      assert.deepEqual(ok.result, { usable: true })
    })

    test('a user without permission for the limiter\'s script is refused (NOPERM)', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const admin = new Redis(server.port, '127.0.0.1')
      t.after(() => admin.disconnect())
      await admin.call('ACL', 'SETUSER', 'reader', 'on', '>pw', '~*', '+@all', '-evalsha', '-eval')
      await refused(t, standalone(`redis://reader:pw@127.0.0.1:${server.port}`), /lacks a permission/)
    })

    test('a Redis that does not run scripts (EVALSHA renamed away, as some proxies do) is refused', async (t) => {
      const server = await startRedisServer(t.after.bind(t), ['--rename-command', 'EVALSHA', ''])
      await refused(t, standalone(server.url), /does not run or keep Lua scripts/)
    })
  })

  describe('the start check lets an unreachable Redis through as an outage', () => {
    test('nothing listening: not usable, with the reason, and no error', async (t) => {
      const port = await freePort()
      const { result } = await check(t, standalone(`redis://127.0.0.1:${port}`), 1500)
      assert.equal(result.usable, false)
    })

    test('a usable server in each mode passes the check and leaves no probe key behind (the change counter counted one)', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const one = await check(t, standalone(server.url))
      assert.deepEqual(one.result, { usable: true })
      assert.deepEqual(await (one.client as Redis).keys('*'), ['test:topology:changes'], 'only the change counter, which the check counted in')
      const servers = await startRedisCluster(t.after.bind(t))
      assert.deepEqual((await check(t, cluster(servers.seeds))).result, { usable: true })
      const sentinel = await startSentinel(t.after.bind(t))
      const viaSentinel = await check(t, { mode: 'sentinel', sentinels: [{ host: '127.0.0.1', port: sentinel.sentinel.port }], name: sentinel.name, username: null, password: null, onDown: 'local', commandTimeoutMs: 500 })
      assert.deepEqual(viaSentinel.result, { usable: true })
    })
  })

  describe('at run time', () => {
    test('Sentinel: a failover of the primary keeps the limiter deciding in Redis, and the counts go on from the new primary', async (t) => {
      const servers = await startSentinel(t.after.bind(t))
      const config: RedisConfig = { mode: 'sentinel', sentinels: [{ host: '127.0.0.1', port: servers.sentinel.port }], name: servers.name, username: null, password: null, onDown: 'deny', commandTimeoutMs: 500 }
      const { client, limiter: redis, result } = await check(t, config)
      assert.deepEqual(result, { usable: true })
      // What the client went through, for the message of a failure: its states and errors, timed from the kill.
      const story: string[] = []
      let killedAt = Date.now()
      const note = (what: string): void => { story.push(`${Date.now() - killedAt} ms ${what}`) }
      for (const state of ['connect', 'ready', 'close', 'reconnecting', 'end', '+node', 'failover']) client.on(state, () => { note(`${state} (${client.status})`) })
      client.on('error', (error: Error) => { note(`error ${error.message}`) })
      const limiter = new ResilientLimiter({ redis, logger: quiet, onDown: 'deny' })
      t.after(() => limiter.close())
      for (let i = 0; i < 5; i++) assert.equal((await limiter.consume(key('failover'), limits)).allowed, true)
      // The replica has the counts before the primary goes.
      const copy = new Redis(servers.replica.port, '127.0.0.1')
      t.after(() => copy.disconnect())
      const minute = redisKeys('test:topology:', key('failover')).minute
      await waitFor('the replica holding the five', async () => await copy.hget(minute, 'c') === '5', { intervalMs: 100 })
      killedAt = Date.now()
      await servers.primary.kill()
      const deadline = Date.now() + 30_000
      while (await servers.primaryPort() !== servers.replica.port && Date.now() < deadline) await sleep(200)
      assert.equal(await servers.primaryPort(), servers.replica.port, 'the Sentinel promoted the replica')
      // The limiter learns of the promotion on its own (ioredis asks the Sentinel again after its reconnect delays):
      // its own 30 s from the promotion, not what the promotion left of the first 30.
      const reconnected = Date.now() + 30_000
      let decision
      while (Date.now() < reconnected) {
        try {
          decision = await limiter.consume(key('failover'), limits)
          if (limiter.backend === 'redis') break
        } catch (error) {
          assert.ok(error instanceof LimiterUnavailableError, String(error))
          const refused = `consume refused: ${String(error.cause ?? error.message)}`
          if (story.at(-1) !== refused) story.push(refused)
        }
        await sleep(100)
      }
      assert.equal(limiter.backend, 'redis', `back on Redis, the new primary (client ${client.status}; since the kill: ${story.slice(-30).join('; ')})`)
      assert.equal(decision?.windows[1].remaining, limits.perDay - 6, 'the five counted before the failover are still counted (the day window: the minute may have turned)')
    })

    test('Sentinel: when the failover detector drops the connection while the client asks the Sentinel for the primary, then the client connects again instead of ending', async (t) => {
      const servers = await startSentinel(t.after.bind(t))
      const client = openRedis({ mode: 'sentinel', sentinels: [{ host: '127.0.0.1', port: servers.sentinel.port }], name: servers.name, username: null, password: null, onDown: 'deny', commandTimeoutMs: 500 }) as Redis
      t.after(() => client.disconnect())
      await waitFor('the client ready', async () => client.status === 'ready', { intervalMs: 20 })
      // What ioredis's failover detector does on +switch-master (connector.disconnect()), at the moment it loses a
      // race: the client has just started asking the Sentinel where the primary is (a reconnect).
      const connector = (client as unknown as { connector: { disconnect: () => void } }).connector
      client.once('connecting', () => { connector.disconnect() })
      const ended = new Promise<void>((resolve) => client.once('end', () => { resolve() }))
      client.disconnect(true)
      await ended
      await waitFor('the client ready again', async () => client.status === 'ready', { intervalMs: 50 })
      assert.equal(await client.ping(), 'PONG')
      // Closed by its owner, it stays closed.
      client.disconnect()
      await sleep(1500)
      assert.equal(client.status, 'end')
    })

    test('deny: while Redis is away every decision is refused with LimiterUnavailableError, and it decides again once Redis is back', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const { limiter: redis } = await check(t, standalone(server.url))
      const limiter = new ResilientLimiter({ redis, logger: quiet, onDown: 'deny', retryAfterMs: 100 })
      t.after(() => limiter.close())
      assert.equal((await limiter.consume(key('closed'), limits)).allowed, true)
      await server.kill()
      await assert.rejects(limiter.consume(key('closed'), limits), LimiterUnavailableError)
      await assert.rejects(limiter.peek(key('closed'), limits), LimiterUnavailableError)
      const backend = (): string => limiter.backend
      assert.equal(backend(), 'unavailable')
      await server.restart()
      const deadline = Date.now() + WAIT_TIMEOUT_MS
      while (backend() !== 'redis' && Date.now() < deadline) {
        await limiter.consume(key('closed'), limits).catch(() => {})
        await sleep(100)
      }
      assert.equal(limiter.backend, 'redis')
      assert.equal((await limiter.consume(key('closed'), limits)).allowed, true)
    })

    test('cluster: a node killed and restarted is survived; decisions fall back meanwhile and go back to the cluster', async (t) => {
      const servers = await startRedisCluster(t.after.bind(t))
      const { limiter: redis, reads } = await check(t, cluster(servers.seeds))
      const limiter = new ResilientLimiter({ redis, logger: quiet, onDown: 'local', retryAfterMs: 100 })
      t.after(() => limiter.close())
      const subjects = Array.from({ length: 30 }, (_, i) => key(`node-${i}`))
      for (const subject of subjects) assert.equal((await limiter.consume(subject, limits)).allowed, true)
      await servers.nodes[1]!.kill()
      // Every decision is answered (some from memory) while the node is away.
      for (const subject of subjects) assert.equal((await limiter.consume(subject, limits)).allowed, true)
      await servers.nodes[1]!.restart()
      await servers.healthy()
      const deadline = Date.now() + WAIT_TIMEOUT_MS
      let all = false
      while (!all && Date.now() < deadline) {
        const from = reads.length
        await Promise.all(subjects.map((subject) => limiter.consume(subject, limits)))
        // Each decision reports one reading of the change counter: undefined when it did not come from the cluster.
        const read = reads.slice(from)
        all = limiter.backend === 'redis' && read.length === subjects.length && read.every((changes) => changes !== undefined)
        if (!all) await sleep(200)
      }
      assert.ok(all, 'every subject is decided by the cluster again')
    })
  })
}
