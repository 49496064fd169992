/**
 * The RateLimiter contract against the in-memory limiter (own clock per test) and the Redis limiter (the real
 * local Redis, own key prefix per test, time moved through the offset), plus what only each backend has:
 * the memory sweep, and Redis key layout, expiry and sharing between instances.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, test, type TestContext } from 'node:test'
import { Redis } from 'ioredis'
import { MemoryLimiter } from '../src/ratelimit/memory.js'
import { RedisLimiter, redisKeys } from '../src/ratelimit/redis.js'
import { limiterContract, type OpenedLimiter } from './ratelimit/contract.js'
import { REDIS_URL, deleteKeys, requireRedis, waitReady } from './ratelimit/redis-env.js'

// Mid-minute on purpose: the contract has to align itself to window boundaries.
const START = Date.parse('2026-11-22T12:34:17.250Z')

async function openMemory (): Promise<OpenedLimiter & { clock: { now: number }, limiter: MemoryLimiter }> {
  const clock = { now: START }
  const limiter = new MemoryLimiter({ clock: () => clock.now })
  return { limiter, clock, advance: (seconds) => { clock.now += Math.round(seconds * 1000) } }
}

limiterContract('MemoryLimiter', openMemory)

describe('MemoryLimiter specifics', () => {
  test('the sweep drops subjects whose day window and strikes have passed, at most once per limiter minute', async () => {
    const { limiter, advance } = await openMemory()
    const limits = { perMinute: 1, perDay: 1 }
    for (let i = 0; i < 1000; i++) await limiter.consume(`ip-${i}`, limits)
    await limiter.consume('banned', limits)
    // A refusal with a long strike window keeps its strikes past the day.
    assert.equal((await limiter.consume('banned', limits, { strikeWindowSeconds: 2 * 86_400 })).strikes, 1)
    assert.equal(limiter.size, 1001)

    advance(86_400)
    await limiter.peek('someone', limits)
    assert.equal(limiter.size, 1, 'only the subject with live strikes is left')
    assert.equal((await limiter.consume('banned', limits)).allowed, true, 'a new day')

    advance(86_400 + 120)
    await limiter.consume('late', limits)
    assert.equal(limiter.size, 1, 'strikes expired too, only the fresh subject is left')
  })

  test('peek on an unknown subject stores nothing', async () => {
    const { limiter } = await openMemory()
    await limiter.peek('ghost', { perMinute: 1, perDay: 1 })
    assert.equal(limiter.size, 0)
  })

  test('when more subjects arrive than maxSubjects, then memory stays at the cap and the oldest subjects go first', async () => {
    const clock = { now: START }
    const limiter = new MemoryLimiter({ clock: () => clock.now, maxSubjects: 1000 })
    const limits = { perMinute: 1, perDay: 10 }
    await limiter.consume('key:old', limits)
    for (let i = 0; i < 5000; i++) await limiter.consume(`ip:2001:db8::${i.toString(16)}`, limits)
    assert.equal(limiter.size, 1000)
    // The first subject seen was evicted: it starts over with fresh windows.
    assert.equal((await limiter.consume('key:old', limits)).allowed, true)
    // The most recent ones are still counted.
    assert.equal((await limiter.consume('ip:2001:db8::1387', limits)).allowed, false)
  })

  test('uses Date.now by default', async () => {
    const limiter = new MemoryLimiter()
    const before = Date.now()
    const decision = await limiter.consume('x', { perMinute: 1, perDay: 1 })
    assert.ok(decision.now >= before && decision.now <= Date.now())
  })
})

interface OpenedRedis extends OpenedLimiter {
  limiter: RedisLimiter
  client: Redis
  prefix: string
}

/** A Redis limiter on its own client and key prefix; the keys are deleted and the client quit after the test. */
async function openRedis (t: TestContext): Promise<OpenedRedis> {
  const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, connectTimeout: 2000 })
  client.on('error', () => {})
  const prefix = `test:${randomUUID()}:`
  t.after(async () => {
    await deleteKeys(client, prefix)
    await client.quit()
  })
  await waitReady(client)
  let offset = 0
  const limiter = new RedisLimiter({ client, prefix, timeOffsetSeconds: () => offset })
  return { limiter, client, prefix, advance: (seconds) => { offset += seconds } }
}

