/**
 * latency: latency at a fixed request rate, open loop (bench/open-loop.ts: requests sent on schedule however slow the
 * answers, each timed from when it was due). Per case, the capacity first, closed loop at saturation as get-10 and
 * patch measure it (wrk or autocannon, the run's connections), then fixed rates at 25, 50 and 75 % of it. Cases: GET
 * /v1/inventory (10 entries) and PATCH (10,000 pets, a random pet per request) on one instance on SQLite (durable
 * commits), and the same on two instances on PostgreSQL + Redis (one fresh database each, the load spread over both,
 * the capacity the pair's).
 *
 * Each rate runs BENCH_LATENCY_WARMUP s on schedule unrecorded, then BENCH_LATENCY_DURATION s measured: p50, p99,
 * p99.9 and max from each request's due time, the rates sent and answered, the generator's own lag. Cases
 * (BENCH_LATENCY_CASES): sqlite-get, sqlite-patch, pg2x-get, pg2x-patch. At most BENCH_CONNECTIONS connections (split
 * per instance); a request unanswered after 10 s fails.
 *
 * The checks are the objectives of OBJECTIVES (issue 35): one SQLite instance at 25 %, GET and PATCH p99 < 5 ms; at
 * 50 %, GET p99 < 10 ms and PATCH p99 < 20 ms; two instances on PostgreSQL + Redis at 50 %, GET p99 < 10 ms and PATCH
 * p99 < 25 ms; each with its p99.9. Just before each judged run, a bare control: the bare server (bench/bare-server.js,
 * on the server core) sent GET at the same rate over as many connection pools, answering the bytes of the service's
 * GET answer (for PATCH, of one stock entry, the size of a PATCH answer): what the generator and the machine add on
 * their own. A run is invalid, and its objective unknown (`met` null), when its generator missed its schedule (under
 * 99 % of the rate sent, or its own lag p99 >= 2 ms) or when its bare control did, or showed p99 >= 5 ms, or failed
 * requests: then the figures are the generator's or the machine's, not the server's. Each run in `details.runs` says
 * whether it is `valid` and why not (`invalidReasons`); bare controls are `case: "bare"` with `controlFor`.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { redisReachable } from '../../test/ratelimit/redis-env.js'
import type { LoadResult, LoadSpec } from '../load.js'
import { combine, describeRun, measure } from '../measure.js'
import type { OpenLoopResult, OpenLoopSpec, Percentiles } from '../open-loop.js'
import { log, type Check, type Scenario, type ScenarioResult, type Target } from '../scenario.js'
import { BARE, postgresReachable, prepareStore, scenarioDir, scratchScaleOut, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, cpuSeconds, describeExit, median, ROOT, runNode, runQueueSeconds, startNode, stop, waitOutput } from '../support.js'

const OPEN_LOOP = join(ROOT, 'bench/open-loop.ts')

/** Shares of the capacity the fixed rates run at. */
const SHARES = [0.25, 0.5, 0.75]
/** Pets of the PATCH cases, as the patch scenario. */
const PATCH_PETS = 10_000
/** A request without its answer after this long counts as failed (and its latency as 10 s). */
const TIMEOUT_MS = 10_000
/** A judged run is invalid when its bare control's p99 reaches this (ms): the machine or the generator is that slow. */
const BARE_MAX_P99_MS = 5

type Op = 'GET' | 'PATCH'
const CASES = ['sqlite-get', 'sqlite-patch', 'pg2x-get', 'pg2x-patch'] as const
type CaseId = typeof CASES[number]

/** The issue's objectives: p99 under `p99Ms` for `case` at `share` of its capacity. Each is a check. */
const OBJECTIVES: ReadonlyArray<{ case: CaseId, share: number, p99Ms: number }> = [
  { case: 'sqlite-get', share: 0.25, p99Ms: 5 },
  { case: 'sqlite-patch', share: 0.25, p99Ms: 5 },
  { case: 'sqlite-get', share: 0.5, p99Ms: 10 },
  { case: 'sqlite-patch', share: 0.5, p99Ms: 20 },
  { case: 'pg2x-get', share: 0.5, p99Ms: 10 },
  { case: 'pg2x-patch', share: 0.5, p99Ms: 25 }
]
const CASE_NAMES: Record<CaseId, string> = {
  'sqlite-get': 'SQLite GET',
  'sqlite-patch': 'SQLite PATCH',
  'pg2x-get': '2x PostgreSQL + Redis GET',
  'pg2x-patch': '2x PostgreSQL + Redis PATCH'
}
const judged = (caseId: CaseId, share: number): boolean => OBJECTIVES.some((o) => o.case === caseId && o.share === share)

