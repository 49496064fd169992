/**
 * The SQLite instance's disk fills under load: its database on a small tmpfs, filled by a file written until ENOSPC,
 * held full for a few seconds, then the file removed. Writes must answer 503 with Retry-After meanwhile, reads go on,
 * writes resume.
 */
import { execFile } from 'node:child_process'
import { rmSync, statfsSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { deploy } from '../deployment.js'
import { type Fault, seconds, underLoad } from '../fault.js'
import { missingMount, smallDisk } from '../resources.js'

const DISK_SIZE = '32m'
const FULL_MS = 4000
const run = promisify(execFile)

export const diskFull: Fault = {
  id: 'disk',
  name: 'SQLite disk full',
  missing: async () => missingMount(),
  run: async (cleanup) => {
    const disk = smallDisk(cleanup, DISK_SIZE)
    if (disk === null) throw new Error(`could not mount a ${DISK_SIZE} tmpfs`)
    const deployment = await deploy(cleanup, { DATABASE_URL: join(disk, 'petstore.db') }, 1)
    const filler = join(disk, 'filler')
    return underLoad(deployment, async (traffic) => {
      // dd stops at ENOSPC with a non-zero exit: that is the point. The fault counts from the moment the disk is full.
      await run('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { timeout: 30_000 }).catch(() => {})
      const injectedAt = Date.now()
      const free = statfsSync(disk).bavail
      await sleep(FULL_MS)
      rmSync(filler)
      const repairedAt = Date.now()
      const during = (times: number[]): number => times.filter((at) => at >= injectedAt && at <= repairedAt).length
      const firstRefusal = traffic.unavailable.find((at) => at >= injectedAt)
      const problems: string[] = []
      if (during(traffic.unavailable) - during(traffic.unavailableReads) === 0) problems.push('no write met the full disk (no 503 while it was full)')
      if (during(traffic.reads) === 0) problems.push('no read answered while the disk was full')
      if (during(traffic.unavailableReads) > 0) problems.push(`${during(traffic.unavailableReads)} reads answered 503 while the disk was full`)
      return {
        injectedAt,
        repairedAt,
        recoverFrom: 'repair',
        problems,
        notes: [
          `${free} blocks free once filled`,
          `first 503 ${firstRefusal === undefined ? 'never' : seconds(firstRefusal - injectedAt)} after the disk was full`
        ]
      }
    })
  }
}
