/**
 * What the components of a PostgreSQL + Redis deployment count, read around the measured runs of costs-pg-2x:
 * Redis's INFO, the instances' statement counts (bench/pg-count.js) and /metrics, PostgreSQL's CPU per session
 * and its table and function counters.
 */
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Redis } from 'ioredis'
import type pg from 'pg'
import { log, type Target } from './scenario.js'
import { settings } from './settings.js'
import { cpuSeconds, describeExit } from './support.js'

/** What the harness itself sends to Redis while it measures (its INFO reads): never counted. */
export const OWN_REDIS_COMMANDS = new Set(['info'])

/** Redis's commands so far (INFO commandstats: calls and microseconds of execution, by name) and its CPU seconds. */
export interface RedisStats { calls: Record<string, number>, usec: Record<string, number>, cpuSeconds: number | null }

export async function redisStats (client: Redis): Promise<RedisStats> {
  const commands = await client.info('commandstats')
  const cpu = await client.info('cpu')
  const calls: Record<string, number> = {}
  const usec: Record<string, number> = {}
  for (const match of commands.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    calls[match[1] as string] = Number(match[2])
    usec[match[1] as string] = Number(match[3])
  }
  const field = (name: string): number | null => {
    const match = new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)
    return match === null ? null : Number(match[1])
  }
  // The main thread does all the command work with io-threads off (the default); the totals add background threads.
  const user = field('used_cpu_user_main_thread') ?? field('used_cpu_user')
  const sys = field('used_cpu_sys_main_thread') ?? field('used_cpu_sys')
  return { calls, usec, cpuSeconds: user === null || sys === null ? null : user + sys }
}

/** What bench/pg-count.js reports for one instance (see there). */
/** What bench/pg-count.js counted: queries (round trips), the statements they ran, transactions, queries by text. */
export interface PgCounts { seq: number, queries: number, statements: number, transactions: number, byStatement: Record<string, number> }

function readPgCounts (file: string): PgCounts | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as PgCounts
  } catch {
    return null
  }
}

/** Asks an instance started with bench/pg-count.js for its statement counts (SIGUSR2) and waits for the answer. */
export async function pgCounts (target: Target, file: string): Promise<PgCounts> {
  const seq = readPgCounts(file)?.seq ?? 0
  target.proc.child.kill('SIGUSR2')
  const deadline = Date.now() + 5000
  while (Date.now() < deadline) {
    const counts = readPgCounts(file)
    if (counts !== null && counts.seq > seq) return counts
    await sleep(10)
  }
  throw new Error(`${target.name} wrote no statement counts to ${file}: ${describeExit(target.proc)}`)
}

/** What an instance's /metrics (outside /v1, no key, not rate-limited) says it has done so far. */
export interface Served {
  /** Answered GET /v1/inventory and PATCH /v1/inventory/{petId}, any status. */
  get: number
  patch: number
  /** Rate-limit decisions: requests that reached the gate (one limiter call each), answered or not. */
  gated: number
  /** Switches from Redis to the in-process fallback (a Redis command failed or outlasted REDIS_COMMAND_TIMEOUT_MS). */
  fallbacks: number
}

export async function servedRequests (target: Target): Promise<Served> {
  const res = await fetch(new URL('/metrics', target.url))
  const text = await res.text()
  if (res.status !== 200) throw new Error(`${target.name} answered GET /metrics with ${res.status}: ${text.slice(0, 200)}`)
  const served: Served = { get: 0, patch: 0, gated: 0, fallbacks: 0 }
  for (const match of text.matchAll(/^(petstore_\w+)(?:\{([^}]*)\})? (\d+)/gm)) {
    const [, name, labels = '', value] = match as unknown as [string, string, string | undefined, string]
    const operation = /operation="([^"]+)"/.exec(labels)?.[1]
    if (name === 'petstore_http_requests_total' && operation === 'listInventory') served.get += Number(value)
    if (name === 'petstore_http_requests_total' && operation === 'updateInventory') served.patch += Number(value)
    if (name === 'petstore_ratelimit_decisions_total') served.gated += Number(value)
    if (name === 'petstore_ratelimit_fallbacks_total') served.fallbacks += Number(value)
  }
  return served
}

