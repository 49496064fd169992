/**
 * get-100k-memory: the listing of 100,000 entries (~4.6 MB), one shorter run: the server's resident set before and
 * after load, and its peak (VmHWM). Target: it stays bounded.
 */
import { join } from 'node:path'
import { describeRun, measure, side } from '../measure.js'
import { fmtMb, log, round1, type Scenario, type ScenarioResult } from '../scenario.js'
import { prepareStore, scenarioDir, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, memoryMb } from '../support.js'

export const get100kMemory: Scenario = {
  id: 'get-100k-memory',
  title: 'GET /v1/inventory, 100,000 entries (memory check)',
  target: null,
  run: memoryCheck
}

/** get-100k-memory: 100,000 entries, memory only: resident set before and after one shorter run. */
async function memoryCheck (result: ScenarioResult): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const service = await startService('service', env, await prepareStore(env, 100_000), cleanup)
    const rssBeforeMb = memoryMb(service.proc.pid, 'VmRSS')
    const run = await measure(service, Math.min(settings.duration, 3))
    const rssAfterMb = memoryMb(service.proc.pid, 'VmRSS')
    result.peakRssMb = memoryMb(service.proc.pid, 'VmHWM')
    log(`${result.id}: ${describeRun(run)}`)
    // Read after the RSS figures, so that this one request is not part of them.
    const res = await fetch(service.url, { headers: service.headers })
    const responseMb = (await res.arrayBuffer()).byteLength / 1024 / 1024
    result.service = side([run])
    result.memory = { responseMb, rssBeforeMb, rssAfterMb }
    result.notes.push(`response ${round1(responseMb)} MB; RSS ${fmtMb(rssBeforeMb)} MB before load, ${fmtMb(rssAfterMb)} MB after, peak ${fmtMb(result.peakRssMb)} MB`)
  })
}