export const latency: Scenario = {
  id: 'latency',
  title: 'latency at 25/50/75 % of capacity, open loop: GET and PATCH, SQLite and 2 instances on PostgreSQL + Redis',
  target: null,
  run: latencyScenario
}

/** One fixed-rate run, as reported. */
interface RateRun {
  case: CaseId | 'bare'
  /** For a bare control: the case whose run at the same rate it controls. */
  controlFor?: CaseId
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
  /** Whether its figures are the server's: its generator kept its schedule and, for a judged run, its bare control was fast. */
  valid: boolean
  invalidReasons: string[]
}

const fmt = (n: number): string => n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : String(Math.round(n))
const describeLatency = (p: Percentiles): string => `p50 ${fmt(p.p50)}, p99 ${fmt(p.p99)}, p99.9 ${fmt(p.p999)}, max ${fmt(p.max)} ms`

function describeRateRun (run: RateRun): string {
  const r = run.result
  const problems = [
    ...(r.non2xx > 0 ? [`non-2xx ${r.non2xx} ${JSON.stringify(r.statusCodes)}`] : []),
    ...(r.errors > 0 ? [`errors ${r.errors} (timeouts ${r.timeouts})`] : []),
    ...(r.unfinished > 0 ? [`unfinished ${r.unfinished}`] : []),
    ...(r.behind ? [`GENERATOR BEHIND: ${r.behindReasons.join('; ')}`] : []),
    ...(run.case !== 'bare' && !run.valid ? [`INVALID: ${run.invalidReasons.join('; ')}`] : [])
  ]
  const name = run.controlFor === undefined ? run.case : `bare control of ${run.controlFor}`
  return `${name} ${run.op} ${Math.round(run.share * 100)}% (${run.rate} rps): ${describeLatency(r.latency)}; ` +
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

/** Why a run's figures are not the server's: its generator missed its schedule, or its bare control says so. */
function invalidReasons (result: OpenLoopResult, control: RateRun | undefined, mustHaveControl: boolean): string[] {
  const reasons = result.behind ? [`its generator missed its schedule (${result.behindReasons.join('; ')})`] : []
  if (control === undefined) {
    if (mustHaveControl) reasons.push('no bare control')
    return reasons
  }
  const c = control.result
  if (c.behind) reasons.push(`the bare control's generator missed its schedule (${c.behindReasons.join('; ')})`)
  if (c.latency.p99 >= BARE_MAX_P99_MS) reasons.push(`the bare control's p99 is ${fmt(c.latency.p99)} ms >= ${BARE_MAX_P99_MS} ms`)
  if (c.errors + c.unfinished + c.non2xx > 0) reasons.push(`the bare control failed ${c.errors + c.unfinished + c.non2xx} requests`)
  return reasons
}

/**
 * The fixed-rate runs of one case: 25, 50 and 75 % of `cap`. Before each run an objective judges, a bare control at
 * the same rate: `bare` sent GET over as many pools as there are targets.
 */
async function rateRuns (
  caseId: CaseId, op: Op, targets: Target[], cap: number, runs: RateRun[], bare: Target
): Promise<void> {
  const patchPets = op === 'PATCH' ? PATCH_PETS : undefined
  for (const share of SHARES) {
    const rate = Math.max(1, Math.round(cap * share))
    let control: RateRun | undefined
    if (judged(caseId, share)) {
      const b = await openLoopRun(targets.map(() => bare), rate)
      const reasons = invalidReasons(b.result, undefined, false)
      control = { case: 'bare', controlFor: caseId, op: 'GET', share, rate, ...b, valid: reasons.length === 0, invalidReasons: reasons }
      runs.push(control)
      log(`latency ${describeRateRun(control)}`)
    }
    const s = await openLoopRun(targets, rate, patchPets)
    const reasons = invalidReasons(s.result, control, judged(caseId, share))
    const run: RateRun = { case: caseId, op, share, rate, ...s, valid: reasons.length === 0, invalidReasons: reasons }
    runs.push(run)
    log(`latency ${describeRateRun(run)}`)
  }
}

/**
 * The bare server (on the server core) answering GET /v1/inventory with the bytes the service answers `path` with:
 * the listing for GET, one stock entry (the size of a PATCH answer) for PATCH. Warmed up closed loop.
 */
async function startBare (service: Target, path: string, dir: string, cleanup: Cleanup): Promise<Target> {
  const res = await fetch(new URL(path, service.url), { headers: service.headers })
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) throw new Error(`GET ${path} answered ${res.status}: ${body.toString().slice(0, 200)}`)
  const file = join(dir, 'bare.body')
  writeFileSync(file, body)
  const proc = startNode([BARE, file, res.headers.get('content-type') ?? 'application/json'], {}, 'server')
  cleanup.defer(() => stop(proc))
  const bare: Target = { name: 'bare control', url: `http://127.0.0.1:${await waitOutput(proc, /listening (\d+)/)}/v1/inventory`, headers: service.headers, proc }
  await measure(bare, settings.warmup)
  return bare
}

