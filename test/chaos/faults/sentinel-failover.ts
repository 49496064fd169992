/**
 * The Redis primary killed under Sentinel: the Sentinel promotes the replica, the instances (REDIS_MODE=sentinel,
 * RATE_LIMIT_ON_REDIS_DOWN=deny, so that the outage shows as 503s) follow it. The promotion is the repair, done
 * by the Sentinel; measured too: from the kill until the limiter of every instance answers from Redis again (/readyz).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { deploy, untilReady } from '../deployment.js'
import { type Fault, seconds, underLoad } from '../fault.js'
import { startSentinel } from '../../helpers/redis-servers.js'
import { firstMissing, missingPostgres, missingRedisServer, privateDatabase } from '../resources.js'

const TIMEOUT_MS = 30_000

export const sentinelPrimaryKilled: Fault = {
  id: 'sentinel',
  name: 'Redis primary killed under Sentinel',
  missing: () => firstMissing(missingRedisServer, missingPostgres),
  run: async (cleanup) => {
    const redis = await startSentinel((step) => cleanup.defer(async () => { await step() }))
    const deployment = await deploy(cleanup, {
      DATABASE_URL: await privateDatabase(cleanup),
      REDIS_MODE: 'sentinel',
      REDIS_SENTINELS: `127.0.0.1:${redis.sentinel.port}`,
      REDIS_SENTINEL_NAME: redis.name,
      RATE_LIMIT_ON_REDIS_DOWN: 'deny'
    }, 2)
    const before = await untilReady(deployment.bases, 'ready redis', TIMEOUT_MS)
    if (before === null) throw new Error('the instances did not count on Redis before the fault')
    return underLoad(deployment, async () => {
      const injectedAt = Date.now()
      await redis.primary.kill()
      let promotedAt: number | null = null
      while (promotedAt === null && Date.now() < injectedAt + TIMEOUT_MS) {
        if (await redis.primaryPort().catch(() => redis.primary.port) === redis.replica.port) promotedAt = Date.now()
        else await sleep(100)
      }
      const backAt = await untilReady(deployment.bases, 'ready redis', TIMEOUT_MS)
      const problems = [
        ...(promotedAt === null ? [`the Sentinel did not promote the replica within ${TIMEOUT_MS / 1000} s`] : []),
        ...(backAt === null ? [`the limiter was not back on Redis on every instance within ${TIMEOUT_MS / 1000} s`] : [])
      ]
      const notes = [
        `replica promoted after ${promotedAt === null ? 'never' : seconds(promotedAt - injectedAt)}`,
        `limiter on Redis again after ${backAt === null ? 'never' : seconds(backAt - injectedAt)}`
      ]
      return { injectedAt, repairedAt: promotedAt ?? Date.now(), recoverFrom: 'repair', problems, notes }
    })
  }
}
