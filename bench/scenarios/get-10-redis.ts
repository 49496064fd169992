/**
 * get-10-redis: get-10 with the rate-limit counters in Redis (REDIS_URL, a key prefix of its own, removed afterwards);
 * its ratio is against get-10's ceiling. A reference: no target.
 */
import { join } from 'node:path'
import { cleanRedis, redisReachable } from '../../test/ratelimit/redis-env.js'
import { serviceOnly } from '../measure.js'
import { hex, type Scenario, type ScenarioResult, type Side } from '../scenario.js'
import { prepareStore, scenarioDir, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup } from '../support.js'

export const get10Redis: Scenario = {
  id: 'get-10-redis',
  title: 'GET /v1/inventory, 10 entries, Redis limiter',
  target: null,
  run: (result, context) => redisScenario(result, context.get10Ceiling())
}

/** get-10-redis: GET (10 entries) with the rate-limit counters in Redis. */
async function redisScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  if (!await redisReachable(settings.redisUrl)) {
    result.status = 'skipped'
    result.notes.push(`Redis not reachable at ${settings.redisUrl} (BENCH_REDIS_URL)`)
    return
  }
  await Cleanup.scope(async (cleanup) => {
    const prefix = `petstore:bench:${hex()}:`
    // Deferred first, so it runs after the server has stopped writing.
    cleanup.defer(() => cleanRedis(prefix, settings.redisUrl))
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db'), REDIS_URL: settings.redisUrl, REDIS_KEY_PREFIX: prefix }
    const service = await startService('service', env, await prepareStore(env, 10), cleanup)
    await serviceOnly(result, service, ceiling)
  })
}
