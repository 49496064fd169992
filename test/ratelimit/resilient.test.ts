/**
 * The resilient limiter through real outages: Redis absent at boot (a closed port), and Redis vanishing and
 * coming back mid-run (a TCP proxy in front of the real Redis that the test kills and restarts).
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, test, type TestContext } from 'node:test'
import { Redis } from 'ioredis'
import { MemoryLimiter } from '../../src/ratelimit/memory.js'
import { RedisLimiter, createRedisClient } from '../../src/ratelimit/redis.js'
import { ResilientLimiter, type LimiterLogger } from '../../src/ratelimit/resilient.js'
import type { Decision } from '../../src/ratelimit/types.js'
import { freePort } from '../helpers/net.js'
import { KillableProxy } from '../helpers/proxy.js'
import { waitFor, WAIT_TIMEOUT_MS } from '../helpers/wait.js'
import { key } from './contract.js'
import { REDIS_URL, deleteKeys, requireRedis, waitReady } from './redis-env.js'

/**
 * Each call must answer within this, fallback included: one command timeout (100 ms) and a loaded machine's delays,
 * far below what waiting on a reconnect would take (a connect timeout, seconds).
 */
const MAX_CALL_MS = 1000

interface RecordingLogger extends LimiterLogger {
  warns: Array<{ obj: object, msg: string }>
  infos: Array<{ obj: object, msg: string }>
}

function recordingLogger (): RecordingLogger {
  const warns: RecordingLogger['warns'] = []
  const infos: RecordingLogger['infos'] = []
  return { warns, infos, warn: (obj, msg) => { warns.push({ obj, msg }) }, info: (obj, msg) => { infos.push({ obj, msg }) } }
}

async function timed<T> (fn: () => Promise<T>): Promise<T> {
  const started = performance.now()
  const result = await fn()
  const elapsed = performance.now() - started
  assert.ok(elapsed < MAX_CALL_MS, `took ${elapsed.toFixed(0)} ms`)
  return result
}

async function until (condition: () => boolean, what: string): Promise<void> {
  await waitFor(what, condition)
}

/**
 * Resolves once the client has tried to reconnect `times` more times: the window in which a repeated warning would
 * show, counted in attempts rather than guessed in milliseconds (a loaded machine makes fewer in a given time).
 */
async function reconnects (client: Redis, times: number): Promise<void> {
  let seen = 0
  const count = (): void => { seen++ }
  client.on('reconnecting', count)
  try {
    await until(() => seen >= times, `${times} reconnect attempts`)
  } finally {
    client.off('reconnecting', count)
  }
}

const allowedCount = (decisions: Decision[]) => decisions.filter((d) => d.allowed).length

function assertDecision (decision: Decision): void {
  assert.equal(decision.windows.length, 2)
  assert.equal(decision.windows[0].windowSeconds, 60)
  assert.equal(decision.windows[1].windowSeconds, 86_400)
  assert.ok(Number.isInteger(decision.windows[0].resetAt) && decision.windows[0].resetAt % 60 === 0)
}

describe('ResilientLimiter with Redis down at boot', () => {
  test('answers from memory, exactly per process, fast and without throwing; warns once', async (t) => {
    const port = await freePort()
    const client = createRedisClient(`redis://127.0.0.1:${port}`, 100)
    t.after(() => client.disconnect())
    const logger = recordingLogger()
    // A fixed clock: the test takes over a second and must not see a minute window roll over.
    const now = Date.parse('2026-11-22T12:00:30Z')
    const limiter = new ResilientLimiter({ redis: new RedisLimiter({ client }), memory: new MemoryLimiter({ clock: () => now }), logger })
    t.after(() => limiter.close())

    const limits = { perMinute: 5, perDay: 100 }
    const decisions = await timed(() => Promise.all(Array.from({ length: 15 }, () => limiter.consume(key('boot'), limits))))
    assert.equal(allowedCount(decisions), 5)
    for (const decision of decisions) assertDecision(decision)
    assert.equal(limiter.backend, 'memory-fallback')

    await until(() => logger.warns.length > 0, 'the outage warning')
    // Reconnect attempts (every <= 1 s) and more requests do not repeat it.
    await reconnects(client, 2)
    const refused = await timed(() => limiter.consume(key('boot'), limits))
    assert.equal(refused.allowed, false)
    assert.equal(refused.windows[0].remaining, 0)
    assert.equal((await timed(() => limiter.peek(key('boot'), limits))).windows[1].remaining, 95)
    await timed(() => limiter.reset(key('boot')))
    assert.equal((await timed(() => limiter.consume(key('boot'), limits))).allowed, true)
    assert.equal(logger.warns.length, 1)
    assert.equal(logger.infos.length, 0)
  })
})


