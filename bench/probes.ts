/**
 * costs-pg-2x's two probes from the servers' side, with the instances idle: what bounds writes on PostgreSQL
 * (commitProbe) and Redis's own throughput for the service's commands (redisThroughput).
 */
import { Redis } from 'ioredis'
import pg from 'pg'
import { sharedRedis } from '../src/redis/connect.js'
import { postgresCpu, postgresCpuDelta, redisStats } from './counters.js'
import { log } from './scenario.js'
import { settings } from './settings.js'
import { hasCommand, median, runCommand } from './support.js'

/** The commit probe's sessions, sequential statements and seconds, and the pets its ledger writes go to. */
export interface CommitProbeSettings { writers: number, sequential: number, probeSeconds: number, pets: number }

/**
 * A ledger write as the service's PATCH makes it, from the database side: the entry updated (the inventory_version
 * trigger), a ledger row inserted (feed_clock's deferred trigger at commit), one autocommit statement.
 */
const LEDGER_WRITE = `WITH u AS (UPDATE inventory SET revision = revision + 1 WHERE pet_id = $1 RETURNING pet_id, quantity)
  INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, created_at)
  SELECT pet_id, quantity, quantity, 'adjustment', now() FROM u`

interface Latency { meanMs: number, p50Ms: number }

/** The commit probe's findings (see commitProbe). */
export interface CommitProbe {
  /** PostgreSQL CPU per ledger write (see postgresCpu), one session after another and all sessions at once. */
  ledgerWriteCpuUs: number | null
  ledgerWriteConcurrentCpuUs: number | null
  roundTrip: Latency
  commit: Latency
  ledgerWrite: Latency
  commitsPerSecondConcurrent: number
  ledgerWritesPerSecondConcurrent: number
  /**
   * The same write as BEGIN, the statement, COMMIT (three round trips: a single statement behind a transaction-mode
   * pooler without the role's statement_timeout runs so): the store-wide rows stay locked across the round trips.
   */
  ledgerWriteInTransaction: Latency
  ledgerWritesPerSecondConcurrentInTransaction: number
  writers: number
}

/**
 * What bounds writes on this PostgreSQL, from the database side, on the scratch database with the instances idle:
 * one session's sequential latency of `SELECT 1` (the round trip), of a one-row UPDATE in a table of the probe's own
 * (a commit: its WAL flush), and of LEDGER_WRITE; then `writers` sessions at once for probeSeconds, each updating its
 * own row of the probe's table (commits that share nothing: group commit), and each doing LEDGER_WRITE on its own pet
 * (commits that take turns at inventory_version and feed_clock). The probe's table is dropped again.
 */
export async function commitProbe (url: string, monitor: pg.Client, database: string, costs: CommitProbeSettings): Promise<CommitProbe> {
  const open = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 })
    client.on('error', () => {})
    await client.connect()
    return client
  }
  const clients = await Promise.all(Array.from({ length: costs.writers }, open))
  const first = clients[0] as pg.Client
  try {
    await first.query('CREATE TABLE bench_commit (id integer PRIMARY KEY, n bigint NOT NULL)')
    await first.query('INSERT INTO bench_commit SELECT g, 0 FROM generate_series(1, $1::integer) g', [costs.writers])
    const sequential = async (sql: string, values: unknown[]): Promise<Latency> => {
      const times: number[] = []
      for (let i = 0; i < costs.sequential; i++) {
        const started = performance.now()
        await first.query(sql, values)
        times.push(performance.now() - started)
      }
      return { meanMs: times.reduce((sum, t) => sum + t, 0) / times.length, p50Ms: median(times) }
    }
    const inTransaction = async (client: pg.Client, values: unknown[]): Promise<void> => {
      await client.query('BEGIN')
      await client.query(LEDGER_WRITE, values)
      await client.query('COMMIT')
    }
    const sequentialInTransaction = async (): Promise<Latency> => {
      const times: number[] = []
      for (let i = 0; i < costs.sequential; i++) {
        const started = performance.now()
        await inTransaction(first, [1])
        times.push(performance.now() - started)
      }
      return { meanMs: times.reduce((sum, t) => sum + t, 0) / times.length, p50Ms: median(times) }
    }
    let writes = 0
    const concurrently = async (sql: string | null, values: (i: number) => unknown[]): Promise<number> => {
      const end = performance.now() + costs.probeSeconds * 1000
      const done = await Promise.all(clients.map(async (client, i) => {
        let n = 0
        while (performance.now() < end) {
          if (sql === null) await inTransaction(client, values(i))
          else await client.query(sql, values(i))
          n++
        }
        return n
      }))
      writes = done.reduce((sum, n) => sum + n, 0)
      return writes / costs.probeSeconds
    }
    const cpuPerWrite = (before: Map<number, number> | null, after: Map<number, number> | null, n: number): number | null => {
      const cpu = postgresCpuDelta(before, after)
      return cpu === null || n === 0 ? null : cpu * 1e6 / n
    }
    const roundTrip = await sequential('SELECT 1', [])
    const commit = await sequential('UPDATE bench_commit SET n = n + 1 WHERE id = 1', [])
    const cpuBefore = await postgresCpu(monitor, database)
    const ledgerWrite = await sequential(LEDGER_WRITE, [1])
    const cpuBetween = await postgresCpu(monitor, database)
    const commitsPerSecondConcurrent = await concurrently('UPDATE bench_commit SET n = n + 1 WHERE id = $1', (i) => [i + 1])
    const cpuThen = await postgresCpu(monitor, database)
    const ledgerWritesPerSecondConcurrent = await concurrently(LEDGER_WRITE, (i) => [(i % costs.pets) + 1])
    const cpuAfter = await postgresCpu(monitor, database)
    const ledgerWriteInTransaction = await sequentialInTransaction()
    const ledgerWritesPerSecondConcurrentInTransaction = await concurrently(null, (i) => [(i % costs.pets) + 1])
    await first.query('DROP TABLE bench_commit')
    return {
      roundTrip,
      commit,
      ledgerWrite,
      commitsPerSecondConcurrent,
      ledgerWritesPerSecondConcurrent,
      ledgerWriteInTransaction,
      ledgerWritesPerSecondConcurrentInTransaction,
      writers: costs.writers,
      ledgerWriteCpuUs: cpuPerWrite(cpuBefore, cpuBetween, costs.sequential),
      ledgerWriteConcurrentCpuUs: cpuPerWrite(cpuThen, cpuAfter, writes)
    }
  } finally {
    await Promise.all(clients.map(async (client) => { await client.end().catch(() => {}) }))
  }
}

