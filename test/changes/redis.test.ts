/**
 * The change signal in Redis (src/changes/redis.ts) and its counter read in the limiter's calls (the limiter's
 * piggyback), against the real local Redis and a Redis Cluster of three primaries: what each decision reads, the
 * counter's copies on a Cluster, a lost counter, and the retry of an announcement while decisions fall back.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, test, type TestContext } from 'node:test'
import { CHANGE_COUNTER_COPIES, RedisChangeSignal } from '../../src/changes/redis.js'
import { createRedisClient, RedisLimiter, type RedisClient } from '../../src/ratelimit/redis.js'
import { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import type { Decision } from '../../src/ratelimit/types.js'
import { clusterForSuite, requireRedisServer } from '../helpers/redis-servers.js'
import { ip, key } from '../ratelimit/contract.js'
import { REDIS_URL, redisKeyPrefix, requireRedis, tempRedis, waitReady } from '../ratelimit/redis-env.js'

interface Opened {
  limiter: RedisLimiter
  changes: RedisChangeSignal
  /** The counter as the decision read it: undefined when it was made without reading it. */
  read: (decision: Promise<Decision>) => Promise<number | undefined>
  /** Deletes the counter (every copy on a Cluster): what a Redis restarted empty does to it. */
  lose: () => Promise<void>
}

/**
 * The limiter and the signal over one client, wired as src/redis/connect.ts sharedRedis wires them, with each
 * value the limiter hands to the signal also recorded for the test.
 */
function open (client: RedisClient, prefix: string, { changeCopy, Limiter = RedisLimiter, Signal = RedisChangeSignal }: {
  changeCopy?: number, Limiter?: typeof RedisLimiter, Signal?: typeof RedisChangeSignal
} = {}): Opened {
  const changes = new Signal({ client, prefix, ...(changeCopy === undefined ? {} : { changeCopy }) })
  const reads: Array<number | undefined> = []
  const { key: counter, seen } = changes.piggyback
  const limiter = new Limiter({ client, prefix, piggyback: { key: counter, seen: (value) => { reads.push(value); seen(value) } } })
  return {
    limiter,
    changes,
    read: async (decision) => {
      const before = reads.length
      await decision
      assert.equal(reads.length, before + 1, 'one reading per decision')
      return reads.at(-1)
    },
    lose: async () => {
      const keys = client.isCluster ? Array.from({ length: CHANGE_COUNTER_COPIES }, (_, i) => `${prefix}{changes:${i}}`) : [`${prefix}changes`]
      for (const name of keys) await client.del(name)
    }
  }
}

function signalContract (name: string, opened: (t: TestContext) => Promise<Opened>): void {
  describe(`${name}: the change counter read in the limiter's calls`, () => {
    test('every decision reads the count, consume and peek alike, the same for every subject, refusals included', async (t) => {
      const { limiter, changes, read } = await opened(t)
      const limits = { perMinute: 100, perDay: 1000 }
      assert.equal(typeof await read(limiter.consume(key('changes'), limits)), 'number', 'a number also before any change')
      await changes.announce()
      const before = await read(limiter.consume(key('changes'), limits)) as number
      await changes.announce()
      await changes.announce()
      const after = await read(limiter.consume(key('changes'), limits)) as number
      assert.ok(after > before, `${after} after two changes, ${before} before`)
      assert.equal(await read(limiter.peek(ip('someone else'), limits)), after, 'the count is the same for every subject')
      const refused = limiter.consume(key('changes-refused'), { perMinute: 0, perDay: 0 })
      const counted = await read(refused)
      assert.equal((await refused).allowed, false)
      assert.equal(counted, after, 'a refusal carries it too')
      assert.deepEqual(changes.watch.mark, { latest: after, gaps: 0 }, 'and the watch saw it')
    })

    test('a change counter that was lost (a Redis restarted empty, a flush) starts again above every value it had', async (t) => {
      const { limiter, changes, read, lose } = await opened(t)
      const limits = { perMinute: 100, perDay: 1000 }
      for (let i = 0; i < 3; i++) await changes.announce()
      const seen = await read(limiter.consume(key('changes'), limits)) as number
      await lose()
      assert.equal(await read(limiter.consume(key('changes'), limits)), 0, 'lost')
      assert.equal(changes.watch.mark?.gaps, 1, 'the watch counts the drop as a gap')
      await changes.announce()
      const after = await read(limiter.consume(key('changes'), limits)) as number
      assert.ok(after > seen, `the first change after the loss reads ${after}, above the ${seen} seen before`)
    })
  })
}

