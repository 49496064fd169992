/**
 * `npm run bench`: the service against a bare node:http ceiling, on this machine, in one run. See
 * bench/README.md for the scenarios and the knobs. Every process, database and Redis key it creates is
 * removed again, also when a scenario fails or the run is interrupted.
 *
 * This runner only reads the settings, runs the wanted scenarios (bench/scenarios/, in the order below) and
 * reports them (bench/report.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { finish, summary, table } from './report.js'
import { emptyResult, log, type RunContext, type Scenario, type ScenarioResult } from './scenario.js'
import { costsPg2x } from './scenarios/costs-pg-2x.js'
import { floorFastify, floorFields, floorGate } from './scenarios/floor.js'
import { get100kMemory } from './scenarios/get-100k-memory.js'
import { get10 } from './scenarios/get-10.js'
import { get10k } from './scenarios/get-10k.js'
import { get10Pg2x } from './scenarios/get-10-pg-2x.js'
import { get10Redis } from './scenarios/get-10-redis.js'
import { holds } from './scenarios/holds.js'
import { latency } from './scenarios/latency.js'
import { listing1m } from './scenarios/listing-1m.js'
import { patch } from './scenarios/patch.js'
import { peer } from './scenarios/peer.js'
import { tracing } from './scenarios/tracing.js'
import { webhooks } from './scenarios/webhooks.js'
import { openWorkDir } from './servers.js'
import { settings } from './settings.js'
import { Cleanup, cleanupOnSignals, PINNING, ROOT } from './support.js'

/** Every scenario, in the order they run: get-10 first, whose ceiling (and peer rounds) later ones use. */
const SCENARIOS: Scenario[] = [
  get10, get10k, get100kMemory, patch, holds, peer, floorFastify, floorFields, floorGate, listing1m, get10Redis, get10Pg2x, costsPg2x, webhooks, tracing,
  latency
]

const RESULTS = join(ROOT, 'bench/results')

async function main (): Promise<number> {
  cleanupOnSignals()
  const startedAt = new Date()
  if (settings.loadGenerator !== 'wrk' && settings.loadGenerator !== 'autocannon') {
    console.error(`bench: BENCH_LOADGEN must be wrk or autocannon, got "${settings.loadGenerator}"`)
    return 2
  }
  log(`${settings.loadGenerator}, ${settings.rounds} round(s) of ${settings.duration} s, warm-up ${settings.warmup} s, ${settings.connections} connections; ` +
    (PINNING === null ? 'not pinned (no taskset or one core): numbers are noisier' : `servers on core ${PINNING.server}, load generator on core ${PINNING.load}`))
  const results: ScenarioResult[] = []
  await Cleanup.scope(async (cleanup) => {
    openWorkDir(cleanup)
    const wanted = (id: string): boolean => settings.only.length === 0 || settings.only.includes(id)
    const context: RunContext = {
      wanted,
      get10Ceiling: () => results.find((r) => r.id === 'get-10')?.ceiling ?? null,
      peerRounds: null
    }
    for (const scenario of SCENARIOS) {
      if (!wanted(scenario.id)) continue
      const result = emptyResult(scenario.id, scenario.title, scenario.target)
      log(`${scenario.id}: ${scenario.title}`)
      try {
        await scenario.run(result, context)
      } catch (error) {
        result.status = 'failed'
        result.notes.push(`failed: ${(error as Error).message.slice(0, 2000)}`)
        log(`${scenario.id} failed: ${(error as Error).message}`)
      }
      results.push(finish(result))
    }
  })
  console.log(table(results))
  mkdirSync(RESULTS, { recursive: true })
  const file = join(RESULTS, 'latest.json')
  // Three decimals are more than the run-to-run noise allows; more would only be clutter.
  const rounded = (_key: string, value: unknown): unknown => typeof value === 'number' && !Number.isInteger(value) ? Math.round(value * 1000) / 1000 : value
  writeFileSync(file, JSON.stringify(summary(results, startedAt), rounded, 2) + '\n')
  console.log(`\nSummary written to ${file}`)
  return results.some((r) => r.status === 'failed') ? 1 : 0
}

process.exitCode = await main()
