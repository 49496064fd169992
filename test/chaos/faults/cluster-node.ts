/**
 * One node of a Redis Cluster (three primaries, no replicas) killed for a few seconds under load, then started again
 * (it keeps its identity from nodes.conf). The instances count in process meanwhile (RATE_LIMIT_ON_REDIS_DOWN=local,
 * the default); measured too: how long after the restart every instance's limiter answers from Redis again.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { deploy, untilReady } from '../deployment.js'
import { type Fault, seconds, underLoad } from '../fault.js'
import { startRedisCluster } from '../../helpers/redis-servers.js'
import { firstMissing, missingPostgres, missingRedisServer, privateDatabase } from '../resources.js'

const DOWN_MS = 4000
const TIMEOUT_MS = 30_000

export const clusterNodeKilled: Fault = {
  id: 'cluster',
  name: 'Redis Cluster node killed',
  missing: () => firstMissing(missingRedisServer, missingPostgres),
  run: async (cleanup) => {
    const redis = await startRedisCluster((step) => cleanup.defer(async () => { await step() }))
    const deployment = await deploy(cleanup, {
      DATABASE_URL: await privateDatabase(cleanup),
      REDIS_MODE: 'cluster',
      REDIS_URL: redis.seeds,
      RATE_LIMIT_ON_REDIS_DOWN: 'local'
    }, 2)
    if (await untilReady(deployment.bases, 'ready redis', TIMEOUT_MS) === null) throw new Error('the instances did not count on Redis before the fault')
    const node = redis.nodes[0]
    if (node === undefined) throw new Error('no cluster node')
    return underLoad(deployment, async () => {
      const injectedAt = Date.now()
      await node.kill()
      await sleep(DOWN_MS)
      await node.restart()
      const repairedAt = Date.now()
      const backAt = await untilReady(deployment.bases, 'ready redis', TIMEOUT_MS)
      return {
        injectedAt,
        repairedAt,
        recoverFrom: 'repair',
        problems: backAt === null ? [`the limiter was not back on Redis on every instance within ${TIMEOUT_MS / 1000} s of the restart`] : [],
        notes: [`limiter on Redis again ${backAt === null ? 'never' : seconds(backAt - repairedAt)} after the restart`]
      }
    })
  }
}