if (await requireRedis('Redis change signal tests')) {
  signalContract('RedisChangeSignal', async (t) => {
    const { client, prefix } = await tempRedis(t)
    return open(client, prefix)
  })

  describe('RedisChangeSignal with the resilient limiter', () => {
    test('a change is announced in Redis even while decisions fall back after a failed command, and a failed first try is made again', async (t) => {
      const client = createRedisClient(REDIS_URL)
      t.after(() => client.disconnect())
      await waitReady(client)
      const prefix = redisKeyPrefix(t)
      const failures = { consume: 1, announce: 1 }
      class Flaky extends RedisLimiter {
        override async consume (...args: Parameters<RedisLimiter['consume']>): Promise<Decision> {
          if (failures.consume-- > 0) throw new Error('Command timed out')
          return super.consume(...args)
        }
      }
      class FlakySignal extends RedisChangeSignal {
        override async count (): Promise<void> {
          if (failures.announce-- > 0) throw new Error('Command timed out')
          return super.count()
        }
      }
      const { limiter: redis, changes, read } = open(client, prefix, { Limiter: Flaky, Signal: FlakySignal })
      const limiter = new ResilientLimiter({ redis, logger: { warn: () => {}, info: () => {} }, retryAfterMs: 60_000 })
      changes.reportTo(limiter)
      t.after(() => limiter.close())
      assert.equal(await read(limiter.consume(key('writer'), { perMinute: 5, perDay: 5 })), undefined, 'answered from memory')
      assert.equal(limiter.backend, 'memory-fallback')
      await changes.announce()
      const counted = await client.get(`${prefix}changes`)
      assert.ok(counted !== null && Number(counted) > 0, 'counted, by the second try, while decisions were on memory')
      assert.equal(limiter.backend, 'redis', 'and decisions are back on Redis')
    })
  })
}

if (await requireRedisServer('Redis Cluster change signal tests')) {
  describe('RedisChangeSignal on a Redis Cluster of three primaries', () => {
    const { client: clusterClient } = clusterForSuite()

    signalContract('RedisChangeSignal (Cluster)', async () => open(await clusterClient(), `test:${randomUUID()}:`))

    test('a change announced through one instance is in the next decision of every other instance, whichever counter copy it reads', async () => {
      const prefix = `test:${randomUUID()}:`
      const client = await clusterClient()
      const first = open(client, prefix)
      const others = await Promise.all(Array.from({ length: 4 }, async (_, copy) => open(await clusterClient(), prefix, { changeCopy: copy * 5 })))
      const limits = { perMinute: 1000, perDay: 1000 }
      const before = await Promise.all(others.map(async (other) => await other.read(other.limiter.consume(key('reader'), limits))))
      assert.ok(before.every((count) => count === 0), `fresh counters: ${before.join(',')}`)
      await first.changes.announce()
      const started = await Promise.all(others.map(async (other) => await other.read(other.limiter.consume(key('reader'), limits)) as number))
      assert.ok(started.every((count) => count > 0), `every copy counted the first change: ${started.join(',')}`)
      await first.changes.announce()
      for (const [i, other] of others.entries()) {
        const seen = await other.read(other.limiter.consume(key('reader'), limits)) as number
        assert.ok(seen > (started[i] as number), `copy ${i}: ${seen} after the second change, ${started[i]} before`)
        assert.equal(await other.read(other.limiter.peek(ip('someone'), limits)), seen)
      }
      const copies = await Promise.all(Array.from({ length: CHANGE_COUNTER_COPIES }, (_, i) => client.get(`${prefix}{changes:${i}}`)))
      assert.ok(copies.every((copy) => copy !== null && Number(copy) > 0), 'every copy counted the changes')
    })
  })
}
