/**
 * latency: latency at a fixed request rate, open loop (bench/open-loop.ts: requests sent on schedule however slow the
 * answers, each timed from when it was due). Per case, the capacity first, closed loop at saturation as get-10 and
 * patch measure it (wrk or autocannon, the run's connections), then fixed rates at 25, 50 and 75 % of it. Cases: GET
 * /v1/inventory (10 entries) and PATCH (10,000 pets, a random pet per request) on one instance on SQLite (durable
 * commits), and the same on two instances on PostgreSQL + Redis (one fresh database each, the load spread over both,
 * the capacity the pair's). With SQLite GET, the bare ceiling server is driven at the same rates, alternating: what
 * the generator and the machine add on their own.
 *
 * Each rate runs BENCH_LATENCY_WARMUP s on schedule unrecorded, then BENCH_LATENCY_DURATION s measured: p50, p99,
 * p99.9 and max from each request's due time, the rates sent and answered, the generator's own lag. Cases
 * (BENCH_LATENCY_CASES): sqlite-get, sqlite-patch, pg2x-get, pg2x-patch. At most BENCH_CONNECTIONS connections (split
 * per instance); a request unanswered after 10 s fails. A run where the generator fell behind its schedule is
 * flagged, and its figures are the generator's. Target: SQLite at 50 %, GET p99 < 10 ms and PATCH p99 < 20 ms
 * (unknown when the generator fell behind).
 */
import { join } from 'node:path'
import { redisReachable } from '../../test/ratelimit/redis-env.js'
import type { LoadResult, LoadSpec } from '../load.js'
import { combine, describeRun, measure } from '../measure.js'
import type { OpenLoopResult, OpenLoopSpec, Percentiles } from '../open-loop.js'
import { log, type Check, type Scenario, type ScenarioResult, type Target } from '../scenario.js'
import { postgresReachable, prepareStore, scenarioDir, scratchScaleOut, startCeiling, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, cpuSeconds, describeExit, median, ROOT, runNode, runQueueSeconds } from '../support.js'

const OPEN_LOOP = join(ROOT, 'bench/open-loop.ts')

/** Shares of the capacity the fixed rates run at. */
const SHARES = [0.25, 0.5, 0.75]
/** Pets of the PATCH cases, as the patch scenario. */
const PATCH_PETS = 10_000
/** A request without its answer after this long counts as failed (and its latency as 10 s). */
const TIMEOUT_MS = 10_000
/** The objectives, SQLite at 50 % of capacity: p99 in ms. */
const OBJECTIVES = { GET: 10, PATCH: 20 } as const

type Op = 'GET' | 'PATCH'
const CASES = ['sqlite-get', 'sqlite-patch', 'pg2x-get', 'pg2x-patch'] as const
type CaseId = typeof CASES[number]

export const latency: Scenario = {
  id: 'latency',
  title: 'latency at 25/50/75 % of capacity, open loop: GET and PATCH, SQLite and 2 instances on PostgreSQL + Redis',
  target: null,
  run: latencyScenario
}

/** One fixed-rate run, as reported. */
interface RateRun {
  case: CaseId | 'bare'
  op: Op
  share: number
  rate: number
  /** Server CPU over the generator's whole run (warm-up included), % of one core, summed over the instances. */
  serverCpuPct: number | null
  /**
   * Milliseconds per second the server's main thread (summed over the instances) was runnable but waiting for a CPU,
   * over the same span: the machine's share of the latency, near 0 when the server core is its own.
   */
  serverRunQueueMsPerS: number | null
  result: OpenLoopResult
}

const fmt = (n: number): string => n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : String(Math.round(n))
const describeLatency = (p: Percentiles): string => `p50 ${fmt(p.p50)}, p99 ${fmt(p.p99)}, p99.9 ${fmt(p.p999)}, max ${fmt(p.max)} ms`

