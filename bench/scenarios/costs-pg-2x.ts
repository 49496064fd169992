/**
 * costs-pg-2x: what one GET and one PATCH cost each component (the inputs of docs/scaling.md), with two instances on
 * PostgreSQL + Redis; what it reads is in bench/counters.ts, its two probes in bench/probes.ts.
 *
 * Two instances (both on the server core) on one fresh PostgreSQL database and a redis-server of the scenario's own
 * (no persistence, stopped afterwards; BENCH_REDIS_URL when redis-server is not installed), one load generator per
 * instance at once. Phases: GET only (10 entries, alternating with a bare ceiling of its own), PATCH only (rotating
 * over the 10 pets), and mixes of 1 PATCH in 20 and in 100 requests (bench/wrk.lua's second argument; per PATCH, the
 * version checks and listing rebuilds the change caused), then GET and PATCH again on a Redis Cluster of three
 * primaries of its own (REDIS_MODE=cluster, when redis-cli is installed).
 *
 * Around every measured run, once the instances are idle: requests answered and gated (their /metrics), the
 * instances' CPU time, PostgreSQL statements and transactions counted in the instances (bench/pg-count.js, preloaded
 * with --import: pg_stat_statements is not preloaded on these servers), Redis commands by name (INFO commandstats:
 * commands run inside the script count too) and main-thread CPU (INFO cpu), PostgreSQL CPU of the scratch database's
 * sessions (local servers). PATCH phase: rows per table and trigger calls per PATCH (pg_stat_user_tables,
 * pg_stat_user_functions with track_functions = 'pl' on the scratch database, read after 11 s idle before and after).
 * Then a commit probe on the scratch database (sequential SELECT 1, one-row commit and ledger write as the PATCH
 * statement writes it; 8 sessions at once committing independent rows and ledger writes; the ledger write again as
 * BEGIN, statement, COMMIT) and redis-benchmark (the consume script as EVALSHA, GET and INCR of a counter copy, and the
 * announce script where the limiter has one) with Redis CPU per call.
 *
 * Per request: the Redis figures are per request that reached the rate-limit gate (answered, or cut by the load
 * generator at a run's end after the gate charged it), the others per request answered; the change counter's
 * increments (INCR, or INCRBY in the announce script) are also given per PATCH answered. Requests arriving while
 * their key is looked up again (every AUTH_CACHE_TTL_MS) add a peek script call (hmget/time/get without
 * hset/expire). Targets: PostgreSQL statements per GET 0 (flagged from 0.01), round trips per PATCH at most 1 (flagged
 * from 1.05: a group commit's batch is one round trip for all its PATCHes; its statements are reported beside it);
 * flagged when an instance fell back from Redis (a command failed or outlasted REDIS_COMMAND_TIMEOUT_MS).
 */
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import pg from 'pg'
import {
  OWN_REDIS_COMMANDS, pgCounts, postgresCpu, postgresCpuDelta, redisStats, servedRequests, serverStats, serverStatsPer,
  type PgCounts, type RedisStats, type Served
} from '../counters.js'
import type { LoadResult, LoadSpec } from '../load.js'
import { combine, describeRun, measure, side } from '../measure.js'
import { commitProbe, redisThroughput } from '../probes.js'
import { log, pct, type Scenario, type ScenarioResult, type Target } from '../scenario.js'
import {
  postgres, prepareStore, privateCluster, privateRedis, scenarioDir, scratchScaleOut, skippedWithoutServers, startCeiling, startService
} from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, cpuSeconds, median, memoryMb, ROOT, stop } from '../support.js'

const PG_COUNT = join(ROOT, 'bench/pg-count.js')

export const costsPg2x: Scenario = {
  id: 'costs-pg-2x',
  title: 'Per-request costs of GET and PATCH, 2 instances on PostgreSQL + Redis (docs/scaling.md)',
  target: null,
  run: costsScenario
}

/**
 * costs-pg-2x: pets in its store (the listing is get-10's; every PATCH also takes the store-wide inventory_version
 * and feed_clock rows, which serialize writers more than ten pets' row locks do), its mixes (one PATCH in k requests:
 * 5% and 1% writes), and the commit probe's writers, sequential statements and seconds.
 */
const COSTS = { pets: 10, mixes: [20, 100], writers: 8, sequential: 300, probeSeconds: 3, redisRequests: 100_000, quickRedisRequests: 20_000 }

