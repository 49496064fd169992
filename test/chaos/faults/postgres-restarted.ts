/** PostgreSQL stopped at once (pg_ctl stop -m immediate, as a crash) for a few seconds under load, then started again. */
import { setTimeout as sleep } from 'node:timers/promises'
import { deploy } from '../deployment.js'
import { type Fault, underLoad } from '../fault.js'
import { missingPostgresCluster, startPostgresCluster } from '../postgres-cluster.js'
import { firstMissing, missingRedis, privatePrefix, REDIS_URL } from '../resources.js'

const DOWN_MS = 4000

export const postgresRestarted: Fault = {
  id: 'postgres-restart',
  name: 'PostgreSQL restarted',
  missing: () => firstMissing(missingPostgresCluster, missingRedis),
  run: async (cleanup) => {
    const cluster = await startPostgresCluster(cleanup)
    const deployment = await deploy(cleanup, { DATABASE_URL: cluster.url, REDIS_URL, REDIS_KEY_PREFIX: privatePrefix(cleanup) }, 2)
    return underLoad(deployment, async () => {
      await cluster.stop('immediate')
      // pg_ctl -w returns once the server is gone: down from here on.
      const injectedAt = Date.now()
      await sleep(DOWN_MS)
      await cluster.start()
      // pg_ctl -w returns once the server accepts connections: repaired from here on.
      return { injectedAt, repairedAt: Date.now(), recoverFrom: 'repair' }
    })
  }
}