function describeRateRun (run: RateRun): string {
  const r = run.result
  const problems = [
    ...(r.non2xx > 0 ? [`non-2xx ${r.non2xx} ${JSON.stringify(r.statusCodes)}`] : []),
    ...(r.errors > 0 ? [`errors ${r.errors} (timeouts ${r.timeouts})`] : []),
    ...(r.unfinished > 0 ? [`unfinished ${r.unfinished}`] : []),
    ...(r.behind ? [`GENERATOR BEHIND: ${r.behindReasons.join('; ')}`] : [])
  ]
  return `${run.case} ${run.op} ${Math.round(run.share * 100)}% (${run.rate} rps): ${describeLatency(r.latency)}; ` +
    `sent ${Math.round(r.sentRate)}/s, answered ${Math.round(r.answeredRate)}/s; ` +
    `from dispatch p99 ${fmt(r.serviceTime.p99)} ms; generator lag p99 ${fmt(r.lag.p99)} max ${fmt(r.lag.max)} ms; ` +
    `in flight <= ${r.maxInFlight}, ${r.connectionsOpened} connections opened, ${r.queuedForConnection} waited for one; ` +
    `CPU server ${run.serverCpuPct === null ? '-' : Math.round(run.serverCpuPct)}% generator ${Math.round(r.loadCpuPct)}%; ` +
    `waiting for a CPU: server ${run.serverRunQueueMsPerS === null ? '-' : Math.round(run.serverRunQueueMsPerS)} ms/s, generator ${r.runQueueMsPerS === null ? '-' : Math.round(r.runQueueMsPerS)} ms/s` +
    (problems.length === 0 ? '' : `; ${problems.join('; ')}`)
}

/** One open-loop run at `rate` requests/s over `targets` (alternating between them), on the load core. */
async function openLoopRun (
  targets: Target[], rate: number, patchPets?: number
): Promise<{ result: OpenLoopResult, serverCpuPct: number | null, serverRunQueueMsPerS: number | null }> {
  for (const target of targets) if (!target.proc.running()) throw new Error(`${target.name} is not running: ${describeExit(target.proc)}`)
  const spec: OpenLoopSpec = {
    origins: targets.map((t) => new URL(t.url).origin),
    rate,
    warmup: settings.latencyWarmup,
    duration: settings.latencyDuration,
    // The run's connections at most, split between the instances as the closed-loop runs split them.
    maxConnections: Math.max(1, Math.floor(settings.connections / targets.length)),
    timeoutMs: TIMEOUT_MS,
    ...(patchPets === undefined ? {} : { patchPets })
  }
  const cpuBefore = targets.map((t) => cpuSeconds(t.proc.pid))
  const waitBefore = targets.map((t) => runQueueSeconds(t.proc.pid))
  const headers = (targets[0] as Target).headers
  const timeoutMs = (spec.warmup + spec.duration + 60) * 1000 + TIMEOUT_MS
  const stdout = await runNode(['--import', 'tsx', OPEN_LOOP, JSON.stringify(spec)], { BENCH_HEADERS: JSON.stringify(headers) }, 'load', timeoutMs)
  const cpuAfter = targets.map((t) => cpuSeconds(t.proc.pid))
  const waitAfter = targets.map((t) => runQueueSeconds(t.proc.pid))
  for (const target of targets) if (!target.proc.running()) throw new Error(`${target.name} died under load: ${describeExit(target.proc)}`)
  const span = spec.warmup + spec.duration
  const perSecond = (before: Array<number | null>, after: Array<number | null>): number | null =>
    before.every((c) => c !== null) && after.every((c) => c !== null)
      ? after.reduce((sum: number, c, i) => sum + (c as number) - (before[i] as number), 0) / span
      : null
  const cpu = perSecond(cpuBefore, cpuAfter)
  const wait = perSecond(waitBefore, waitAfter)
  return {
    result: JSON.parse(stdout.trim().split('\n').pop() ?? '') as OpenLoopResult,
    serverCpuPct: cpu === null ? null : cpu * 100,
    serverRunQueueMsPerS: wait === null ? null : wait * 1000
  }
}

