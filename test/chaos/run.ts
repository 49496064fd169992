/**
 * `npm run test:chaos`: faults injected while clients keep sending (PostgreSQL restarted, its connections killed,
 * the Redis primary killed under Sentinel, a Redis Cluster node killed, instances killed and stopped, a full disk
 * under SQLite). For each: nothing acknowledged is lost, no error answer but 503 with Retry-After, and the time to
 * recover; one summary line per fault, then `N passed, M failed`, exit 1 when any failed. CHAOS_FAULTS=id,... runs
 * some only. A fault whose tools are missing fails with CI=true and is skipped elsewhere. Not part of `npm test`.
 */
import { Cleanup, cleanupOnSignals } from '../../bench/support.js'
import type { Fault, Outcome } from './fault.js'
import { clusterNodeKilled } from './faults/cluster-node.js'
import { diskFull } from './faults/disk-full.js'
import { instancesKilled } from './faults/instances-killed.js'
import { postgresConnectionsKilled } from './faults/postgres-connections.js'
import { postgresRestarted } from './faults/postgres-restarted.js'
import { sentinelPrimaryKilled } from './faults/sentinel-failover.js'

const FAULTS: Fault[] = [postgresRestarted, postgresConnectionsKilled, sentinelPrimaryKilled, clusterNodeKilled, instancesKilled, diskFull]

const chosen = (process.env.CHAOS_FAULTS ?? '').split(',').map((id) => id.trim()).filter((id) => id !== '')
const unknown = chosen.filter((id) => !FAULTS.some((fault) => fault.id === id))
if (unknown.length > 0) {
  console.error(`CHAOS_FAULTS: unknown ${unknown.join(', ')}; the faults are ${FAULTS.map((fault) => fault.id).join(', ')}`)
  process.exit(2)
}

async function attempt (fault: Fault): Promise<Outcome | 'skipped'> {
  const missing = await fault.missing()
  if (missing !== null) {
    if (process.env.CI === 'true') return { ok: false, summary: `cannot run: ${missing} (CI=true requires every fault to run)` }
    console.log(`SKIP ${fault.name}: ${missing}`)
    return 'skipped'
  }
  try {
    return await Cleanup.scope((cleanup) => fault.run(cleanup))
  } catch (error) {
    console.log(`  ${(error as Error).stack ?? String(error)}`)
    return { ok: false, summary: `error: ${(error as Error).message ?? String(error)}`.split('\n')[0] as string }
  }
}

cleanupOnSignals()
let passed = 0
let failed = 0
let skipped = 0
for (const fault of FAULTS.filter((f) => chosen.length === 0 || chosen.includes(f.id))) {
  console.log(`\n== ${fault.name} (${fault.id})`)
  const outcome = await attempt(fault)
  if (outcome === 'skipped') {
    skipped++
    continue
  }
  if (outcome.ok) passed++
  else failed++
  console.log(`${outcome.ok ? 'PASS' : 'FAIL'} ${fault.name}: ${outcome.summary}`)
}
if (skipped > 0) console.log(`\n${skipped} skipped`)
console.log(`\n${passed} passed, ${failed} failed`)
process.exitCode = failed === 0 ? 0 : 1
