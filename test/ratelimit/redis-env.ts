/**
 * The real Redis the Redis tests run against, and the rule for when it is missing: in CI (CI=true) the Redis
 * tests fail, so a broken service container cannot pass as green; locally they are skipped with a message.
 */
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import type { TestContext } from 'node:test'
import { Redis } from 'ioredis'
import { requireService } from '../helpers/services.js'

export const REDIS_URL = process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379'

/** True when Redis answers PING within a few seconds (generous: the test machine may be busy). */
export async function redisReachable (url: string = REDIS_URL): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true, connectTimeout: 5000, commandTimeout: 5000, maxRetriesPerRequest: 0, retryStrategy: () => null
  })
  client.on('error', () => {})
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

/** See requireService: Redis tests fail in CI without Redis and are skipped elsewhere. */
export function requireRedis (what: string): Promise<boolean> {
  return requireService('Redis', REDIS_URL, () => redisReachable(), what, 'REDIS_TEST_URL')
}

/** Resolves once the client is ready (commands fail before that when the offline queue is off). */
export async function waitReady (client: Redis): Promise<void> {
  if (client.status === 'ready') return
  await once(client, 'ready')
}

/** Deletes every key under `prefix` (SCAN, never KEYS, so a shared Redis is not blocked). */
export async function deleteKeys (client: Redis, prefix: string): Promise<number> {
  let cursor = '0'
  let deleted = 0
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 200)
    cursor = next
    if (keys.length > 0) deleted += await client.del(...keys)
  } while (cursor !== '0')
  return deleted
}

/** Deletes every key under a prefix through a short-lived client (for tests and benchmarks that run servers). */
export async function cleanRedis (prefix: string, url: string = REDIS_URL): Promise<void> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  try {
    await client.connect()
    await deleteKeys(client, prefix)
  } finally {
    client.disconnect()
  }
}

/**
 * A ready client on the test Redis and a key prefix of the test's own; after the test, every key under the
 * prefix is deleted and the client quit.
 */
export async function tempRedis (t: TestContext): Promise<{ client: Redis, prefix: string }> {
  const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, connectTimeout: 2000 })
  client.on('error', () => {})
  const prefix = `test:${randomUUID()}:`
  t.after(async () => {
    await deleteKeys(client, prefix)
    await client.quit()
  })
  await waitReady(client)
  return { client, prefix }
}

/** A key prefix of the test's own in the shared Redis (REDIS_KEY_PREFIX), its keys deleted after the test. */
export function redisKeyPrefix (t: TestContext): string {
  const prefix = `test:${randomUUID()}:`
  t.after(() => cleanRedis(prefix))
  return prefix
}
