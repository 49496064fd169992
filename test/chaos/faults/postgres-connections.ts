/** Every connection of the instances to PostgreSQL terminated (pg_terminate_backend), a few times, under load. */
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { deploy } from '../deployment.js'
import { type Fault, underLoad } from '../fault.js'
import { databaseName, firstMissing, missingPostgres, missingRedis, privateDatabase, privatePrefix, REDIS_URL } from '../resources.js'
import { POSTGRES_URL } from '../../helpers/postgres.js'

const ROUNDS = 5
const BETWEEN_MS = 1000

export const postgresConnectionsKilled: Fault = {
  id: 'postgres-connections',
  name: 'PostgreSQL connections killed',
  missing: () => firstMissing(missingPostgres, missingRedis),
  run: async (cleanup) => {
    const url = await privateDatabase(cleanup)
    const deployment = await deploy(cleanup, { DATABASE_URL: url, REDIS_URL, REDIS_KEY_PREFIX: privatePrefix(cleanup) }, 2)
    const admin = new pg.Client({ connectionString: POSTGRES_URL })
    await admin.connect()
    cleanup.defer(() => admin.end())
    return underLoad(deployment, async () => {
      const injectedAt = Date.now()
      let terminated = 0
      let last = injectedAt
      for (let round = 0; round < ROUNDS; round++) {
        if (round > 0) await sleep(BETWEEN_MS)
        last = Date.now()
        const { rows } = await admin.query<{ ended: boolean }>(
          'SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [databaseName(url)])
        terminated += rows.filter((row) => row.ended).length
      }
      // Each termination is over as it happens: recovery counts from the last one.
      return { injectedAt, repairedAt: last, recoverFrom: 'repair', notes: [`${terminated} connections terminated in ${ROUNDS} rounds`] }
    })
  }
}
