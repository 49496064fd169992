/**
 * The RateLimiter contract against the in-memory limiter (own clock per test) and the Redis limiter (the real
 * local Redis, own key prefix per test, time moved through the offset), plus what only each backend has:
 * the memory sweep, and Redis key layout, expiry and sharing between instances.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, test, type TestContext } from 'node:test'
import type { Cluster, Redis } from 'ioredis'
import { MemoryLimiter } from '../src/ratelimit/memory.js'
import { sharedRedis } from '../src/redis/connect.js'
import { RedisLimiter, redisKeys } from '../src/ratelimit/redis.js'
import { clusterForSuite, requireRedisServer } from './helpers/redis-servers.js'
import { ip, key, limiterContract, type OpenedLimiter } from './ratelimit/contract.js'
import { requireRedis, tempRedis } from './ratelimit/redis-env.js'

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
    for (let i = 0; i < 1000; i++) await limiter.consume(ip(`${i}`), limits)
    const longStrikes = { strikes: { windowSeconds: 2 * 86_400, threshold: 100 } }
    await limiter.consume(key('banned'), limits, longStrikes)
    await limiter.consume(key('banned'), limits, longStrikes)
    // A strike with a long strike window is kept past the day.
    assert.equal((await limiter.consume(key('banned'), limits, longStrikes)).strikes, 1)
    assert.equal(limiter.size, 1001)

    advance(86_400)
    await limiter.peek(key('someone'), limits)
    assert.equal(limiter.size, 1, 'only the subject with live strikes is left')
    assert.equal((await limiter.consume(key('banned'), limits)).allowed, true, 'a new day')

    advance(86_400 + 120)
    await limiter.consume(key('late'), limits)
    assert.equal(limiter.size, 1, 'strikes expired too, only the fresh subject is left')
  })

  test('peek on an unknown subject stores nothing', async () => {
    const { limiter } = await openMemory()
    await limiter.peek(key('ghost'), { perMinute: 1, perDay: 1 })
    assert.equal(limiter.size, 0)
  })

  test('when more client addresses arrive than maxSubjects, then memory stays at the cap and the least recently seen go first', async () => {
    const clock = { now: START }
    const limiter = new MemoryLimiter({ clock: () => clock.now, maxSubjects: 1000 })
    const limits = { perMinute: 1, perDay: 10 }
    await limiter.consume(ip('2001:db8::old'), limits)
    await limiter.consume(ip('2001:db8::busy'), limits)
    for (let i = 0; i < 5000; i++) {
      await limiter.consume(ip(`2001:db8::${i.toString(16)}`), limits)
      // A client seen again and again stays (least recently used, not first seen, goes).
      if (i % 500 === 0) assert.equal((await limiter.consume(ip('2001:db8::busy'), limits)).allowed, false)
    }
    assert.equal(limiter.size, 1000)
    assert.equal((await limiter.consume(ip('2001:db8::old'), limits)).allowed, true, 'evicted: it starts over with fresh windows')
    assert.equal((await limiter.consume(ip('2001:db8::busy'), limits)).allowed, false, 'kept: still counted')
    assert.equal((await limiter.consume(ip('2001:db8::1387'), limits)).allowed, false, 'the most recent ones are still counted')
  })

  test('when subjects at either end of the order are reset, then eviction still takes the least recently seen', async () => {
    const clock = { now: START }
    const limiter = new MemoryLimiter({ clock: () => clock.now, maxSubjects: 3 })
    const limits = { perMinute: 1, perDay: 10 }
    for (const id of ['a', 'b', 'c']) await limiter.consume(ip(`2001:db8::${id}`), limits)
    await limiter.reset(ip('2001:db8::c')) // the most recently seen
    await limiter.reset(ip('2001:db8::a')) // the least recently seen
    await limiter.consume(ip('2001:db8::d'), limits)
    assert.equal((await limiter.consume(ip('2001:db8::b'), limits)).allowed, false, 'b is still counted, and now seen last')
    await limiter.consume(ip('2001:db8::e'), limits)
    await limiter.consume(ip('2001:db8::f'), limits) // the room is full: d, the least recently seen, goes
    assert.equal(limiter.size, 3)
    assert.equal((await limiter.consume(ip('2001:db8::b'), limits)).allowed, false, 'b kept')
    assert.equal((await limiter.consume(ip('2001:db8::e'), limits)).allowed, false, 'e kept')
    assert.equal((await limiter.consume(ip('2001:db8::d'), limits)).allowed, true, 'd evicted: it starts over')
  })

  test('when a flood of client addresses fills the cap, then no key loses its windows or its strikes', async () => {
    const clock = { now: START }
    const limiter = new MemoryLimiter({ clock: () => clock.now, maxSubjects: 1000 })
    const limits = { perMinute: 2, perDay: 10 }
    const strikes = { strikes: { windowSeconds: 600, threshold: 3 } }
    for (let i = 0; i < 5; i++) await limiter.consume(key('spent'), limits, strikes)
    for (let i = 0; i < 5000; i++) await limiter.consume(ip(`198.51.100.${i % 256}-${i}`), limits)
    const after = await limiter.consume(key('spent'), limits, strikes)
    assert.equal(after.allowed, false, 'the key\'s minute is still spent')
    assert.equal(after.strikes, 3, 'and its strikes are still there')
  })

  test('uses Date.now by default', async () => {
    const limiter = new MemoryLimiter()
    const before = Date.now()
    const decision = await limiter.consume(key('x'), { perMinute: 1, perDay: 1 })
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
  const { client, prefix } = await tempRedis(t)
  let offset = 0
  const { limiter } = sharedRedis(client, prefix, { timeOffsetSeconds: () => offset })
  return { limiter, client, prefix, advance: (seconds) => { offset += seconds } }
}

/** The Redis Cluster hash tag of a key: what lies between the first '{' and the next '}', if not empty. */
function clusterHashTag (name: string): string {
  const open = name.indexOf('{')
  if (open === -1) return name
  const close = name.indexOf('}', open + 1)
  if (close === -1 || close === open + 1) return name
  return name.slice(open + 1, close)
}