const barePath = (op: Op): string => op === 'GET' ? '/v1/inventory' : '/v1/inventory/1'

async function sqliteCase (caseId: CaseId, op: Op, capacities: Record<string, number>, runs: RateRun[]): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(`latency-${caseId}`)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const pets = op === 'GET' ? 10 : PATCH_PETS
    const service = await startService('service', env, await prepareStore(env, pets), cleanup)
    const bare = await startBare(service, barePath(op), dir, cleanup)
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
    const bare = await startBare(targets[0], barePath(op), scenarioDir(`latency-${caseId}`), cleanup)
    const cap = await capacity(caseId, targets, op === 'PATCH' ? { patchPets: PATCH_PETS } : {})
    capacities[caseId] = cap
    await rateRuns(caseId, op, targets, cap, runs, bare)
  })
}

/** The checks: each objective whose case ran, met or missed, or unknown (null) when its run is invalid. */
function objectives (runs: RateRun[]): Check[] {
  return OBJECTIVES.flatMap((o) => {
    const run = runs.find((r) => r.case === o.case && r.share === o.share)
    if (run === undefined) return []
    const { p99, p999 } = run.result.latency
    const name = `${CASE_NAMES[o.case]} p99 at ${o.share * 100}%`
    return [{
      name,
      value: p99,
      text: `${fmt(p99)} ms (p99.9 ${fmt(p999)} ms)${run.valid ? '' : ` INVALID: ${run.invalidReasons.join('; ')}`}`,
      target: `< ${o.p99Ms} ms`,
      met: run.valid ? p99 < o.p99Ms : null,
      flag: name.toUpperCase()
    }]
  })
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
  result.checks.push(...objectives(runs))
  const serviceRuns = runs.filter((r) => r.case !== 'bare')
  if (runs.some((r) => r.result.behind)) result.flags.push('GENERATOR BEHIND (those figures are the generator\'s)')
  const invalid = serviceRuns.filter((r) => !r.valid)
  if (invalid.length > 0) result.flags.push(`INVALID RUNS: ${invalid.map((r) => `${r.case} ${Math.round(r.share * 100)}%`).join(', ')}`)
  const non2xx = serviceRuns.reduce((sum, r) => sum + r.result.non2xx, 0)
  const errors = serviceRuns.reduce((sum, r) => sum + r.result.errors + r.result.unfinished, 0)
  if (non2xx > 0) result.flags.push(`non-2xx: ${non2xx}`)
  if (errors > 0) result.flags.push(`failed or unanswered requests: ${errors}`)
  result.details = {
    sharesOfCapacity: SHARES,
    warmupSeconds: settings.latencyWarmup,
    seconds: settings.latencyDuration,
    capacities,
    // Each objective with its run's p99 and p99.9 (ms), and whether that run counts (valid) or why not.
    objectives: OBJECTIVES.map((o) => {
      const run = serviceRuns.find((r) => r.case === o.case && r.share === o.share)
      return run === undefined
        ? { ...o, ran: false }
        : { ...o, ran: true, p99: run.result.latency.p99, p999: run.result.latency.p999, valid: run.valid, met: run.valid ? run.result.latency.p99 < o.p99Ms : null, invalidReasons: run.invalidReasons }
    }),
    bareMaxP99Ms: BARE_MAX_P99_MS,
    runs: runs.map((r) => ({
      case: r.case,
      ...(r.controlFor === undefined ? {} : { controlFor: r.controlFor }),
      op: r.op,
      share: r.share,
      valid: r.valid,
      invalidReasons: r.invalidReasons,
      serverCpuPct: r.serverCpuPct,
      serverRunQueueMsPerS: r.serverRunQueueMsPerS,
      ...r.result
    }))
  }
}
