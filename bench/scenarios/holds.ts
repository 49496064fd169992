/**
 * holds: holds placed and confirmed, one after the other on each connection (POST /v1/holds of one unit, then POST
 * /v1/holds/{id}/confirm, each with an Idempotency-Key of its own; the pet rotating over 100, each stocked with
 * 1,000,000,000 units so that nothing is refused), measured twice:
 * - on one instance on SQLite (durable commits, as patch): the scenario's row, requests/s (a hold and its
 *   confirmation are two) and its ratio against get-10's ceiling (GET), as patch's;
 * - on two instances sharing one fresh PostgreSQL database and Redis, one load generator per instance at once (half
 *   the connections each, as get-10-pg-2x): the check "PostgreSQL pair", requests/s summed and its ratio against the
 *   same ceiling, the worse p99.
 * Autocannon in both, whatever BENCH_LOADGEN says (bench/load.ts: wrk cannot confirm the hold a connection placed).
 * One key places every hold, as one storefront does: on PostgreSQL a quota's placements take turns (its caps are
 * counted under one advisory lock, src/store/selling/postgres.ts), which this measures too.
 * `details`: per store, requests/s, holds placed and confirmed per second (half the requests), p50, p99, ratio and
 * non-2xx. Target: none (a reference for issue 34's figures); any non-2xx answer flags it.
 */
import { join } from 'node:path'
import type { LoadResult } from '../load.js'
import { combine, describeRun, measure, serviceOnly, side } from '../measure.js'
import { log, type Scenario, type ScenarioResult, type Side, type Target } from '../scenario.js'
import { postgresReachable, prepareStore, scenarioDir, scratchScaleOut, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup } from '../support.js'
import { redisReachable } from '../../test/ratelimit/redis-env.js'

export const holds: Scenario = {
  id: 'holds',
  title: 'POST /v1/holds then /confirm, SQLite; and 2 instances on PostgreSQL + Redis',
  target: null,
  run: (result, context) => holdsScenario(result, context.get10Ceiling())
}

/** Pets the holds rotate over, and the units each is given: enough that no hold of a run is refused. */
const HOLD_PETS = 100
const STOCKED = 1_000_000_000

/** Gives every pet its units through the API (the import file's quantities are small). */
async function stockUp (target: Target): Promise<void> {
  const base = target.url.replace(/\/v1\/inventory$/, '')
  for (let petId = 1; petId <= HOLD_PETS; petId++) {
    const res = await fetch(`${base}/v1/inventory/${petId}`, {
      method: 'PATCH', headers: { ...target.headers, 'content-type': 'application/json' }, body: JSON.stringify({ quantity: STOCKED, reason: 'arrival' })
    })
    if (res.status !== 200) throw new Error(`stocking pet ${petId} answered ${res.status}: ${(await res.text()).slice(0, 200)}`)
  }
}

/** One store's figures for `details`. */
function figures (s: Side, ceiling: Side | null): Record<string, number | null> {
  return {
    rps: s.rps, holdsConfirmedPerSecond: s.rps / 2, p50: s.p50, p99: s.p99, ratio: ceiling === null ? null : s.rps / ceiling.rps, non2xx: s.non2xx + s.errors
  }
}

async function holdsScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const service = await startService('service', env, await prepareStore(env, HOLD_PETS), cleanup)
    await stockUp(service)
    await serviceOnly(result, service, ceiling, { holdPets: HOLD_PETS })
  })
  const sqlite = result.service as Side
  result.notes.push(`SQLite: ${Math.round(sqlite.rps / 2)} holds placed and confirmed per second (${Math.round(sqlite.rps)} requests/s, ` +
    `ratio against get-10's ceiling (GET)); autocannon, ${HOLD_PETS} pets`)
  result.details = { sqlite: figures(sqlite, ceiling) }

  if (!(await postgresReachable()) || !(await redisReachable(settings.redisUrl))) {
    result.notes.push(`PostgreSQL pair not measured: PostgreSQL (${settings.postgresUrl}) or Redis (${settings.redisUrl}) not reachable`)
    return
  }
  const pair = await Cleanup.scope(async (cleanup) => {
    const { env } = await scratchScaleOut(cleanup)
    const key = await prepareStore(env, HOLD_PETS)
    const [a, b] = await Promise.all([startService('instance A', env, key, cleanup), startService('instance B', env, key, cleanup)]) as [Target, Target]
    await stockUp(a)
    const split = { a: Math.max(1, Math.ceil(settings.connections / 2)), b: Math.max(1, Math.floor(settings.connections / 2)) }
    const both = async (seconds: number): Promise<LoadResult> => {
      const [ra, rb] = await Promise.all([
        measure(a, seconds, { connections: split.a, holdPets: HOLD_PETS }), measure(b, seconds, { connections: split.b, holdPets: HOLD_PETS })
      ])
      return combine(ra, rb)
    }
    // Twice the warm-up, as get-10-pg-2x: each instance gets half the server core.
    await both(settings.warmup * 2)
    const runs: LoadResult[] = []
    for (let round = 1; round <= settings.rounds; round++) {
      const run = await both(settings.duration)
      runs.push(run)
      log(`${result.id} round ${round}/${settings.rounds}: PostgreSQL pair ${describeRun(run)}`)
    }
    return side(runs)
  })
  const ratio = ceiling === null ? null : pair.rps / ceiling.rps
  const failed = pair.non2xx + pair.errors
  result.checks.push({
    name: 'PostgreSQL pair',
    value: pair.rps,
    text: `${Math.round(pair.rps / 2)} holds/s (${Math.round(pair.rps)} rps${ratio === null ? '' : `, ratio ${ratio.toFixed(3)}`}, p99 ${pair.p99.toFixed(2)} ms)`,
    target: failed === 0 ? 'reference' : 'no non-2xx',
    met: failed === 0 ? null : false,
    flag: `PostgreSQL pair non-2xx+err: ${failed}`
  })
  result.notes.push(`PostgreSQL pair: ${Math.round(pair.rps / 2)} holds placed and confirmed per second (${Math.round(pair.rps)} requests/s summed over ` +
    `both instances, p99 the worse one)`)
  result.details = { ...result.details, postgresPair: figures(pair, ceiling) }
}
