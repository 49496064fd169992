/**
 * get-10-pg-2x: get-10 on two instances sharing one fresh PostgreSQL database and Redis, one load generator per
 * instance at once (half the connections each): requests/s summed, the worse p99, the ratio against get-10's ceiling,
 * and the PostgreSQL transactions a GET costs (target: none, flagged from 0.01).
 *
 * Transactions per GET: the scratch database's pg_stat_database xact_commit + xact_rollback (every statement sent
 * outside BEGIN ... COMMIT is one) and tup_returned, over the measured runs, divided by the GETs served.
 * Transactions, not statements: pg_stat_statements is available but not in shared_preload_libraries on these servers
 * (the note says what the server has). They are read over a connection to the maintenance database, so the reads
 * never count; the first read after 11 s idle (PostgreSQL 15 publishes a backend's counters at most once a second,
 * else 10 s into idleness), the second after the instances have stopped (a backend publishes the rest when its session
 * ends): an upper bound. Time-based reads remain: each instance looks its key up again every AUTH_CACHE_TTL_MS, and
 * pools open sessions.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { LoadResult } from '../load.js'
import { combine, describeRun, measure, side } from '../measure.js'
import { fmtMb, log, type Scenario, type ScenarioResult, type Side, type Target } from '../scenario.js'
import { prepareStore, scratchScaleOut, skippedWithoutServers, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, memoryMb, stop } from '../support.js'

export const get10Pg2x: Scenario = {
  id: 'get-10-pg-2x',
  title: 'GET /v1/inventory, 10 entries, 2 instances on PostgreSQL + Redis',
  target: null,
  run: (result, context) => scaleOutScenario(result, context.get10Ceiling())
}

/** pg_stat_database's counters for one database. */
interface DatabaseCounters {
  /** xact_commit + xact_rollback: every statement sent outside BEGIN ... COMMIT is a transaction of its own. */
  transactions: number
  /** tup_returned: rows read by sequential scans plus index entries read. */
  tupReturned: number
}

/**
 * pg_stat_database's counters for `database`, read over a connection to the maintenance database
 * (BENCH_POSTGRES_URL), so the reads themselves never count in `database`. A backend publishes its counters at
 * the end of a transaction at most once a second, else ten seconds into idleness, and one whose pending
 * transactions touched no table keeps them until its session ends; pg_stat_force_next_flush() only flushes the
 * calling backend's. So: read after `waitMs`, then every second until two reads agree.
 */
async function databaseCounters (database: string, waitMs: number): Promise<DatabaseCounters> {
  const client = new pg.Client({ connectionString: settings.postgresUrl, connectionTimeoutMillis: 3000 })
  client.on('error', () => {})
  await client.connect()
  try {
    const read = async (): Promise<DatabaseCounters> => {
      // Each query is a transaction of its own, and stats_fetch_consistency caches a snapshot per transaction;
      // clearing it is belt and braces for a server configured otherwise.
      await client.query('SELECT pg_stat_clear_snapshot()')
      const { rows } = await client.query<{ transactions: string, tup_returned: string }>(
        'SELECT xact_commit + xact_rollback AS transactions, tup_returned FROM pg_stat_database WHERE datname = $1', [database])
      if (rows[0] === undefined) throw new Error(`pg_stat_database has no row for ${database}`)
      return { transactions: Number(rows[0].transactions), tupReturned: Number(rows[0].tup_returned) }
    }
    await sleep(waitMs)
    let last = await read()
    for (let attempt = 0; attempt < 20; attempt++) {
      await sleep(1000)
      const now = await read()
      if (now.transactions === last.transactions && now.tupReturned === last.tupReturned) return now
      last = now
    }
    log(`pg_stat_database for ${database} still moving after 20 s: taking the last read`)
    return last
  } finally {
    await client.end().catch(() => {})
  }
}

/** Whether pg_stat_statements could count statements here: available as an extension, and preloaded. */
async function pgStatStatements (): Promise<string> {
  const client = new pg.Client({ connectionString: settings.postgresUrl, connectionTimeoutMillis: 3000 })
  client.on('error', () => {})
  await client.connect()
  try {
    const { rows } = await client.query<{ version: string | null, preload: string }>(
      `SELECT (SELECT default_version FROM pg_available_extensions WHERE name = 'pg_stat_statements') AS version,
              current_setting('shared_preload_libraries') AS preload`)
    const { version, preload } = rows[0] ?? { version: null, preload: '' }
    if (version === null) return 'not available on this server'
    const loaded = preload.split(',').map((s) => s.trim()).includes('pg_stat_statements')
    return `available (${version}), ${loaded ? 'preloaded (not used: this harness counts transactions)' : 'not in shared_preload_libraries'}`
  } finally {
    await client.end().catch(() => {})
  }
}