/**
 * Capacity: closed loop at saturation, as get-10 and patch measure it (a warm-up, then the run's rounds; the median).
 * With two targets, one load generator each at once, half the connections each, requests/s summed.
 */
async function capacity (label: string, targets: Target[], extra: Partial<LoadSpec>): Promise<number> {
  const once = async (seconds: number): Promise<LoadResult> => {
    if (targets.length === 1) return await measure(targets[0] as Target, seconds, extra)
    const split = Math.max(1, Math.floor(settings.connections / targets.length))
    const runs = await Promise.all(targets.map((t) => measure(t, seconds, { ...extra, connections: split })))
    return runs.reduce((a, b) => combine(a, b))
  }
  // Two instances share the server core: twice the warm-up, as get-10-pg-2x.
  await once(settings.warmup * targets.length)
  const runs: LoadResult[] = []
  for (let round = 1; round <= settings.rounds; round++) {
    const run = await once(settings.duration)
    if (run.non2xx + run.errors > 0 || run.requests === 0) throw new Error(`${label} capacity run failed: ${describeRun(run)}`)
    runs.push(run)
    log(`latency ${label} capacity ${round}/${settings.rounds}: ${describeRun(run)}`)
  }
  return median(runs.map((r) => r.rps))
}

/** The fixed-rate runs of one case: 25, 50 and 75 % of `cap`; with `bare`, the bare server at each rate first. */
async function rateRuns (
  caseId: CaseId, op: Op, targets: Target[], cap: number, runs: RateRun[], bare: Target | null
): Promise<void> {
  const patchPets = op === 'PATCH' ? PATCH_PETS : undefined
  for (const share of SHARES) {
    const rate = Math.max(1, Math.round(cap * share))
    if (bare !== null) {
      const b = await openLoopRun([bare], rate)
      const run: RateRun = { case: 'bare', op: 'GET', share, rate, ...b }
      runs.push(run)
      log(`latency ${describeRateRun(run)}`)
    }
    const s = await openLoopRun(targets, rate, patchPets)
    const run: RateRun = { case: caseId, op, share, rate, ...s }
    runs.push(run)
    log(`latency ${describeRateRun(run)}`)
  }
}

async function sqliteCase (caseId: CaseId, op: Op, capacities: Record<string, number>, runs: RateRun[]): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(`latency-${caseId}`)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const pets = op === 'GET' ? 10 : PATCH_PETS
    const service = await startService('service', env, await prepareStore(env, pets), cleanup)
    // With GET, the bare server answering the service's bytes: the generator's own overhead at the same rates.
    const bare = op === 'GET' ? (await startCeiling(service, dir, cleanup)).target : null
    if (bare !== null) await measure(bare, settings.warmup)
    const cap = await capacity(caseId, [service], op === 'PATCH' ? { patchPets: PATCH_PETS } : {})
    capacities[caseId] = cap
    await rateRuns(caseId, op, [service], cap, runs, bare)
  })
}

async function pg2xCase (caseId: CaseId, op: Op, capacities: Record<string, number>, runs: RateRun[]): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const { env } = await scratchScaleOut(cleanup)
    const key = await prepareStore(env, op === 'GET' ? 10 : PATCH_PETS, 120_000)
    const targets = await Promise.all([startService('instance A', env, key, cleanup), startService('instance B', env, key, cleanup)])
    const cap = await capacity(caseId, targets, op === 'PATCH' ? { patchPets: PATCH_PETS } : {})
    capacities[caseId] = cap
    await rateRuns(caseId, op, targets, cap, runs, null)
  })
}

