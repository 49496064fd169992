/**
 * More of the Redis start check (found by an attacker helper): a password with a raw '@' is hidden whole; a user
 * without INCR (the change counter every write counts in) is refused; Sentinels that do not know the primary's name,
 * or a data node listed as a Sentinel, are configuration errors, not an outage.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { Redis } from 'ioredis'
import type { RedisConfig } from '../../src/config.js'
import { checkRedis, connectLimiterRedis, openRedis, redisTarget, RedisSetupError, sharedRedis } from '../../src/redis/connect.js'
import { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { LimiterUnavailableError } from '../../src/ratelimit/types.js'
import { freePort } from '../helpers/net.js'
import { waitFor } from '../helpers/wait.js'
import { requireRedisServer, startRedisServer, startSentinel } from '../helpers/redis-servers.js'

async function check (t: TestContext, config: RedisConfig, waitMs = 3000) {
  const client = openRedis(config)
  t.after(() => client.disconnect())
  const shared = sharedRedis(client, 'test:')
  return { client, limiter: shared.limiter, changes: shared.changes, run: () => checkRedis(config, client, shared, waitMs) }
}

describe('redisTarget never shows a password', () => {
  test('a password with a raw "@" (accepted by ioredis) is hidden whole', () => {
    const target = redisTarget({ mode: 'standalone', url: 'redis://:my@secretpw@127.0.0.1:6379', onDown: 'local', commandTimeoutMs: 500 })
    assert.doesNotMatch(target, /secretpw/)
    const seeds = redisTarget({ mode: 'cluster', seeds: ['redis://user:p@ss@10.0.0.1:7000'], onDown: 'local', commandTimeoutMs: 500 })
    assert.doesNotMatch(seeds, /ss@/)
  })
})

if (await requireRedisServer('the Redis start check')) {
  describe('the start check refuses what cannot work at run time', () => {
    test('a user without INCRBY (the change counter) is refused at start (else every write throws deny-mode instances into 503s)', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const admin = new Redis(server.port, '127.0.0.1')
      t.after(() => admin.disconnect())
      await admin.call('ACL', 'SETUSER', 'noincr', 'on', '>pw', '~*', '+@all', '-incrby')
      const config: RedisConfig = { mode: 'standalone', url: `redis://noincr:pw@127.0.0.1:${server.port}`, onDown: 'deny', commandTimeoutMs: 500 }
      const { limiter: redis, changes, run } = await check(t, config)
      let refusedAtStart = false
      try {
        await run()
      } catch (error) {
        assert.ok(error instanceof RedisSetupError, String(error))
        refusedAtStart = true
      }
      if (refusedAtStart) return
      // Not refused: what it costs at run time. One acknowledged write, then the next decision is refused.
      const limiter = new ResilientLimiter({ redis, logger: { warn: () => {}, info: () => {} }, onDown: 'deny' })
      changes.reportTo(limiter)
      t.after(() => limiter.close())
      const subject = { kind: 'key' as const, id: 'k' }
      const limits = { perMinute: 1000, perDay: 1000 }
      assert.equal((await limiter.consume(subject, limits)).allowed, true)
      await changes.announce()
      await assert.rejects(limiter.consume(subject, limits), LimiterUnavailableError)
      assert.fail('a Redis user without INCR passed the start check; after one write every request was refused (503) under deny')
    })

    test('Sentinels that do not know REDIS_SENTINEL_NAME are a configuration error, not an outage', async (t) => {
      const servers = await startSentinel(t.after.bind(t))
      const config: RedisConfig = { mode: 'sentinel', sentinels: [{ host: '127.0.0.1', port: servers.sentinel.port }], name: 'petstroe', username: null, password: null, onDown: 'local', commandTimeoutMs: 500 }
      const { run } = await check(t, config)
      await assert.rejects(run(), RedisSetupError)
    })

    test('a plain Redis given as a Sentinel is a configuration error, not an outage', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const config: RedisConfig = { mode: 'sentinel', sentinels: [{ host: '127.0.0.1', port: server.port }], name: 'petstore', username: null, password: null, onDown: 'local', commandTimeoutMs: 500 }
      const { run } = await check(t, config)
      await assert.rejects(run(), RedisSetupError)
    })
  })
}

describe('connectLimiterRedis: the one way the server and the CLI open the shared limiter', () => {
  test('when a command that only reads cannot reach Redis, then it is told why and nothing is thrown', async () => {
    const config: RedisConfig = { mode: 'standalone', url: `redis://127.0.0.1:${await freePort()}`, onDown: 'local', commandTimeoutMs: 500 }
    const { redis, check } = await connectLimiterRedis(config, 'test:', { check: 'ready', waitMs: 2000 })
    redis.close()
    assert.equal(check.usable, false)
    assert.match(check.usable ? '' : check.reason, /ECONNREFUSED/)
    assert.equal(redis.where, config.mode === 'standalone' ? config.url : '')
  })
})

if (await requireRedisServer('opening the shared limiter')) {
  describe('connectLimiterRedis on a Redis of its own', () => {
    test('when a command only reads, then the connection is ready and nothing is written; the start check announces a change', async (t) => {
      const server = await startRedisServer(t.after.bind(t))
      const admin = new Redis(server.port, '127.0.0.1')
      t.after(() => admin.disconnect())
      const config: RedisConfig = { mode: 'standalone', url: server.url, onDown: 'local', commandTimeoutMs: 500 }
      const reader = await connectLimiterRedis(config, 'test:', { check: 'ready', waitMs: 3000 })
      reader.redis.close()
      assert.deepEqual(reader.check, { usable: true })
      assert.equal(await admin.dbsize(), 0, 'a reader writes nothing (no probe, no change announced)')
      const starter = await connectLimiterRedis(config, 'test:', { check: 'start', waitMs: 3000 })
      starter.redis.close()
      assert.deepEqual(starter.check, { usable: true })
      assert.notEqual(await admin.get('test:changes'), null, 'the start check counts a change, as a write does')
    })

    test('when Redis answers but refuses the limiter at start, then it throws RedisSetupError and closes what it opened', async (t) => {
      const server = await startRedisServer(t.after.bind(t), ['--requirepass', 'secret'])
      const admin = new Redis(server.port, '127.0.0.1', { password: 'secret' })
      t.after(() => admin.disconnect())
      const config: RedisConfig = { mode: 'standalone', url: server.url, onDown: 'local', commandTimeoutMs: 500 }
      await assert.rejects(connectLimiterRedis(config, 'test:', { check: 'start', waitMs: 3000 }), RedisSetupError)
      let clients = ''
      await waitFor('only the test\'s own connection left', async () => {
        clients = String(await admin.client('LIST'))
        return clients.trim().split('\n').length === 1
      }, { detail: () => clients })
    })
  })
}