/** One phase's sums over its measured runs (both instances). */
interface PhaseTotals {
  /** Answered by the instances (their /metrics): the denominator of the per-request figures but Redis's. */
  requests: number
  /** Of those, PATCHes. */
  patches: number
  /**
   * Requests that reached the rate-limit gate (one limiter call each): the answered ones and those the load generator
   * cut at a run's end after the gate had charged them. The denominator of the Redis figures.
   */
  gated: number
  /** Switches to the in-process limiter meanwhile: while it answers, no Redis call and every GET reads PostgreSQL. */
  fallbacks: number
  /** Completed within the whole runs, as the load generators count them. */
  loadGeneratorRequests: number
  /** Of the load runs. */
  seconds: number
  instanceCpu: number | null
  redisCpu: number | null
  redisCalls: Record<string, number>
  pgCpu: number | null
  queries: number
  statements: number
  transactions: number
  byStatement: Record<string, number>
  runs: LoadResult[]
}

/** A phase's costs per request (see costsScenario). */
interface PhaseCosts {
  requests: number
  patches: number
  gated: number
  fallbacks: number
  loadGeneratorRequests: number
  rps: number
  rpsPerInstance: number
  p50: number
  p99: number
  /** Both instances' CPU time per request, and requests per CPU second of an instance (a core's worth at saturation). */
  instanceCpuUsPerRequest: number | null
  requestsPerInstanceCpuSecond: number | null
  /** % of one core over the measured runs: both instances together (they share the server core), Redis, PostgreSQL. */
  instancesCpuPct: number | null
  redisCpuPct: number | null
  postgresCpuPct: number | null
  loadCpuPct: number
  /** By command name, per gated request; commands run inside scripts included (INFO commandstats counts those too). */
  redisCommandsPerRequest: Record<string, number>
  /** Increments of the change counter (INCR, or INCRBY in the announce script) per PATCH answered: 1, 16 on a Cluster. */
  counterIncrementsPerPatch: number | null
  /** Redis main-thread CPU per gated request. */
  redisCpuUsPerRequest: number | null
  /** Round trips to PostgreSQL per request: a group commit's batch is one for all its writes. */
  pgQueriesPerRequest: number
  pgStatementsPerRequest: number
  pgTransactionsPerRequest: number
  /** The most frequent statements (first 60 characters) per request. */
  pgStatementsByText: Record<string, number>
  postgresCpuUsPerRequest: number | null
}

function phaseCosts (t: PhaseTotals): PhaseCosts {
  const per = (n: number | null, of = t.requests): number | null => n === null || of === 0 ? null : n / of
  const us = (n: number | null, of = t.requests): number | null => { const v = per(n, of); return v === null ? null : v * 1e6 }
  const cpuPct = (n: number | null): number | null => n === null || t.seconds === 0 ? null : n * 100 / t.seconds
  const perRequest = (counts: Record<string, number>, skip: Set<string>, limit: number, of: number): Record<string, number> =>
    Object.fromEntries(Object.entries(counts).filter(([name, n]) => n > 0 && !skip.has(name)).sort((x, y) => y[1] - x[1]).slice(0, limit)
      .map(([name, n]) => [name, of === 0 ? 0 : n / of]))
  const rps = median(t.runs.map((r) => r.rps))
  return {
    requests: t.requests,
    patches: t.patches,
    gated: t.gated,
    fallbacks: t.fallbacks,
    loadGeneratorRequests: t.loadGeneratorRequests,
    rps,
    rpsPerInstance: rps / 2,
    p50: median(t.runs.map((r) => r.p50)),
    p99: median(t.runs.map((r) => r.p99)),
    instanceCpuUsPerRequest: us(t.instanceCpu),
    requestsPerInstanceCpuSecond: t.instanceCpu === null || t.instanceCpu === 0 ? null : t.requests / t.instanceCpu,
    instancesCpuPct: cpuPct(t.instanceCpu),
    redisCpuPct: cpuPct(t.redisCpu),
    postgresCpuPct: cpuPct(t.pgCpu),
    loadCpuPct: median(t.runs.map((r) => r.loadCpuPct)),
    redisCommandsPerRequest: perRequest(t.redisCalls, OWN_REDIS_COMMANDS, 20, t.gated),
    counterIncrementsPerPatch: per((t.redisCalls.incr ?? 0) + (t.redisCalls.incrby ?? 0), t.patches),
    redisCpuUsPerRequest: us(t.redisCpu, t.gated),
    pgQueriesPerRequest: per(t.queries) ?? 0,
    pgStatementsPerRequest: per(t.statements) ?? 0,
    pgTransactionsPerRequest: per(t.transactions) ?? 0,
    pgStatementsByText: perRequest(t.byStatement, new Set(), 8, t.requests),
    postgresCpuUsPerRequest: us(t.pgCpu)
  }
}