/** get-10-pg-2x: two instances on one PostgreSQL database and Redis, loaded at once, one load generator each. */
async function scaleOutScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  if (await skippedWithoutServers(result)) return
  await Cleanup.scope(async (cleanup) => {
    const { database, env } = await scratchScaleOut(cleanup)
    const key = await prepareStore(env, 10)
    const [a, b] = await Promise.all([startService('instance A', env, key, cleanup), startService('instance B', env, key, cleanup)]) as [Target, Target]
    // The same total number of connections as every other scenario, split between the instances.
    const split = { a: Math.max(1, Math.ceil(settings.connections / 2)), b: Math.max(1, Math.floor(settings.connections / 2)) }
    const both = async (seconds: number): Promise<LoadResult> => {
      const [ra, rb] = await Promise.all([measure(a, seconds, { connections: split.a }), measure(b, seconds, { connections: split.b })])
      return combine(ra, rb)
    }
    // Twice the warm-up: each instance gets half the server core, so its JIT takes twice as long to settle.
    await both(settings.warmup * 2)
    // Idle for 11 s first, so the instances publish what the warm-up left pending (PostgreSQL 15: 10 s into
    // idleness) before the first read rather than during the measured runs; sessions opened meanwhile stay open
    // (the pool closes idle ones after 30 s). The key cache has expired by then, as it does every
    // AUTH_CACHE_TTL_MS under load anyway: the measured runs start with one round of key lookups.
    const before = await databaseCounters(database, 11_000)
    const runs: LoadResult[] = []
    for (let round = 1; round <= settings.rounds; round++) {
      const run = await both(settings.duration)
      runs.push(run)
      log(`${result.id} round ${round}/${settings.rounds}: both instances ${describeRun(run)}`)
    }
    result.service = side(runs)
    result.ceiling = ceiling
    result.ceilingFrom = ceiling === null ? null : 'get-10'
    result.instancesPeakRssMb = [memoryMb(a.proc.pid, 'VmHWM'), memoryMb(b.proc.pid, 'VmHWM')]
    const peaks = result.instancesPeakRssMb.filter((mb): mb is number => mb !== null)
    result.peakRssMb = peaks.length === 0 ? null : Math.max(...peaks)
    // Stopped before the second read: a backend publishes whatever it still holds when its session ends, so nothing
    // of the measured runs is missed. What may be added: whatever of the warm-up touched no table (kept until the
    // session ends) and the instances' shutdown (closing their pools), both small: the figure is an upper bound.
    await Promise.all([stop(a.proc), stop(b.proc)])
    const after = await databaseCounters(database, 1500)
    const requests = runs.reduce((sum, run) => sum + run.requests, 0)
    const transactions = after.transactions - before.transactions
    const tupReturned = after.tupReturned - before.tupReturned
    const perGet = requests === 0 ? null : transactions / requests
    const statements = await pgStatStatements()
    // Per request there should be none. What remains is time-based, not per request: each instance looks its key
    // up again every AUTH_CACHE_TTL_MS (more than once when concurrent requests find it expired), its pool opens
    // sessions, autovacuum visits. A statement on the request path shows as 1 or more per GET; 0.01 flags one that
    // only some requests make.
    result.checks.push({
      name: 'PostgreSQL transactions/GET',
      value: perGet,
      text: perGet === null ? '-' : perGet.toFixed(5),
      target: '0, flagged from 0.01',
      met: perGet === null ? null : perGet < 0.01,
      flag: 'POSTGRESQL TRANSACTIONS PER GET'
    })
    result.notes.push(`PostgreSQL transactions per GET (pg_stat_database xact_commit + xact_rollback, measured runs, an upper bound): ` +
      `${perGet === null ? '-' : perGet.toFixed(5)} (${transactions} for ${requests} GETs; target 0); ` +
      `tup_returned ${tupReturned} (${requests === 0 ? '-' : (tupReturned / requests).toFixed(5)} per GET); pg_stat_statements ${statements}`)
    result.details = {
      measure: 'pg_stat_database: xact_commit + xact_rollback, and tup_returned, of the scratch database over the measured runs',
      requests,
      transactions,
      transactionsPerGet: perGet,
      tupReturned,
      tupReturnedPerGet: requests === 0 ? null : tupReturned / requests,
      pgStatStatements: statements
    }
    result.notes.push(`rps summed over both instances, p99 the worse one; peak RSS per instance ${result.instancesPeakRssMb.map(fmtMb).join(' / ')} MB`)
  })
}