if (await requireRedis('Redis limiter tests')) {
  limiterContract('RedisLimiter', openRedis)

  describe('RedisLimiter specifics', () => {
    test('all keys of a subject share one Cluster hash tag, and distinct subjects get distinct keys', () => {
      const subjects = ['', 'a', '{a}', 'a}', '}', '{', '{}', '}{', '%', '%7D', 'x}{y', '2001:db8::1', 'k:{1}:m'].flatMap((id) => [key(id), ip(id)])
      const seen = new Set<string>()
      for (const subject of subjects) {
        const keys = redisKeys('rl:', subject)
        const tags = [keys.minute, keys.day, keys.strikes].map(clusterHashTag)
        assert.ok(tags.every((tag) => tag === tags[0] && tag !== keys.minute), `subject ${JSON.stringify(subject)}: ${keys.minute}`)
        seen.add(keys.minute)
      }
      assert.equal(seen.size, subjects.length)
      // The layout of the keys written before subjects had kinds: a rolling upgrade keeps every count.
      assert.deepEqual(redisKeys('rl:', ip('203.0.113.9')), { minute: 'rl:{ip:203.0.113.9}:m', day: 'rl:{ip:203.0.113.9}:d', strikes: 'rl:{ip:203.0.113.9}:s' })
      assert.deepEqual(redisKeys('rl:', key('key_0123')).minute, 'rl:{key:key_0123}:m')
    })

    test('windows are hashes {w, c} that expire shortly after their window; strikes expire after theirs', async (t) => {
      const { limiter, client, prefix } = await openRedis(t)
      const limits = { perMinute: 1, perDay: 5 }
      const decision = await limiter.consume(key('ttl'), limits)
      const refused = await limiter.consume(key('ttl'), limits, { strikes: { windowSeconds: 30, threshold: 10 } })
      const keys = redisKeys(prefix, key('ttl'))
      const nowSec = Math.floor(decision.now / 1000)
      assert.deepEqual(await client.hgetall(keys.minute), { w: String(Math.floor(nowSec / 60)), c: '1' })
      assert.deepEqual(await client.hgetall(keys.day), { w: String(Math.floor(nowSec / 86_400)), c: '1' })
      const minuteTtl = await client.ttl(keys.minute)
      const dayTtl = await client.ttl(keys.day)
      const strikeTtl = await client.pttl(keys.strikes)
      assert.ok(minuteTtl > 0 && minuteTtl <= decision.windows[0].resetAt - nowSec + 5, `minute TTL ${minuteTtl}`)
      assert.ok(dayTtl > 0 && dayTtl <= decision.windows[1].resetAt - nowSec + 5, `day TTL ${dayTtl}`)
      // Kept until both the strike window and the retry time the refusal named (the minute's end) have passed.
      const retryIn = refused.windows[0].resetAt * 1000 - refused.now
      assert.ok(strikeTtl > Math.max(30_000, retryIn) && strikeTtl <= Math.max(30_000, retryIn) + 5_000, `strike PTTL ${strikeTtl}`)
    })

    test('a limiter on a connection of its own (the CLI\'s) peeks the windows an instance counted, and counts nothing', async (t) => {
      const instance = await openRedis(t)
      const reader = new RedisLimiter({ client: (await tempRedis(t)).client, prefix: instance.prefix })
      const limits = { perMinute: 50, perDay: 500 }
      for (let i = 0; i < 4; i++) await instance.limiter.consume(key('watched'), limits)
      for (let i = 0; i < 3; i++) {
        const seen = await reader.peek(key('watched'), limits)
        assert.deepEqual([seen.windows[0].remaining, seen.windows[1].remaining], [46, 496])
      }
      assert.equal((await instance.limiter.consume(key('watched'), limits)).windows[1].remaining, 495)
    })

    test('two instances on their own connections share the limits exactly', async (t) => {
      const first = await openRedis(t)
      const second = await openRedis(t)
      const other = new RedisLimiter({ client: second.client, prefix: first.prefix })
      const limits = { perMinute: 1000, perDay: 7 }
      const decisions = await Promise.all(Array.from({ length: 21 }, (_, i) => (i % 2 === 0 ? first.limiter : other).consume(key('shared'), limits)))
      assert.equal(decisions.filter((d) => d.allowed).length, 7)
    })

    test('uses Redis TIME, not the instance clock', async (t) => {
      const { limiter, client } = await openRedis(t)
      const [sec, usec] = await client.time()
      const decision = await limiter.peek(key('time'), { perMinute: 1, perDay: 1 })
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

if (await requireRedisServer('Redis Cluster limiter tests')) {
  describe('RedisLimiter on a Redis Cluster of three primaries', () => {
    const { client: clusterClient } = clusterForSuite()

    async function openCluster (): Promise<OpenedLimiter & { limiter: RedisLimiter, client: Cluster, prefix: string }> {
      const client = await clusterClient()
      const prefix = `test:${randomUUID()}:`
      let offset = 0
      return { limiter: sharedRedis(client, prefix, { timeOffsetSeconds: () => offset }).limiter, client, prefix, advance: (seconds) => { offset += seconds } }
    }

    limiterContract('RedisLimiter (Cluster)', openCluster)

    test('subjects whose keys live on every node are each decided in one slot, with no cross-slot error', async () => {
      const { limiter, client, prefix } = await openCluster()
      const nodesHolding = new Set<string>()
      for (let i = 0; i < 60; i++) {
        const subject = key(`spread-${i}`)
        const decision = await limiter.consume(subject, { perMinute: 5, perDay: 5 }, { strikes: { windowSeconds: 60, threshold: 3 } })
        assert.equal(decision.allowed, true)
        const slot = await client.cluster('KEYSLOT', redisKeys(prefix, subject).minute) as number
        const owner = (await client.cluster('SLOTS') as unknown as Array<[number, number, [string, number]]>).find(([from, to]) => slot >= from && slot <= to)
        nodesHolding.add(String(owner?.[2][1]))
      }
      assert.equal(nodesHolding.size, 3, 'the subjects are spread over all three primaries')
    })
  })
}