/** The objective for `op` on SQLite at 50 %: met, missed, or unknown when the generator fell behind. */
function objective (op: Op, runs: RateRun[]): Check | null {
  const caseId: CaseId = op === 'GET' ? 'sqlite-get' : 'sqlite-patch'
  const run = runs.find((r) => r.case === caseId && r.share === 0.5)
  if (run === undefined) return null
  const p99 = run.result.latency.p99
  return {
    name: `SQLite ${op} p99 at 50%`,
    value: p99,
    text: `${fmt(p99)} ms${run.result.behind ? ' (generator behind)' : ''}`,
    target: `< ${OBJECTIVES[op]} ms`,
    met: run.result.behind ? null : p99 < OBJECTIVES[op],
    flag: `SQLITE ${op} P99 AT 50%`
  }
}

async function latencyScenario (result: ScenarioResult): Promise<void> {
  const unknown = settings.latencyCases.filter((c) => !(CASES as readonly string[]).includes(c))
  if (unknown.length > 0) throw new Error(`BENCH_LATENCY_CASES: unknown ${unknown.join(', ')} (cases: ${CASES.join(', ')})`)
  const wanted = (c: CaseId): boolean => settings.latencyCases.length === 0 || settings.latencyCases.includes(c)
  const capacities: Record<string, number> = {}
  const runs: RateRun[] = []
  result.notes.push(`open loop (bench/open-loop.ts): ${settings.latencyWarmup} s warm-up then ${settings.latencyDuration} s measured per rate; ` +
    `latency from each request's due time; at most ${settings.connections} connections (split per instance); capacity closed loop with ${settings.loadGenerator}`)
  if (wanted('sqlite-get')) await sqliteCase('sqlite-get', 'GET', capacities, runs)
  if (wanted('sqlite-patch')) await sqliteCase('sqlite-patch', 'PATCH', capacities, runs)
  if (wanted('pg2x-get') || wanted('pg2x-patch')) {
    const missing = [
      ...(await postgresReachable() ? [] : [`PostgreSQL not reachable at ${settings.postgresUrl} (BENCH_POSTGRES_URL)`]),
      ...(await redisReachable(settings.redisUrl) ? [] : [`Redis not reachable at ${settings.redisUrl} (BENCH_REDIS_URL)`])
    ]
    if (missing.length > 0) {
      result.notes.push(`two instances on PostgreSQL + Redis skipped: ${missing.join('; ')}`)
    } else {
      if (wanted('pg2x-get')) await pg2xCase('pg2x-get', 'GET', capacities, runs)
      if (wanted('pg2x-patch')) await pg2xCase('pg2x-patch', 'PATCH', capacities, runs)
    }
  }
  for (const [caseId, cap] of Object.entries(capacities)) result.notes.push(`${caseId} capacity ${Math.round(cap)} rps`)
  for (const run of runs) result.notes.push(describeRateRun(run))
  for (const op of ['GET', 'PATCH'] as const) {
    const check = objective(op, runs)
    if (check !== null) result.checks.push(check)
  }
  const serviceRuns = runs.filter((r) => r.case !== 'bare')
  if (runs.some((r) => r.result.behind)) result.flags.push('GENERATOR BEHIND (those figures are the generator\'s)')
  const non2xx = serviceRuns.reduce((sum, r) => sum + r.result.non2xx, 0)
  const errors = serviceRuns.reduce((sum, r) => sum + r.result.errors + r.result.unfinished, 0)
  if (non2xx > 0) result.flags.push(`non-2xx: ${non2xx}`)
  if (errors > 0) result.flags.push(`failed or unanswered requests: ${errors}`)
  result.details = {
    sharesOfCapacity: SHARES,
    warmupSeconds: settings.latencyWarmup,
    seconds: settings.latencyDuration,
    capacities,
    runs: runs.map((r) => ({
      case: r.case,
      op: r.op,
      share: r.share,
      serverCpuPct: r.serverCpuPct,
      serverRunQueueMsPerS: r.serverRunQueueMsPerS,
      ...r.result
    }))
  }
}
