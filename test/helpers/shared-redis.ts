/**
 * The resilient limiter and the change signal over one Redis client, wired as the server wires them (src/server.ts):
 * the signal's counter is read in the limiter's calls, and a failed announcement counts as an outage of the client.
 */
import type { RedisChangeSignal } from '../../src/changes/redis.js'
import { sharedRedis } from '../../src/redis/connect.js'
import type { RedisClient } from '../../src/ratelimit/redis.js'
import { ResilientLimiter, type ResilientLimiterOptions } from '../../src/ratelimit/resilient.js'

export function resilientRedis (client: RedisClient, prefix: string, options: Omit<ResilientLimiterOptions, 'redis'>): { limiter: ResilientLimiter, changes: RedisChangeSignal } {
  const { limiter: redis, changes } = sharedRedis(client, prefix)
  const limiter = new ResilientLimiter({ ...options, redis })
  changes.reportTo(limiter)
  return { limiter, changes }
}