/** Whether BENCH_POSTGRES_URL names this machine, so the server's processes can be read in /proc. */
function postgresLocal (): boolean {
  return ['127.0.0.1', 'localhost', '[::1]', ''].includes(new URL(settings.postgresUrl).hostname)
}

/**
 * CPU seconds so far of the PostgreSQL processes working for `database`, by pid: its sessions (each commits and
 * flushes its own WAL) and autovacuum workers on it; null when the server is not on this machine. The server's
 * shared background processes (WAL writer, checkpointer) are left out: other databases' work would count in them.
 * `monitor` is a session on the maintenance database: it is not counted.
 */
export async function postgresCpu (monitor: pg.Client, database: string): Promise<Map<number, number> | null> {
  if (!postgresLocal()) return null
  const { rows } = await monitor.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database])
  const cpu = new Map<number, number>()
  for (const { pid } of rows) {
    const seconds = cpuSeconds(pid)
    if (seconds !== null) cpu.set(pid, seconds)
  }
  return cpu.size === 0 ? null : cpu
}

/** CPU seconds between two reads; a session that ended in between is missed (the pools keep theirs under load). */
export function postgresCpuDelta (before: Map<number, number> | null, after: Map<number, number> | null): number | null {
  if (before === null || after === null) return null
  let sum = 0
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0)
  return sum
}

/** Per table (pg_stat_user_tables) and per trigger function (pg_stat_user_functions, track_functions = 'pl'). */
export interface ServerStats { tables: Record<string, Record<string, number>>, functions: Record<string, number> }

/**
 * The scratch database's table and function counters, read over a session on it (its catalog reads touch no user
 * table and call no user function). A backend publishes its counters at most once a second, else 10 s into
 * idleness: read after `waitMs`, then every second until two reads agree.
 */
export async function serverStats (scratch: pg.Client, waitMs: number): Promise<ServerStats> {
  const read = async (): Promise<ServerStats> => {
    await scratch.query('SELECT pg_stat_clear_snapshot()')
    const { rows: tables } = await scratch.query<{ relname: string, ins: string, upd: string, hot: string, del: string, idx: string, seq: string }>(
      `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del,
         coalesce(idx_scan, 0) AS idx, seq_scan AS seq FROM pg_stat_user_tables`)
    const { rows: functions } = await scratch.query<{ funcname: string, calls: string }>('SELECT funcname, calls FROM pg_stat_user_functions')
    return {
      tables: Object.fromEntries(tables.map((t) => [t.relname, { inserted: Number(t.ins), updated: Number(t.upd), hotUpdated: Number(t.hot), deleted: Number(t.del), indexScans: Number(t.idx), seqScans: Number(t.seq) }])),
      functions: Object.fromEntries(functions.map((f) => [f.funcname, Number(f.calls)]))
    }
  }
  await sleep(waitMs)
  let last = await read()
  for (let attempt = 0; attempt < 20; attempt++) {
    await sleep(1000)
    const now = await read()
    if (JSON.stringify(now) === JSON.stringify(last)) return now
    last = now
  }
  log('pg_stat_user_tables still moving after 20 s: taking the last read')
  return last
}

/** `after - before` per table counter and function, divided by `per`; zeros left out. */
export function serverStatsPer (before: ServerStats, after: ServerStats, per: number): { tables: Record<string, Record<string, number>>, functions: Record<string, number> } {
  const tables: Record<string, Record<string, number>> = {}
  for (const [name, counters] of Object.entries(after.tables)) {
    const changed = Object.entries(counters)
      .map(([counter, value]) => [counter, (value - (before.tables[name]?.[counter] ?? 0)) / per] as const)
      .filter(([, value]) => value !== 0)
    if (changed.length > 0) tables[name] = Object.fromEntries(changed)
  }
  const functions = Object.fromEntries(Object.entries(after.functions)
    .map(([name, calls]) => [name, (calls - (before.functions[name] ?? 0)) / per] as const).filter(([, value]) => value !== 0))
  return { tables, functions }
}