const fixed = (n: number | null, digits: number): string => n === null ? '-' : n.toFixed(digits)

function describeCosts (name: string, c: PhaseCosts): string {
  const redis = Object.entries(c.redisCommandsPerRequest).map(([cmd, n]) => `${cmd} ${n.toFixed(3)}`).join(', ')
  return `${name}: ${Math.round(c.rps)} rps on 2 instances (${Math.round(c.rpsPerInstance)} each), p99 ${c.p99.toFixed(2)} ms; ` +
    `instance CPU ${fixed(c.instanceCpuUsPerRequest, 0)} us/request (${fixed(c.requestsPerInstanceCpuSecond, 0)} requests per CPU second); ` +
    `Redis per gated request (${c.gated} gated, ${c.requests} answered, ${c.fallbacks} fallbacks): ${redis === '' ? 'none' : redis} ` +
    `(commandstats, script internals included), CPU ${fixed(c.redisCpuUsPerRequest, 1)} us; counter increments per PATCH answered ${fixed(c.counterIncrementsPerPatch, 3)}; ` +
    `PostgreSQL per request: ${c.pgQueriesPerRequest.toFixed(4)} round trips, ${c.pgStatementsPerRequest.toFixed(4)} statements, ${c.pgTransactionsPerRequest.toFixed(4)} transactions, ` +
    `server CPU ${fixed(c.postgresCpuUsPerRequest, 1)} us; CPU % of a core: instances ${pct(c.instancesCpuPct)}, Redis ${pct(c.redisCpuPct)}, ` +
    `PostgreSQL ${pct(c.postgresCpuPct)}, load generators ${pct(c.loadCpuPct)}`
}

/**
 * costs-pg-2x: what a GET and a PATCH cost each component with two instances on PostgreSQL + Redis (the inputs of
 * docs/scaling.md). Three phases, each loading both instances at once (half the connections each): GET only
 * (alternating with a bare ceiling, as get-10), PATCH only (rotating over the pets), and a mix of one PATCH in
 * COSTS.patchEvery requests. Around every measured run: the instances' CPU time (/proc), their PostgreSQL statements
 * and transactions (counted in the instances by bench/pg-count.js), Redis's commands by name (INFO commandstats) and
 * main-thread CPU (INFO cpu), and PostgreSQL's CPU (the sessions on the scratch database, when local). For the PATCH phase also the rows written per table and trigger calls (pg_stat_user_tables,
 * pg_stat_user_functions). Then two probes: commitProbe (what serializes writes) and redisThroughput.
 */