/** The Redis Cluster hash tag of a key: what lies between the first '{' and the next '}', if not empty. */
function clusterHashTag (key: string): string {
  const open = key.indexOf('{')
  if (open === -1) return key
  const close = key.indexOf('}', open + 1)
  if (close === -1 || close === open + 1) return key
  return key.slice(open + 1, close)
}

if (await requireRedis('Redis limiter tests')) {
  limiterContract('RedisLimiter', openRedis)

  describe('RedisLimiter specifics', () => {
    test('all keys of a subject share one Cluster hash tag, and distinct subjects get distinct keys', () => {
      const subjects = ['', 'a', '{a}', 'a}', '}', '{', '{}', '}{', '%', '%7D', 'x}{y', '2001:db8::1', 'k:{1}:m']
      const seen = new Set<string>()
      for (const subject of subjects) {
        const keys = redisKeys('rl:', subject)
        const tags = [keys.minute, keys.day, keys.strikes].map(clusterHashTag)
        assert.ok(tags.every((tag) => tag === tags[0] && tag !== keys.minute), `subject ${JSON.stringify(subject)}: ${keys.minute}`)
        seen.add(keys.minute)
      }
      assert.equal(seen.size, subjects.length)
      assert.deepEqual(redisKeys('rl:', '203.0.113.9'), { minute: 'rl:{203.0.113.9}:m', day: 'rl:{203.0.113.9}:d', strikes: 'rl:{203.0.113.9}:s' })
    })

    test('windows are hashes {w, c} that expire shortly after their window; strikes expire after theirs', async (t) => {
      const { limiter, client, prefix } = await openRedis(t)
      const limits = { perMinute: 1, perDay: 5 }
      const decision = await limiter.consume('ttl', limits)
      await limiter.consume('ttl', limits, { strikeWindowSeconds: 30 })
      const keys = redisKeys(prefix, 'ttl')
      const nowSec = Math.floor(decision.now / 1000)
      assert.deepEqual(await client.hgetall(keys.minute), { w: String(Math.floor(nowSec / 60)), c: '1' })
      assert.deepEqual(await client.hgetall(keys.day), { w: String(Math.floor(nowSec / 86_400)), c: '1' })
      const minuteTtl = await client.ttl(keys.minute)
      const dayTtl = await client.ttl(keys.day)
      const strikeTtl = await client.pttl(keys.strikes)
      assert.ok(minuteTtl > 0 && minuteTtl <= decision.windows[0].resetAt - nowSec + 5, `minute TTL ${minuteTtl}`)
      assert.ok(dayTtl > 0 && dayTtl <= decision.windows[1].resetAt - nowSec + 5, `day TTL ${dayTtl}`)
      assert.ok(strikeTtl > 25_000 && strikeTtl <= 35_000, `strike PTTL ${strikeTtl}`)
    })

    test('two instances on their own connections share the limits exactly', async (t) => {
      const first = await openRedis(t)
      const second = await openRedis(t)
      const other = new RedisLimiter({ client: second.client, prefix: first.prefix })
      const limits = { perMinute: 1000, perDay: 7 }
      const decisions = await Promise.all(Array.from({ length: 21 }, (_, i) => (i % 2 === 0 ? first.limiter : other).consume('shared', limits)))
      assert.equal(decisions.filter((d) => d.allowed).length, 7)
    })

    test('uses Redis TIME, not the instance clock', async (t) => {
      const { limiter, client } = await openRedis(t)
      const [sec, usec] = await client.time()
      const decision = await limiter.peek('time', { perMinute: 1, perDay: 1 })
      const redisNow = Number(sec) * 1000 + Math.floor(Number(usec) / 1000)
      assert.ok(decision.now >= redisNow && decision.now - redisNow < 1000, `${decision.now} vs ${redisNow}`)
    })

    test('close leaves the caller\'s client connected', async (t) => {
      const { limiter, client } = await openRedis(t)
      await limiter.close()
      assert.equal(client.status, 'ready')
      assert.equal(await client.ping(), 'PONG')
    })
  })
}
