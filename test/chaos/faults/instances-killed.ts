/**
 * Three instances on PostgreSQL + Redis: one SIGKILLed, then another SIGTERMed, while the clients keep sending
 * (they move to the survivors on a connection error). The SIGTERMed one must drain and exit 0.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { deploy } from '../deployment.js'
import { type Fault, seconds, underLoad } from '../fault.js'
import { firstMissing, missingPostgres, missingRedis, privateDatabase, privatePrefix, REDIS_URL } from '../resources.js'

const BETWEEN_MS = 3000
const EXIT_TIMEOUT_MS = 15_000

export const instancesKilled: Fault = {
  id: 'instances',
  name: 'Instances SIGKILLed and SIGTERMed',
  missing: () => firstMissing(missingPostgres, missingRedis),
  run: async (cleanup) => {
    const deployment = await deploy(cleanup, { DATABASE_URL: await privateDatabase(cleanup), REDIS_URL, REDIS_KEY_PREFIX: privatePrefix(cleanup) }, 3)
    const [killed, terminated] = deployment.instances
    if (killed === undefined || terminated === undefined) throw new Error('three instances expected')
    return underLoad(deployment, async () => {
      const injectedAt = Date.now()
      killed.proc.child.kill('SIGKILL')
      await sleep(BETWEEN_MS)
      const termAt = Date.now()
      terminated.proc.child.kill('SIGTERM')
      const timer = setTimeout(() => terminated.proc.child.kill('SIGKILL'), EXIT_TIMEOUT_MS)
      const { code, signal } = await terminated.proc.exited
      clearTimeout(timer)
      const exitedAt = Date.now()
      const problems: string[] = []
      if (code !== 0) problems.push(`the SIGTERMed instance did not exit 0 within ${EXIT_TIMEOUT_MS / 1000} s: ${signal ?? `exit ${code}`}`)
      // Its log (warn and above): a clean drain writes nothing at that level.
      const logged = terminated.proc.output().stdout.split('\n').filter((line) => /"level":(50|60)/.test(line))
      if (logged.length > 0) problems.push(`the SIGTERMed instance logged errors: ${logged.slice(0, 3).join(' | ').slice(0, 600)}`)
      return {
        injectedAt,
        repairedAt: exitedAt,
        recoverFrom: 'injection',
        ended: [killed.proc, terminated.proc],
        problems,
        notes: [`SIGTERMed instance exited ${signal ?? code} ${seconds(exitedAt - termAt)} after the signal`]
      }
    })
  }
}