if (await requireRedis('ResilientLimiter outage tests')) {
  describe('ResilientLimiter through a mid-run Redis outage', () => {
    async function setup (t: TestContext, retryAfterMs = 1000) {
      const target = new URL(REDIS_URL)
      const proxy = new KillableProxy({ host: target.hostname, port: Number(target.port || 6379) })
      await proxy.start()
      t.after(() => proxy.kill())

      // The direct client checks what reached Redis and cleans up; the limiter talks through the proxy.
      const direct = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
      direct.on('error', () => {})
      const prefix = `test:${randomUUID()}:`
      t.after(async () => {
        await deleteKeys(direct, prefix)
        await direct.quit()
      })
      await waitReady(direct)

      const proxied = new URL(REDIS_URL)
      proxied.hostname = '127.0.0.1'
      proxied.port = String(proxy.port)
      const client = createRedisClient(proxied.toString(), 100)
      t.after(() => client.disconnect())
      await waitReady(client)
      // Counts what the limiter asks of Redis (a request answered from memory asks nothing).
      const asked = { consume: 0 }
      class Counted extends RedisLimiter {
        override async consume (...args: Parameters<RedisLimiter['consume']>): Promise<Decision> {
          asked.consume++
          return await super.consume(...args)
        }
      }

      // Start at a fresh Redis minute so no window rolls over during the test's few seconds.
      const [sec, usec] = await direct.time()
      const nowMs = Number(sec) * 1000 + Math.floor(Number(usec) / 1000)
      const offset = (60_000 - (nowMs % 60_000)) / 1000
      const logger = recordingLogger()
      const redis = new Counted({ client, prefix, timeOffsetSeconds: () => offset })
      const limiter = new ResilientLimiter({ redis, logger, retryAfterMs })
      t.after(() => limiter.close())
      return { proxy, direct, prefix, limiter, logger, client, asked }
    }

    test('falls back to memory within the time budget, warns once, and returns to Redis by itself', async (t) => {
      const { proxy, direct, prefix, limiter, logger, client } = await setup(t)
      const limits = { perMinute: 50, perDay: 1000 }
      const redisCount = async () => Number(await direct.hget(`${prefix}{key:outage}:m`, 'c') ?? 0)

      assert.equal(limiter.backend, 'redis')
      for (let i = 0; i < 3; i++) assert.equal((await timed(() => limiter.consume(key('outage'), limits))).allowed, true)
      assert.equal(await redisCount(), 3, 'counted in Redis')

      await proxy.kill()
      for (let i = 0; i < 10; i++) {
        const decision = await timed(() => limiter.consume(key('outage'), limits))
        assert.equal(decision.allowed, true)
        assertDecision(decision)
      }
      assert.equal(limiter.backend, 'memory-fallback')
      // The fallback is exact within the process.
      const burst = await timed(() => Promise.all(Array.from({ length: 15 }, () => limiter.consume(key('fallback-burst'), { perMinute: 5, perDay: 100 }))))
      assert.equal(allowedCount(burst), 5)
      // Let a reconnect attempt or two fail: still one warning for the whole outage.
      await reconnects(client, 2)
      await timed(() => limiter.consume(key('outage'), limits))
      assert.equal(logger.warns.length, 1)
      assert.equal(logger.infos.length, 0)
      assert.equal(await redisCount(), 3, 'nothing reached Redis during the outage')

      await proxy.start()
      await until(() => limiter.backend === 'redis', 'the limiter to use Redis again')
      assert.equal(logger.infos.length, 1)
      const back = await timed(() => limiter.consume(key('outage'), limits))
      assert.equal(back.windows[0].remaining, 50 - 4, 'Redis counts resume where they were')
      assert.equal(await redisCount(), 4)
      assert.equal(logger.warns.length, 1)
    })

    test('a stalled connection costs one command timeout, then memory until a probe finds Redis answering', async (t) => {
      // A retry interval no loaded machine outlasts between the timeout and the five requests after it.
      const { proxy, limiter, logger, asked } = await setup(t, 5000)
      const limits = { perMinute: 50, perDay: 1000 }
      assert.equal((await timed(() => limiter.consume(key('stall'), limits))).allowed, true)
      assert.equal(limiter.backend, 'redis')

      proxy.stall()
      const started = performance.now()
      const first = await timed(() => limiter.consume(key('stall'), limits))
      assert.ok(performance.now() - started >= 90, 'waited for the command timeout')
      assertDecision(first)
      assert.equal(logger.warns.length, 1)
      assert.equal(limiter.backend, 'memory-fallback')
      // Within the retry interval the next requests do not wait on Redis at all: they do not ask it.
      const before = asked.consume
      for (let i = 0; i < 5; i++) await timed(() => limiter.consume(key('stall'), limits))
      assert.equal(asked.consume, before, 'answered from memory without asking Redis')

      proxy.resume()
      // The next probe comes once the retry interval has passed.
      const deadline = Date.now() + 5000 + WAIT_TIMEOUT_MS
      while (limiter.backend !== 'redis') {
        assert.ok(Date.now() < deadline, 'back on Redis after the retry interval')
        await timed(() => limiter.consume(key('stall'), limits))
        await sleep(50)
      }
      assert.equal(logger.infos.length, 1)
      assert.equal(logger.warns.length, 1)
    })
  })
}
