/**
 * More of the Redis start check (found by an attacker helper): a password with a raw '@' is hidden whole; a user
 * without INCR (the change counter every write counts in) is refused; Sentinels that do not know the primary's name,
 * or a data node listed as a Sentinel, are configuration errors, not an outage.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { Redis } from 'ioredis'
import type { RedisConfig } from '../../src/config.js'
import { checkRedis, openRedis, redisTarget, RedisSetupError } from '../../src/ratelimit/connect.js'
import { RedisLimiter } from '../../src/ratelimit/redis.js'
import { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { LimiterUnavailableError } from '../../src/ratelimit/types.js'
import { requireRedisServer, startRedisServer, startSentinel } from '../helpers/redis-servers.js'

async function check (t: TestContext, config: RedisConfig, waitMs = 3000) {
  const client = openRedis(config)
  t.after(() => client.disconnect())
  const limiter = new RedisLimiter({ client, prefix: 'test:' })
  return { client, limiter, run: () => checkRedis(config, client, limiter, waitMs) }
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
      const { limiter: redis, run } = await check(t, config)
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
      t.after(() => limiter.close())
      const subject = { kind: 'key' as const, id: 'k' }
      const limits = { perMinute: 1000, perDay: 1000 }
      assert.equal((await limiter.consume(subject, limits)).allowed, true)
      await limiter.announceChange()
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