/** One redis-benchmark run: its requests/s, and Redis's main-thread CPU and execution time per call (of `command`, top level). */
export interface RedisProbe { name: string, command: string, rps: number, calls: number, cpuUsPerCall: number | null, execUsPerCall: number | null }

/**
 * Redis's own throughput for the commands the service sends (redis-benchmark on the load core, the bench's
 * connections, keys under the scenario's prefix): the consume script (EVALSHA, as the service calls it, admitting),
 * GET and INCR of a change counter copy (what Redis Cluster mode adds), and the announce script where the limiter
 * has one (each write runs it on the counter, or on every copy on a Cluster). CPU per call from INFO cpu, which a
 * saturated Redis spends per command; `requests` per probe; a string says why it was not measured.
 */
export async function redisThroughput (redisUrl: string, prefix: string, requests: number): Promise<RedisProbe[] | string> {
  if (!hasCommand('redis-benchmark')) return 'redis-benchmark is not installed'
  const url = new URL(redisUrl)
  if (url.password !== '' || url.protocol !== 'redis:') return 'BENCH_REDIS_URL has a password or TLS: not passed to redis-benchmark'
  const client = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  try {
    // The limiter loads its script on first use; ioredis keeps the SHA1 of each script it defines.
    const { limiter, changes } = sharedRedis(client, prefix)
    await limiter.consume({ kind: 'key', id: 'bench' }, { perMinute: 1_000_000_000, perDay: 1_000_000_000 })
    await changes.count()
    const scripts = (client as unknown as { scriptsSet?: Record<string, { sha?: string }> }).scriptsSet
    const sha = scripts?.petstoreRateLimitConsume?.sha
    if (sha === undefined) return 'the consume script\'s SHA1 was not found on the ioredis client'
    // Since 88bc14b a change is announced by a script (the counter set to at least Redis TIME); before, by INCR.
    const announce = scripts?.petstoreAnnounceChange?.sha
    const base = ['redis-benchmark', '-h', url.hostname === '' ? '127.0.0.1' : url.hostname.replace(/^\[|\]$/g, ''), '-p', url.port === '' ? '6379' : url.port,
      ...(url.pathname.length > 1 ? ['--dbnum', url.pathname.slice(1)] : []), '-c', String(settings.connections), '-n', String(requests), '--csv']
    const probes = [
      { name: 'consume script', top: 'evalsha', keyspace: 10_000, command: ['EVALSHA', sha, '4', `${prefix}{bench:__rand_int__}:m`, `${prefix}{bench:__rand_int__}:d`,
        `${prefix}{bench:__rand_int__}:s`, `${prefix}changes`, '1000000000', '1000000000', '0', '0', '5', '0', '1'] },
      { name: 'GET of a change counter copy', top: 'get', keyspace: 16, command: ['GET', `${prefix}changes:__rand_int__`] },
      { name: 'INCR of a change counter copy', top: 'incr', keyspace: 16, command: ['INCR', `${prefix}changes:__rand_int__`] },
      ...(announce === undefined
        ? []
        : [{ name: 'announce script on a counter copy', top: 'evalsha', keyspace: 16, command: ['EVALSHA', announce, '1', `${prefix}changes:__rand_int__`] }])
    ]
    const out: RedisProbe[] = []
    for (const probe of probes) {
      const before = await redisStats(client)
      const { stdout } = await runCommand([...base, '-r', String(probe.keyspace), ...probe.command], {}, 'load', 300_000)
      const after = await redisStats(client)
      const line = stdout.trim().split('\n').pop() ?? ''
      const rps = Number(line.split('","')[1])
      const calls = (after.calls[probe.top] ?? 0) - (before.calls[probe.top] ?? 0)
      const usec = (after.usec[probe.top] ?? 0) - (before.usec[probe.top] ?? 0)
      out.push({
        name: probe.name,
        command: probe.command[0] as string,
        rps,
        calls,
        cpuUsPerCall: after.cpuSeconds === null || before.cpuSeconds === null || calls === 0 ? null : (after.cpuSeconds - before.cpuSeconds) * 1e6 / calls,
        execUsPerCall: calls === 0 ? null : usec / calls
      })
      log(`costs-pg-2x: redis-benchmark ${probe.name}: ${Math.round(rps)} requests/s, Redis CPU ${out.at(-1)?.cpuUsPerCall?.toFixed(1) ?? '-'} us per call`)
    }
    return out
  } finally {
    client.disconnect()
  }
}
