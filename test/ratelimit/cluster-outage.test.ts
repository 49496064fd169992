/**
 * One Redis Cluster node away while the others serve (a primary without a replica, cluster-require-full-coverage
 * no, or any dead primary during cluster-node-timeout): a decision that reaches for it fails within a few hundred
 * milliseconds (the Cluster client retries a few times, not its default 16, which kept a request 1.7 s), and the
 * instance then answers as during an outage (found by an attacker helper).
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { Redis } from 'ioredis'
import type { RedisConfig } from '../../src/config.js'
import { checkRedis, openRedis, sharedRedis } from '../../src/redis/connect.js'
import { redisKeys } from '../../src/ratelimit/redis.js'
import { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { LimiterUnavailableError, type Subject } from '../../src/ratelimit/types.js'
import { requireRedisServer, startRedisCluster } from '../helpers/redis-servers.js'

const PREFIX = 'test:partial:'
const limits = { perMinute: 1000, perDay: 1000 }

async function setup (t: TestContext) {
  const servers = await startRedisCluster(t.after.bind(t))
  const admin = servers.nodes.map((node) => new Redis(node.port, '127.0.0.1', { retryStrategy: () => null }).on('error', () => {}))
  t.after(() => { for (const a of admin) a.disconnect() })
  for (const a of admin) await a.config('SET', 'cluster-require-full-coverage', 'no')
  // Which node owns a subject's keys.
  const slots = await admin[0]!.cluster('SLOTS') as unknown as Array<[number, number, [string, number]]>
  const owner = async (subject: Subject): Promise<number> => {
    const slot = await admin[0]!.cluster('KEYSLOT', redisKeys(PREFIX, subject).minute) as number
    const range = slots.find(([from, to]) => slot >= from && slot <= to)!
    return servers.nodes.findIndex((node) => node.port === Number(range[2][1]))
  }
  let onDead: Subject | undefined
  let onLive: Subject | undefined
  for (let i = 0; onDead === undefined || onLive === undefined; i++) {
    const subject: Subject = { kind: 'key', id: `k${i}` }
    if (await owner(subject) === 0) onDead ??= subject
    else onLive ??= subject
  }
  const config: RedisConfig = { mode: 'cluster', seeds: servers.seeds.split(','), onDown: 'deny', commandTimeoutMs: 500 }
  const client = openRedis(config)
  t.after(() => client.disconnect())
  const shared = sharedRedis(client, PREFIX)
  const redis = shared.limiter
  assert.deepEqual(await checkRedis(config, client, shared), { usable: true })
  const limiter = new ResilientLimiter({ redis, logger: { warn: () => {}, info: () => {} }, onDown: 'deny' })
  t.after(() => limiter.close())
  assert.equal((await limiter.consume(onDead, limits)).allowed, true)
  assert.equal((await limiter.consume(onLive, limits)).allowed, true)
  await servers.nodes[0]!.kill()
  return { limiter, onDead, onLive }
}

if (await requireRedisServer('a partial Redis Cluster outage')) {
  describe('one Cluster node away, the others serving', () => {
    test('a decision for a subject on the dead node fails fast (under a second)', async (t) => {
      const { limiter, onDead } = await setup(t)
      const started = Date.now()
      await assert.rejects(limiter.consume(onDead, limits), LimiterUnavailableError)
      const ms = Date.now() - started
      // A few hundred ms on a quiet machine; the client's default retries took 1.7 s. The bound allows a loaded machine.
      assert.ok(ms < 1000, `the refusal took ${ms} ms`)
    })
  })
}