async function costsScenario (result: ScenarioResult): Promise<void> {
  if (await skippedWithoutServers(result)) return
  const loadAtStart = loadavg()
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const own = await privateRedis(dir, cleanup)
    const redisUrl = own ?? settings.redisUrl
    const { database, url, prefix, env } = await scratchScaleOut(cleanup, redisUrl)
    // Trigger functions' calls in pg_stat_user_functions, for the sessions that start from now on.
    await postgres(`ALTER DATABASE ${database} SET track_functions = 'pl'`)
    const key = await prepareStore(env, COSTS.pets)
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    cleanup.defer(() => { redis.disconnect() })
    const session = async (connectionString: string): Promise<pg.Client> => {
      const client = new pg.Client({ connectionString, connectionTimeoutMillis: 3000 })
      client.on('error', () => {})
      await client.connect()
      cleanup.defer(() => client.end().catch(() => {}))
      return client
    }
    const monitor = await session(settings.postgresUrl)
    const scratch = await session(url)

    /**
     * Two instances with `redisEnv` (the Redis to use), each counting its PostgreSQL statements, and what measures
     * them: `redisClients` are every Redis node they use (INFO is summed over them).
     */
    const startPair = async (label: string, redisEnv: Record<string, string>, redisClients: Redis[]) => {
      const files = [join(dir, `${label}-a.pg-count.json`), join(dir, `${label}-b.pg-count.json`)] as const
      const start = (name: string, file: string): Promise<Target> =>
        startService(name, { ...env, ...redisEnv, BENCH_PG_COUNT_FILE: file }, key, cleanup, ['--import', PG_COUNT])
      const [a, b] = await Promise.all([start(`instance A (${label})`, files[0]), start(`instance B (${label})`, files[1])])
      const redisTotals = async (): Promise<RedisStats> => {
        const all = await Promise.all(redisClients.map(redisStats))
        const sum: RedisStats = { calls: {}, usec: {}, cpuSeconds: 0 }
        for (const one of all) {
          for (const [name, n] of Object.entries(one.calls)) sum.calls[name] = (sum.calls[name] ?? 0) + n
          for (const [name, n] of Object.entries(one.usec)) sum.usec[name] = (sum.usec[name] ?? 0) + n
          sum.cpuSeconds = sum.cpuSeconds === null || one.cpuSeconds === null ? null : sum.cpuSeconds + one.cpuSeconds
        }
        return sum
      }
      const served = async (): Promise<Served> => {
        const [x, y] = await Promise.all([servedRequests(a), servedRequests(b)])
        return { get: x.get + y.get, patch: x.patch + y.patch, gated: x.gated + y.gated, fallbacks: x.fallbacks + y.fallbacks }
      }
      interface Snapshot {
        served: Served, instanceCpu: number | null, redis: RedisStats, pg: [PgCounts, PgCounts], pgCpu: Map<number, number> | null
      }
      /**
       * Every counter, once the instances are idle: a run's requests still in flight when its load generator stops are
       * answered (or dropped) after it, and what they cost belongs to the run. The counts must stand still first.
       */
      const snapshot = async (): Promise<Snapshot> => {
        let now = await served()
        for (let i = 0; i < 50; i++) {
          await sleep(200)
          const next = await served()
          if (next.get === now.get && next.patch === now.patch && next.gated === now.gated) break
          now = next
        }
        const cpuA = cpuSeconds(a.proc.pid)
        const cpuB = cpuSeconds(b.proc.pid)
        const [redisNow, countsA, countsB, pgCpu] = await Promise.all([
          redisTotals(), pgCounts(a, files[0]), pgCounts(b, files[1]), postgresCpu(monitor, database)])
        return { served: now, instanceCpu: cpuA === null || cpuB === null ? null : cpuA + cpuB, redis: redisNow, pg: [countsA, countsB], pgCpu }
      }
      const split = { a: Math.max(1, Math.ceil(settings.connections / 2)), b: Math.max(1, Math.floor(settings.connections / 2)) }
      const both = async (seconds: number, extra: Partial<LoadSpec>): Promise<LoadResult> => {
        const [ra, rb] = await Promise.all([measure(a, seconds, { ...extra, connections: split.a }), measure(b, seconds, { ...extra, connections: split.b })])
        return combine(ra, rb)
      }
      const phase = async (name: string, extra: Partial<LoadSpec>, ceiling: Target | null, ceilingRuns: LoadResult[]): Promise<PhaseTotals> => {
        const t: PhaseTotals = { requests: 0, patches: 0, gated: 0, fallbacks: 0, loadGeneratorRequests: 0, seconds: 0, instanceCpu: 0, redisCpu: 0, redisCalls: {}, pgCpu: 0, queries: 0, statements: 0, transactions: 0, byStatement: {}, runs: [] }
        const add = (x: number | null, y: number | null): number | null => x === null || y === null ? null : x + y
        for (let round = 1; round <= settings.rounds; round++) {
          const c = ceiling === null ? null : await measure(ceiling, settings.duration)
          if (c !== null) ceilingRuns.push(c)
          const before = await snapshot()
          const started = performance.now()
          const run = await both(settings.duration, extra)
          const seconds = (performance.now() - started) / 1000
          const after = await snapshot()
          t.runs.push(run)
          t.requests += after.served.get + after.served.patch - before.served.get - before.served.patch
          t.patches += after.served.patch - before.served.patch
          t.gated += after.served.gated - before.served.gated
          t.fallbacks += after.served.fallbacks - before.served.fallbacks
          t.loadGeneratorRequests += run.requests
          t.seconds += seconds
          t.instanceCpu = add(t.instanceCpu, after.instanceCpu === null || before.instanceCpu === null ? null : after.instanceCpu - before.instanceCpu)
          t.redisCpu = add(t.redisCpu, after.redis.cpuSeconds === null || before.redis.cpuSeconds === null ? null : after.redis.cpuSeconds - before.redis.cpuSeconds)
          t.pgCpu = add(t.pgCpu, postgresCpuDelta(before.pgCpu, after.pgCpu))
          for (const [command, calls] of Object.entries(after.redis.calls)) {
            t.redisCalls[command] = (t.redisCalls[command] ?? 0) + calls - (before.redis.calls[command] ?? 0)
          }
          for (const i of [0, 1] as const) {
            t.queries += after.pg[i].queries - before.pg[i].queries
            t.statements += after.pg[i].statements - before.pg[i].statements
            t.transactions += after.pg[i].transactions - before.pg[i].transactions
            for (const [text, n] of Object.entries(after.pg[i].byStatement)) {
              t.byStatement[text] = (t.byStatement[text] ?? 0) + n - (before.pg[i].byStatement[text] ?? 0)
            }
          }
          log(`${result.id} ${name} round ${round}/${settings.rounds}: ${c === null ? '' : `ceiling ${describeRun(c)}; `}both instances ${describeRun(run)}`)
        }
        return t
      }
      const stopPair = async (): Promise<void> => { await Promise.all([stop(a.proc), stop(b.proc)]) }
      return { a, b, served, both, phase, stop: stopPair }
    }
    const { a, b, served, both, phase, stop: stopStandalone } = await startPair('standalone', { REDIS_URL: redisUrl }, [redis])

    // GET, alternating with the bare ceiling (instance A's bytes).
    const { target: ceiling, bytes } = await startCeiling(a, dir, cleanup)
    await measure(ceiling, settings.warmup)
    // Twice the warm-up: each instance gets half the server core.
    await both(settings.warmup * 2, {})
    const ceilingRuns: LoadResult[] = []
    const getTotals = await phase('GET', {}, ceiling, ceilingRuns)

    // PATCH only, rotating over the pets; the table counters need the instances idle before and after.
    const patchSpec: Partial<LoadSpec> = { patchPets: COSTS.pets }
    await both(settings.warmup, patchSpec)
    const tablesBefore = await serverStats(scratch, 11_000)
    const servedBefore = await served()
    const patchTotals = await phase('PATCH', patchSpec, null, [])
    const { rows: [open] } = await monitor.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> $2",
      [database, (scratch as unknown as { processID: number }).processID])
    const tablesAfter = await serverStats(scratch, 11_000)
    const servedAfter = await served()

    // The mixes: one PATCH in k requests, the others GET.
    const mixes: Array<{ every: number, totals: PhaseTotals }> = []
    for (const every of COSTS.mixes) {
      const mixSpec: Partial<LoadSpec> = { patchPets: COSTS.pets, patchEvery: every }
      await both(settings.warmup, mixSpec)
      mixes.push({ every, totals: await phase(`mix 1/${every}`, mixSpec, null, []) })
    }
    const instancesPeakRssMb = [memoryMb(a.proc.pid, 'VmHWM'), memoryMb(b.proc.pid, 'VmHWM')]
    await stopStandalone()

    // The same GET and PATCH on a Redis Cluster of three primaries of the scenario's own (REDIS_MODE=cluster).
    let cluster: { nodes: number, get: PhaseCosts, patch: PhaseCosts } | string
    try {
      const seeds = await privateCluster(dir, cleanup)
      if (typeof seeds === 'string') {
        cluster = seeds
      } else {
        const clients = seeds.map((seed) => {
          const client = new Redis(seed, { maxRetriesPerRequest: 1 })
          client.on('error', () => {})
          cleanup.defer(() => { client.disconnect() })
          return client
        })
        const clustered = await startPair('cluster', { REDIS_MODE: 'cluster', REDIS_URL: seeds.join(',') }, clients)
        await clustered.both(settings.warmup * 2, {})
        const clusterGet = await clustered.phase('cluster GET', {}, null, [])
        await clustered.both(settings.warmup, patchSpec)
        const clusterPatch = await clustered.phase('cluster PATCH', patchSpec, null, [])
        await clustered.stop()
        cluster = { nodes: seeds.length, get: phaseCosts(clusterGet), patch: phaseCosts(clusterPatch) }
      }
    } catch (error) {
      cluster = `failed: ${(error as Error).message.slice(0, 500)}`
      log(`${result.id}: the Redis Cluster part failed: ${(error as Error).message}`)
    }

    const get = phaseCosts(getTotals)
    const patch = phaseCosts(patchTotals)
    // Over the whole PATCH phase (the counters are published seconds late), per PATCH answered meanwhile.
    const perPatch = serverStatsPer(tablesBefore, tablesAfter, Math.max(1, servedAfter.patch - servedBefore.patch))
    const sessions = Number(open?.n ?? 0)

    const commit = await commitProbe(url, monitor, database, COSTS)
    log(`${result.id}: commit probe: SELECT 1 ${commit.roundTrip.meanMs.toFixed(3)} ms, commit ${commit.commit.meanMs.toFixed(3)} ms, ` +
      `ledger write ${commit.ledgerWrite.meanMs.toFixed(3)} ms sequential; ${commit.writers} sessions at once: ` +
      `${Math.round(commit.commitsPerSecondConcurrent)} independent commits/s, ${Math.round(commit.ledgerWritesPerSecondConcurrent)} ledger writes/s`)
    const redisProbe = await redisThroughput(redisUrl, prefix, settings.quick ? COSTS.quickRedisRequests : COSTS.redisRequests)
    const { rows: pgSettings } = await monitor.query<{ name: string, setting: string }>(
      `SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'fsync', 'wal_sync_method', 'commit_delay',
         'max_connections', 'shared_preload_libraries', 'server_version')`)

    result.service = side(getTotals.runs)
    result.ceiling = side(ceilingRuns)
    result.ceilingFrom = 'own'
    result.instancesPeakRssMb = instancesPeakRssMb
    const peaks = result.instancesPeakRssMb.filter((mb): mb is number => mb !== null)
    result.peakRssMb = peaks.length === 0 ? null : Math.max(...peaks)
    result.checks.push({
      name: 'PostgreSQL statements/GET',
      value: get.pgStatementsPerRequest,
      text: get.pgStatementsPerRequest.toFixed(4),
      target: '0, flagged from 0.01',
      met: get.pgStatementsPerRequest < 0.01,
      flag: 'POSTGRESQL STATEMENTS PER GET'
    }, {
      // One round trip per PATCH at most: alone, its one statement; in a group commit, its share of the batch's
      // (which also carries the batch's BEGIN, row locks and COMMIT: statements per PATCH are reported beside it).
      name: 'PostgreSQL round trips/PATCH',
      value: patch.pgQueriesPerRequest,
      text: `${patch.pgQueriesPerRequest.toFixed(4)} (statements ${patch.pgStatementsPerRequest.toFixed(3)}, transactions ${patch.pgTransactionsPerRequest.toFixed(3)})`,
      target: 'at most 1, flagged from 1.05',
      met: patch.pgQueriesPerRequest < 1.05,
      flag: 'POSTGRESQL ROUND TRIPS PER PATCH'
    })
    // The serial bound: a writer holds the store-wide rows for about a ledger write's server time.
    const holdMs = commit.ledgerWrite.meanMs - commit.roundTrip.meanMs
    // What a change costs the readers: every instance re-reads the version (each GET that finds its listing
    // unconfirmed reads it), and rebuilds when it moved.
    const mixCosts = mixes.map(({ every, totals }) => {
      const gets = totals.requests - totals.patches
      // A rebuild reads the version inside its own transaction, with the same statement as a check.
      const rebuilds = Object.entries(totals.byStatement).filter(([text]) => text.startsWith('BEGIN ISOLATION LEVEL REPEATABLE READ')).reduce((sum, [, n]) => sum + n, 0)
      const checks = (totals.byStatement['SELECT v FROM inventory_version WHERE id = 1'] ?? 0) - rebuilds
      return {
        patchEvery: every,
        ...phaseCosts(totals),
        inventoryVersionChecksPerPatch: totals.patches === 0 ? null : checks / totals.patches,
        inventoryVersionChecksPerGet: gets === 0 ? null : checks / gets,
        listingRebuildsPerPatch: totals.patches === 0 ? null : rebuilds / totals.patches
      }
    })
    const fallbacks = [get, patch, ...mixCosts].reduce((sum, c) => sum + c.fallbacks, 0)
    if (fallbacks > 0) result.flags.push(`Redis fallbacks: ${fallbacks} (a command failed or timed out: the counts are not those of a healthy Redis)`)
    result.notes.push(
      `response ${bytes} bytes; ${COSTS.pets} pets; ${settings.connections} connections split between the instances; both instances on the server core; ` +
        (own === null ? `Redis at BENCH_REDIS_URL (shared: other clients' commands count too)` : 'a redis-server of its own (unpinned), so Redis counts only this scenario\'s commands'),
      describeCosts('GET', get),
      describeCosts('PATCH', patch),
      `PATCH, rows per PATCH by table (pg_stat_user_tables): ${Object.entries(perPatch.tables).map(([t, c]) => `${t} ${Object.entries(c).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(' ')}`).join('; ')}; ` +
        `trigger calls per PATCH: ${Object.entries(perPatch.functions).map(([f, n]) => `${f} ${n.toFixed(3)}`).join(', ') || '-'}; PostgreSQL sessions of the instances after the PATCH runs: ${sessions}`,
      ...(typeof cluster === 'string'
        ? [`Redis Cluster not measured: ${cluster}`]
        : [describeCosts(`Redis Cluster (${cluster.nodes} primaries) GET`, cluster.get), describeCosts(`Redis Cluster (${cluster.nodes} primaries) PATCH`, cluster.patch)]),
      ...mixCosts.flatMap((m) => [describeCosts(`mix 1/${m.patchEvery} (${m.patches} PATCH of ${m.requests})`, m),
        `mix 1/${m.patchEvery}: inventory version checks (outside rebuilds) ${fixed(m.inventoryVersionChecksPerPatch, 2)} per PATCH (${fixed(m.inventoryVersionChecksPerGet, 3)} per GET), ` +
        `listing rebuilds ${fixed(m.listingRebuildsPerPatch, 2)} per PATCH`]),
      `commit probe (scratch database, instances idle): sequential SELECT 1 ${commit.roundTrip.meanMs.toFixed(3)} ms, one-row commit ` +
        `${commit.commit.meanMs.toFixed(3)} ms, ledger write ${commit.ledgerWrite.meanMs.toFixed(3)} ms (mean); ${commit.writers} sessions at once: ` +
        `${Math.round(commit.commitsPerSecondConcurrent)} independent commits/s, ${Math.round(commit.ledgerWritesPerSecondConcurrent)} ledger writes/s; ` +
        `as BEGIN, write, COMMIT: ${commit.ledgerWriteInTransaction.meanMs.toFixed(3)} ms sequential, ` +
        `${Math.round(commit.ledgerWritesPerSecondConcurrentInTransaction)} writes/s with ${commit.writers} sessions; ` +
        `serial bound 1 / (ledger write - SELECT 1) = ${holdMs > 0 ? Math.round(1000 / holdMs) : '-'} writes/s; PostgreSQL CPU per ledger write ` +
        `${fixed(commit.ledgerWriteCpuUs, 0)} us sequential, ${fixed(commit.ledgerWriteConcurrentCpuUs, 0)} us with ${commit.writers} sessions at once`,
      typeof redisProbe === 'string'
        ? `redis-benchmark not run: ${redisProbe}`
        : `redis-benchmark (${settings.connections} connections, on the load core): ${redisProbe.map((p) => `${p.name} ${Math.round(p.rps)} requests/s, ` +
          `Redis CPU ${fixed(p.cpuUsPerCall, 1)} us/call (${p.cpuUsPerCall === null ? '-' : Math.round(1e6 / p.cpuUsPerCall)} per Redis CPU second)`).join('; ')}`,
      `PostgreSQL ${pgSettings.map((s) => `${s.name}=${s.setting}`).join(' ')}; load average ${loadAtStart.map((l) => l.toFixed(2)).join(' ')} at the start, ` +
        `${loadavg().map((l) => l.toFixed(2)).join(' ')} at the end; ${cpus().length} CPUs`
    )
    result.details = {
      pets: COSTS.pets,
      responseBytes: bytes,
      redis: own === null ? 'BENCH_REDIS_URL' : 'own redis-server',
      get,
      patch,
      mixes: mixCosts,
      redisCluster: cluster,
      patchRowsPerPatch: perPatch.tables,
      patchTriggerCallsPerPatch: perPatch.functions,
      postgresSessionsAfterPatch: sessions,
      commitProbe: { ...commit, serialBoundWritesPerSecond: holdMs > 0 ? 1000 / holdMs : null },
      redisBenchmark: redisProbe,
      postgresSettings: Object.fromEntries(pgSettings.map((s) => [s.name, s.setting])),
      loadAverage: { start: loadAtStart, end: loadavg() },
      cpus: cpus().length
    }
  })
}
