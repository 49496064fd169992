/**
 * `npm run bench`: the service against a bare node:http ceiling, on this machine, in one run. See
 * bench/README.md for the scenarios and the knobs. Every process, database and Redis key it creates is
 * removed again, also when a scenario fails or the run is interrupted.
 */
import { spawnSync } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, release, tmpdir, totalmem, platform } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import pg from 'pg'
import { RedisLimiter } from '../src/ratelimit/redis.js'
import { cleanRedis, redisReachable } from '../test/ratelimit/redis-env.js'
import type { ClientResult, ClientSpec, ProbeResult, ProbeSpec } from './listing.js'
import type { LoadResult, LoadSpec } from './load.js'
import {
  Cleanup, cleanupOnSignals, cpuSeconds, describeExit, freePort, median, memoryMb, PINNING, ROOT,
  runCommand, runNode, startCommand, startNode, stop, waitHttp, waitOutput, type Proc
} from './support.js'

const BIN = join(ROOT, 'bin/petstore.js')
const LOAD = join(ROOT, 'bench/load.ts')
const BARE = join(ROOT, 'bench/bare-server.js')
const LISTING_CLIENTS = join(ROOT, 'bench/listing.ts')
const PEER_DIR = join(ROOT, 'bench/peer')
const WRK_SCRIPT = join(ROOT, 'bench/wrk.lua')
const PG_COUNT = join(ROOT, 'bench/pg-count.js')
const RESULTS = join(ROOT, 'bench/results')

function hasCommand (name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`]).status === 0
}

function numberFromEnv (name: string, fallback: number, integer: boolean): number {
  const text = process.env[name]
  if (text === undefined || text === '') return fallback
  const value = Number(text)
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    console.error(`bench: ${name} must be a positive ${integer ? 'integer' : 'number'}, got "${text}"`)
    process.exit(2)
  }
  return value
}

const QUICK = process.env.BENCH_QUICK === '1'
const settings = {
  quick: QUICK,
  rounds: numberFromEnv('BENCH_ROUNDS', QUICK ? 1 : 3, true),
  duration: numberFromEnv('BENCH_DURATION', QUICK ? 2 : 5, false),
  // PostgreSQL instances sharing a core need a few seconds before they reach their pace.
  warmup: numberFromEnv('BENCH_WARMUP', QUICK ? 1 : 3, false),
  connections: numberFromEnv('BENCH_CONNECTIONS', 50, true),
  postgresUrl: process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
  // wrk when installed: a C load generator parses a 475 KB response far faster than autocannon, which on one
  // core becomes the limit before the bare server does.
  loadGenerator: process.env.BENCH_LOADGEN ?? (hasCommand('wrk') ? 'wrk' : 'autocannon'),
  only: (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
}

/** Pets in the store of the PATCH scenario: enough that the writes do not all hit the same few rows. */
const PATCH_PETS = 10_000
const UNBOUNDED_KEY = ['keys', 'create', '--plan', 'enterprise', '--name', 'bench', '--per-minute', '1000000000', '--per-day', '1000000000']

interface Side {
  rps: number
  p50: number
  p99: number
  non2xx: number
  errors: number
  /** Medians, in % of one core: a server well below 100 while the load generator is near 100 is not saturated. */
  serverCpuPct: number | null
  loadCpuPct: number
  runs: LoadResult[]
}

/** A target other than the ratio: the measured value, how it reads, the target, and the flag when it is missed. */
interface Check {
  name: string
  value: number | null
  text: string
  target: string
  met: boolean | null
  flag: string
}

interface ScenarioResult {
  id: string
  title: string
  status: 'ok' | 'failed' | 'skipped'
  service: Side | null
  ceiling: Side | null
  /** Where the ceiling comes from: this scenario's own bare server, or the one of get-10. */
  ceilingFrom: string | null
  ratio: number | null
  target: number | null
  peakRssMb: number | null
  flags: string[]
  notes: string[]
  /** Targets other than the ratio (service / peer, /healthz p99, peak RSS, PostgreSQL transactions per GET). */
  checks: Check[]
  /** The scenario's own figures for the JSON summary. */
  details?: Record<string, unknown>
  memory?: { responseMb: number, rssBeforeMb: number | null, rssAfterMb: number | null }
  instancesPeakRssMb?: Array<number | null>
}

interface Target { name: string, url: string, headers: Record<string, string>, proc: Proc }

const log = (text: string): void => { process.stderr.write(`bench: ${text}\n`) }
const round1 = (n: number): string => n.toFixed(1)
const hex = (): string => randomBytes(5).toString('hex')

// ---------------------------------------------------------------------------------------------------------
// Stores, servers, load

let workDir = ''
const petFiles = new Map<number, string>()

/** An import file with `count` pets, ids 1..count, each with a stock entry (written once per run). */
function petsFile (count: number): string {
  const existing = petFiles.get(count)
  if (existing !== undefined) return existing
  const statuses = ['available', 'pending', 'sold']
  const pets = Array.from({ length: count }, (_, i) => ({ id: i + 1, name: `Pet ${i + 1}`, status: statuses[i % 3], quantity: (i * 7) % 100 }))
  const file = join(workDir, `pets-${count}.json`)
  writeFileSync(file, JSON.stringify({ pets, orders: [] }))
  petFiles.set(count, file)
  return file
}

function scenarioDir (id: string): string {
  return mkdtempSync(join(workDir, `${id}-`))
}

const cli = (args: string[], env: Record<string, string>, timeoutMs?: number): Promise<string> => runNode([BIN, ...args], env, undefined, timeoutMs)

/** Migrates, imports `pets` pets and creates a key whose limits never bind; returns the key. */
async function prepareStore (env: Record<string, string>, pets: number, importTimeoutMs?: number): Promise<string> {
  await cli(['migrate'], env)
  await cli(['import', petsFile(pets)], env, importTimeoutMs)
  return (await cli(UNBOUNDED_KEY, env)).trim()
}

/** `nodeArgs` go before the script (e.g. `--import bench/pg-count.js`). */
async function startService (name: string, env: Record<string, string>, key: string, cleanup: Cleanup, nodeArgs: string[] = []): Promise<Target> {
  const port = await freePort()
  // No drain on SIGTERM: nothing balances in front of a benchmarked server.
  const proc = startNode([...nodeArgs, BIN, 'serve'], { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: '0' }, 'server')
  cleanup.defer(() => stop(proc))
  await waitHttp(`http://127.0.0.1:${port}/healthz`, proc)
  return { name, url: `http://127.0.0.1:${port}/v1/inventory`, headers: { authorization: `Bearer ${key}` }, proc }
}

/**
 * The bare server, serving the bytes the service answers now (fetched once). Returns it, the body size, the file
 * holding the body and the content type.
 */
async function startCeiling (
  service: Target, dir: string, cleanup: Cleanup
): Promise<{ target: Target, bytes: number, bodyFile: string, contentType: string }> {
  const res = await fetch(service.url, { headers: service.headers })
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) throw new Error(`GET /v1/inventory answered ${res.status}: ${body.toString().slice(0, 200)}`)
  const contentType = res.headers.get('content-type') ?? 'application/json'
  const file = join(dir, 'inventory.body')
  writeFileSync(file, body)
  const proc = startNode([BARE, file, contentType], {}, 'server')
  cleanup.defer(() => stop(proc))
  const port = await waitOutput(proc, /listening (\d+)/)
  const target = { name: 'ceiling', url: `http://127.0.0.1:${port}/v1/inventory`, headers: service.headers, proc }
  const check = await fetch(target.url)
  const same = Buffer.from(await check.arrayBuffer()).equals(body) && check.headers.get('content-type') === contentType
  if (!same) throw new Error('the bare server does not answer the service\'s bytes')
  return { target, bytes: body.length, bodyFile: file, contentType }
}

interface WrkSummary {
  requests: number, durationUs: number, status: number, connect: number, read: number, write: number, timeout: number, p50Us: number, p99Us: number
}

/** One autocannon run (see bench/load.ts). */
async function autocannon (spec: LoadSpec): Promise<LoadResult> {
  const stdout = await runNode(['--import', 'tsx', LOAD, JSON.stringify(spec)], {}, 'load', (spec.duration + 60) * 1000)
  return JSON.parse(stdout.trim().split('\n').pop() ?? '') as LoadResult
}

/** One wrk run (see bench/wrk.lua); wrk counts only statuses above 399 as errors. */
async function wrk (spec: LoadSpec): Promise<LoadResult> {
  const args = ['wrk', '-t1', `-c${spec.connections}`, `-d${spec.duration}s`, '--timeout', '10s', '-s', WRK_SCRIPT]
  for (const [name, value] of Object.entries(spec.headers)) args.push('-H', `${name}: ${value}`)
  args.push(spec.url, '--', String(spec.patchPets ?? 0), String(spec.patchEvery ?? 1))
  const { stdout, cpuSeconds: cpu } = await runCommand(args, {}, 'load', (spec.duration + 60) * 1000)
  const line = stdout.trim().split('\n').filter((l) => l.startsWith('{')).pop()
  if (line === undefined) throw new Error(`wrk printed no summary: ${stdout.slice(-500)}`)
  const w = JSON.parse(line) as WrkSummary
  const elapsed = w.durationUs / 1e6
  return {
    rps: w.requests / elapsed,
    p50: w.p50Us / 1000,
    p99: w.p99Us / 1000,
    requests: w.requests,
    non2xx: w.status,
    errors: w.connect + w.read + w.write + w.timeout,
    timeouts: w.timeout,
    statusCodes: w.status === 0 ? {} : { '>399': w.status },
    loadCpuPct: cpu === null ? 0 : cpu * 100 / elapsed,
    serverCpuPct: null
  }
}

/** One run of the load generator against `target`, in its own process on the load generator's core. */
async function measure (target: Target, seconds: number, extra: Partial<LoadSpec> = {}): Promise<LoadResult> {
  if (!target.proc.running()) throw new Error(`${target.name} is not running: ${describeExit(target.proc)}`)
  // wrk takes whole seconds.
  const duration = settings.loadGenerator === 'wrk' ? Math.max(1, Math.round(seconds)) : seconds
  const spec: LoadSpec = { url: target.url, connections: settings.connections, duration, headers: target.headers, ...extra }
  const cpuBefore = cpuSeconds(target.proc.pid)
  const result = settings.loadGenerator === 'wrk' ? await wrk(spec) : await autocannon(spec)
  const cpuAfter = cpuSeconds(target.proc.pid)
  if (!target.proc.running()) throw new Error(`${target.name} died under load: ${describeExit(target.proc)}`)
  // Over the run's duration: the load generator's own start-up puts no load on the server.
  result.serverCpuPct = cpuBefore === null || cpuAfter === null ? null : (cpuAfter - cpuBefore) * 100 / duration
  return result
}

function side (runs: LoadResult[]): Side {
  return {
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    // Every response of every measured run counts: one bad run is enough to flag the scenario.
    non2xx: runs.reduce((sum, r) => sum + r.non2xx, 0),
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    serverCpuPct: runs.every((r) => r.serverCpuPct !== null) ? median(runs.map((r) => r.serverCpuPct as number)) : null,
    loadCpuPct: median(runs.map((r) => r.loadCpuPct)),
    runs
  }
}

/** Two simultaneous runs (one per instance) as one: summed throughput, request-weighted p50, worst p99. */
function combine (a: LoadResult, b: LoadResult): LoadResult {
  const requests = a.requests + b.requests
  const statusCodes: Record<string, number> = { ...a.statusCodes }
  for (const [code, count] of Object.entries(b.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count
  return {
    rps: a.rps + b.rps,
    p50: requests === 0 ? 0 : (a.p50 * a.requests + b.p50 * b.requests) / requests,
    p99: Math.max(a.p99, b.p99),
    requests,
    non2xx: a.non2xx + b.non2xx,
    errors: a.errors + b.errors,
    timeouts: a.timeouts + b.timeouts,
    statusCodes,
    // Both instances share the server core and both generators the load core: the sums are per core.
    loadCpuPct: a.loadCpuPct + b.loadCpuPct,
    serverCpuPct: a.serverCpuPct === null || b.serverCpuPct === null ? null : a.serverCpuPct + b.serverCpuPct
  }
}

const ms = (n: number): string => String(Math.round(n * 100) / 100)
const pct = (n: number | null): string => n === null ? '-' : `${Math.round(n)}%`

const describeRun = (r: LoadResult): string =>
  `${Math.round(r.rps)} rps, p50 ${ms(r.p50)} ms, p99 ${ms(r.p99)} ms, CPU server ${pct(r.serverCpuPct)} load ${pct(r.loadCpuPct)}${r.non2xx + r.errors > 0 ? `, non-2xx ${r.non2xx}, errors ${r.errors} ${JSON.stringify(r.statusCodes)}` : ''}`

// ---------------------------------------------------------------------------------------------------------
// Scenarios

function emptyResult (id: string, title: string, target: number | null): ScenarioResult {
  return { id, title, status: 'ok', service: null, ceiling: null, ceilingFrom: null, ratio: null, target, peakRssMb: null, flags: [], notes: [], checks: [] }
}

/** The ratio to the ceiling and the flags: errors, non-2xx answers, and a ratio below target. */
function finish (result: ScenarioResult): ScenarioResult {
  const { service, ceiling } = result
  if (service !== null && ceiling !== null) result.ratio = service.rps / ceiling.rps
  if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.non2xx + ceiling.errors > 0) result.flags.push('ceiling errors')
  if (service !== null && service.non2xx > 0) result.flags.push(`non-2xx: ${service.non2xx}`)
  if (service !== null && service.errors > 0) result.flags.push(`connection errors: ${service.errors}`)
  // A run that completed nothing measured nothing, however clean its status counts look.
  if (service !== null && service.runs.some((r) => r.requests === 0)) result.flags.push('a run completed no request')
  if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.runs.some((r) => r.requests === 0)) result.flags.push('a ceiling run completed no request')
  // A saturated load generator facing an idle bare server measured the generator: the ratio says nothing.
  if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.loadCpuPct >= 90 && (ceiling.serverCpuPct ?? 100) < 80) {
    result.flags.push('LOAD GENERATOR BOUND')
  } else if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.loadCpuPct >= 90 && (ceiling.serverCpuPct ?? 100) < 95) {
    result.notes.push(`the ceiling is partly load-generator bound (bare server ${Math.round(ceiling.serverCpuPct ?? 0)}% CPU, ` +
      `${settings.loadGenerator} ${Math.round(ceiling.loadCpuPct)}%): the ratio is an upper bound`)
  }
  if (result.ratio !== null && result.target !== null && result.ratio < result.target) result.flags.push('BELOW TARGET')
  for (const check of result.checks) if (check.met === false) result.flags.push(check.flag)
  return result
}

/** What the peer's rounds measured (see peerScenario), or why the peer could not be measured. */
interface PeerRounds {
  peer: Side | null
  /** The service and the ceiling of the same rounds. */
  service: Side
  ceiling: Side
  peakRssMb: number | null
  /** Whether the peer answered exactly the service's bytes and content type (and so the same ceiling applies). */
  sameBytes: boolean
  error: Error | null
}

/** bench/peer's own dependencies (bench/peer/package.json and its lock), installed once, on first use. */
let peerInstall: Promise<void> | null = null

function installPeer (): Promise<void> {
  const missing = ['fastify', '@fastify/bearer-auth', '@fastify/rate-limit', 'better-sqlite3']
    .filter((name) => !existsSync(join(PEER_DIR, 'node_modules', name, 'package.json')))
  if (missing.length === 0) return Promise.resolve()
  peerInstall ??= (async () => {
    log(`installing bench/peer's dependencies (missing: ${missing.join(', ')}): npm install --prefix bench/peer`)
    // The caller's whole environment: npm needs HOME, its cache and its configuration (scripts/use-node.sh).
    const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined))
    await runCommand(['npm', 'install', '--prefix', PEER_DIR, '--no-audit', '--no-fund'], env, undefined, 600_000)
  })()
  return peerInstall
}

/** The peer (bench/peer/server.js) on a WAL file in `dir`, filled with the rows of the service's answer in `bodyFile`. */
async function startPeer (dir: string, bodyFile: string, cleanup: Cleanup): Promise<Target> {
  await installPeer()
  const key = `peer_${randomBytes(24).toString('base64url')}`
  const keyHash = createHash('sha256').update(key).digest('hex')
  const proc = startNode([join(PEER_DIR, 'server.js'), join(dir, 'peer.db'), bodyFile, keyHash], {}, 'server')
  cleanup.defer(() => stop(proc))
  const port = await waitOutput(proc, /listening (\d+)/)
  return { name: 'peer', url: `http://127.0.0.1:${port}/v1/inventory`, headers: { authorization: `Bearer ${key}` }, proc }
}

/**
 * Scenarios 1 and 2: GET /v1/inventory on `pets` entries, alternating with the bare server. With `withPeer`, the
 * peer runs in the same rounds (ceiling, service, peer) on the same ten entries, and its runs are returned; a peer
 * that cannot start is reported in the result's `error`, and the service and ceiling are measured regardless.
 */
async function getVsCeiling (result: ScenarioResult, pets: number, withPeer = false): Promise<PeerRounds | null> {
  return await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const service = await startService('service', env, await prepareStore(env, pets), cleanup)
    const { target: ceiling, bytes, bodyFile, contentType } = await startCeiling(service, dir, cleanup)
    result.notes.push(`response ${bytes} bytes`)
    let peer: Target | null = null
    let peerError: Error | null = null
    let sameBytes = false
    if (withPeer) {
      try {
        peer = await startPeer(dir, bodyFile, cleanup)
        const answer = await fetch(peer.url, { headers: peer.headers })
        const body = Buffer.from(await answer.arrayBuffer())
        if (answer.status !== 200) throw new Error(`the peer answered ${answer.status}: ${body.toString().slice(0, 200)}`)
        sameBytes = body.equals(readFileSync(bodyFile)) && answer.headers.get('content-type') === contentType
      } catch (error) {
        peerError = error as Error
        peer = null
        log(`${result.id}: the peer is not measured: ${peerError.message}`)
      }
    }
    await measure(ceiling, settings.warmup)
    await measure(service, settings.warmup)
    if (peer !== null) await measure(peer, settings.warmup)
    const ceilingRuns: LoadResult[] = []
    const serviceRuns: LoadResult[] = []
    const peerRuns: LoadResult[] = []
    for (let round = 1; round <= settings.rounds; round++) {
      const c = await measure(ceiling, settings.duration)
      const s = await measure(service, settings.duration)
      const p = peer === null ? null : await measure(peer, settings.duration)
      ceilingRuns.push(c)
      serviceRuns.push(s)
      if (p !== null) peerRuns.push(p)
      log(`${result.id} round ${round}/${settings.rounds}: ceiling ${describeRun(c)}; service ${describeRun(s)}${p === null ? '' : `; peer ${describeRun(p)}`}`)
    }
    result.ceiling = side(ceilingRuns)
    result.ceilingFrom = 'own'
    result.service = side(serviceRuns)
    result.peakRssMb = memoryMb(service.proc.pid, 'VmHWM')
    if (peer !== null) result.notes.push('the peer ran in the same rounds, after the service (see peer)')
    if (!withPeer) return null
    return {
      peer: peer === null ? null : side(peerRuns),
      service: result.service,
      ceiling: result.ceiling,
      peakRssMb: peer === null ? null : memoryMb(peer.proc.pid, 'VmHWM'),
      sameBytes,
      error: peerError
    }
  })
}

/** Scenario 2b: 100,000 entries, memory only: resident set before and after one shorter run. */
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

/** Runs `rounds` measured runs against one service, after a warm-up; the ceiling is get-10's. */
async function serviceOnly (result: ScenarioResult, service: Target, ceiling: Side | null, extra: Partial<LoadSpec> = {}): Promise<void> {
  await measure(service, settings.warmup, extra)
  const runs: LoadResult[] = []
  for (let round = 1; round <= settings.rounds; round++) {
    const run = await measure(service, settings.duration, extra)
    runs.push(run)
    log(`${result.id} round ${round}/${settings.rounds}: service ${describeRun(run)}`)
  }
  result.service = side(runs)
  result.ceiling = ceiling
  result.ceilingFrom = ceiling === null ? null : 'get-10'
  result.peakRssMb = memoryMb(service.proc.pid, 'VmHWM')
}

/** Scenario 3: PATCH with durable commits (SQLite, synchronous=FULL by default), rotating over the pets. */
async function patchScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const service = await startService('service', env, await prepareStore(env, PATCH_PETS), cleanup)
    result.notes.push(`${PATCH_PETS} pets, ratio against get-10's ceiling (GET)`)
    await serviceOnly(result, service, ceiling, { patchPets: PATCH_PETS })
  })
}


/**
 * The peer (bench/peer/server.js): GET /v1/inventory built the usual way, Fastify 5 + @fastify/bearer-auth +
 * @fastify/rate-limit + a better-sqlite3 query of a WAL file and schema serialization on every request, answering
 * the service's ten entries byte for byte. It is measured in get-10's rounds (ceiling, service, peer), so all three
 * share one ceiling; without get-10 (BENCH_ONLY, or get-10 failed) the same three-way rounds run here. The ratio
 * is the peer's to the ceiling; the check is the service's requests/s over the peer's, same rounds: at least 2.
 */
async function peerScenario (result: ScenarioResult, fromGet10: PeerRounds | null): Promise<void> {
  const rounds = fromGet10 ?? await getVsCeiling(emptyResult('peer', 'the service beside the peer', null), 10, true)
  if (rounds === null) throw new Error('get-10 returned no peer rounds')
  if (rounds.error !== null) throw rounds.error
  if (rounds.peer === null) throw new Error('the peer was not measured')
  result.service = rounds.peer
  result.ceiling = rounds.ceiling
  // Shared with get-10: get-10's row flags the ceiling's own problems.
  result.ceilingFrom = fromGet10 === null ? 'own' : 'get-10'
  result.peakRssMb = rounds.peakRssMb
  const times = rounds.peer.rps > 0 ? rounds.service.rps / rounds.peer.rps : null
  result.checks.push({
    name: 'service/peer',
    value: times,
    text: times === null ? '-' : `${times.toFixed(2)}x`,
    target: '>= 2x',
    met: times === null ? null : times >= 2,
    flag: 'SERVICE BELOW 2x PEER'
  })
  if (!rounds.sameBytes) result.flags.push('PEER ANSWER DIFFERS FROM THE SERVICE\'S')
  result.notes.push(`the peer in ${fromGet10 === null ? 'its own' : 'get-10\'s'} rounds (ceiling, service, peer); ` +
    `service ${Math.round(rounds.service.rps)} rps, p99 ${rounds.service.p99.toFixed(2)} ms in the same rounds; ` +
    `service / peer ${times === null ? '-' : times.toFixed(2)}x (target >= 2x)` +
    (rounds.sameBytes ? '; the peer answers the service\'s bytes and content type' : '; the peer does NOT answer the service\'s bytes and content type'))
  result.details = {
    serviceRps: rounds.service.rps,
    serviceP99: rounds.service.p99,
    serviceOverPeer: times,
    sameBytesAsService: rounds.sameBytes,
    roundsFrom: fromGet10 === null ? 'own' : 'get-10'
  }
}

/**
 * The framework floors (bench/peer/floor.js): Fastify 5 sending fixed bytes, bare or with the response fields the
 * service sends, alternating with a bare server sending the same bytes. References, no target.
 */
async function floorScenario (result: ScenarioResult, kind: 'floor' | 'fastify' | 'gate'): Promise<void> {
  await installPeer()
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const pets = Array.from({ length: 10 }, (_, i) => ({ petId: i + 1, quantity: i + 1, status: 'available' }))
    writeFileSync(join(dir, 'body.json'), JSON.stringify(pets))
    const key = 'psk_live_floorgatefloorgatefloorgate00'
    const mode = kind === 'fastify' ? ['bare'] : kind === 'gate' ? ['gate'] : []
    const proc = startNode([join(PEER_DIR, 'floor.js'), join(dir, 'body.json'), ...mode], { BENCH_KEY: key }, 'server')
    cleanup.defer(() => stop(proc))
    const port = await waitOutput(proc, /listening (\d+)/)
    const headers: Record<string, string> = kind === 'gate' ? { Authorization: `Bearer ${key}` } : {}
    const floor: Target = { name: kind, url: `http://127.0.0.1:${port}/v1/inventory`, headers, proc }
    const { target: ceiling, bytes } = await startCeiling(floor, dir, cleanup)
    await measure(ceiling, settings.warmup)
    await measure(floor, settings.warmup)
    const ceilingRuns: LoadResult[] = []
    const floorRuns: LoadResult[] = []
    for (let round = 1; round <= settings.rounds; round++) {
      const c = await measure(ceiling, settings.duration)
      const f = await measure(floor, settings.duration)
      ceilingRuns.push(c)
      floorRuns.push(f)
      log(`${result.id} round ${round}/${settings.rounds}: ceiling ${describeRun(c)}; ${kind} ${describeRun(f)}`)
    }
    result.ceiling = side(ceilingRuns)
    result.ceilingFrom = 'own'
    result.service = side(floorRuns)
    result.peakRssMb = memoryMb(proc.pid, 'VmHWM')
    result.notes.push(`${kind} answers ${bytes} bytes (10 entries); its ratio is its own to the ceiling`)
  })
}

/** listing-1m: pets in the store, seconds of load (quick: 5), the probe interval and the targets. */
const LISTING = { pets: 1_000_000, seconds: 15, quickSeconds: 5, probeIntervalMs: 10, healthzP99Ms: 50, peakRssMb: 600 }

/**
 * 1,000,000 pets (imported with the CLI, as a user would): one client alternates PATCH (a random pet) and GET (the
 * whole ~50 MB listing) while a prober asks /healthz every 10 ms, each client a process of its own on the load core
 * (bench/listing.ts), so reading 50 MB in one cannot delay the other. Targets: /healthz p99 < 50 ms (nothing holds
 * the event loop for long) and a peak RSS below 600 MB.
 *
 * At the same moments the prober asks an idle bare server on the server's core: on a small machine, moving 50 MB
 * over loopback delays every process (kernel copies, scheduling), and that reference shows how much of the
 * /healthz latency is the machine's rather than the service's.
 */
async function listingMillion (result: ScenarioResult): Promise<void> {
  const seconds = settings.quick ? LISTING.quickSeconds : LISTING.seconds
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    petsFile(LISTING.pets)
    const importStarted = Date.now()
    // About 45 s on a 2-core cloud VM (the CLI parses and validates every record): ten minutes before giving up.
    const key = await prepareStore(env, LISTING.pets, 600_000)
    const importSeconds = (Date.now() - importStarted) / 1000
    const service = await startService('service', env, key, cleanup)
    const base = new URL(service.url).origin
    // The first GET after the start builds whatever the service keeps for the listing: timed apart, not probed.
    const firstStarted = Date.now()
    const first = await fetch(service.url, { headers: service.headers })
    const listingMb = (await first.arrayBuffer()).byteLength / 1024 / 1024
    if (first.status !== 200) throw new Error(`GET /v1/inventory answered ${first.status}`)
    const firstGetMs = Date.now() - firstStarted
    writeFileSync(join(dir, 'healthz.body'), '{"status":"ok"}')
    const reference = startNode([BARE, join(dir, 'healthz.body'), 'application/json'], {}, 'server')
    cleanup.defer(() => stop(reference))
    const referenceUrl = `http://127.0.0.1:${await waitOutput(reference, /listening (\d+)/)}/v1/inventory`
    const probeSpec: ProbeSpec = { urls: [`${base}/healthz`, referenceUrl], seconds, intervalMs: LISTING.probeIntervalMs, timeoutMs: 10_000 }
    const clientSpec: ClientSpec = { base, seconds, pets: LISTING.pets }
    const timeoutMs = (seconds + 60) * 1000
    const lastLine = (stdout: string): string => stdout.trim().split('\n').pop() ?? ''
    // runNode kills either process when the time is up or the harness is interrupted.
    const [probeOut, clientOut] = await Promise.all([
      runNode(['--import', 'tsx', LISTING_CLIENTS, 'probe', JSON.stringify(probeSpec)], {}, 'load', timeoutMs),
      runNode(['--import', 'tsx', LISTING_CLIENTS, 'client', JSON.stringify(clientSpec)], { BENCH_KEY: key }, 'load', timeoutMs)
    ])
    const [probes, idle] = JSON.parse(lastLine(probeOut)) as [ProbeResult, ProbeResult]
    const client = JSON.parse(lastLine(clientOut)) as ClientResult
    if (!service.proc.running()) throw new Error(`the service died under load: ${describeExit(service.proc)}`)
    result.peakRssMb = memoryMb(service.proc.pid, 'VmHWM')
    result.notes.push(`import of ${LISTING.pets} pets (CLI): ${importSeconds.toFixed(0)} s; first GET ${firstGetMs} ms, ${round1(listingMb)} MB`)
    result.notes.push(`${client.pairs} PATCH+GET pairs in ${seconds} s; GET (whole body) median ${client.getP50.toFixed(0)} ms, ` +
      `max ${client.getMax.toFixed(0)} ms; PATCH median ${client.patchP50.toFixed(1)} ms`)
    result.notes.push(`/healthz every ${LISTING.probeIntervalMs} ms meanwhile (${probes.count} probes, open loop): p50 ${probes.p50.toFixed(1)} ms, ` +
      `p99 ${probes.p99.toFixed(1)} ms, max ${probes.max.toFixed(1)} ms; an idle bare server on the same core, probed alike ` +
      `(the machine's share): p50 ${idle.p50.toFixed(1)} ms, p99 ${idle.p99.toFixed(1)} ms, max ${idle.max.toFixed(1)} ms`)
    result.checks.push({
      name: '/healthz p99',
      value: probes.p99,
      text: `${probes.p99.toFixed(1)} ms`,
      target: `< ${LISTING.healthzP99Ms} ms`,
      met: probes.p99 < LISTING.healthzP99Ms,
      // When the idle reference misses the target too, the machine, not only the service, is the limit.
      flag: `HEALTHZ P99 >= ${LISTING.healthzP99Ms} MS${idle.p99 >= LISTING.healthzP99Ms ? ` (SO IS THE IDLE REFERENCE'S: ${idle.p99.toFixed(0)} MS)` : ''}`
    }, {
      name: 'peak RSS',
      value: result.peakRssMb,
      text: `${fmtMb(result.peakRssMb)} MB`,
      target: `< ${LISTING.peakRssMb} MB`,
      met: result.peakRssMb === null ? null : result.peakRssMb < LISTING.peakRssMb,
      flag: `PEAK RSS >= ${LISTING.peakRssMb} MB`
    })
    if (client.non2xx > 0) result.flags.push(`non-2xx: ${client.non2xx} ${JSON.stringify(client.statusCodes)}`)
    if (client.errors > 0) result.flags.push(`connection errors: ${client.errors}`)
    if (probes.errors > 0) result.flags.push(`/healthz failures: ${probes.errors}`)
    if (idle.errors > 0) result.flags.push(`reference probe failures: ${idle.errors}`)
    if (client.pairs === 0) result.flags.push('no PATCH+GET pair completed')
    result.details = {
      pets: LISTING.pets,
      seconds,
      importSeconds,
      firstGetMs,
      listingMb,
      pairs: client.pairs,
      getP50Ms: client.getP50,
      getMaxMs: client.getMax,
      patchP50Ms: client.patchP50,
      statusCodes: client.statusCodes,
      clientErrors: client.errors,
      healthz: probes,
      idleReference: idle
    }
  })
}

async function postgres (sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: settings.postgresUrl, connectionTimeoutMillis: 3000 })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.query(sql)
  } finally {
    await client.end().catch(() => {})
  }
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

async function postgresReachable (): Promise<boolean> {
  try {
    await postgres('SELECT 1')
    return true
  } catch {
    return false
  }
}

/** Scenario 4a: GET (10 entries) with the rate-limit counters in Redis. */
async function redisScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  if (!await redisReachable(settings.redisUrl)) {
    result.status = 'skipped'
    result.notes.push(`Redis not reachable at ${settings.redisUrl} (BENCH_REDIS_URL)`)
    return
  }
  await Cleanup.scope(async (cleanup) => {
    const prefix = `petstore:bench:${hex()}:`
    // Deferred first, so it runs after the server has stopped writing.
    cleanup.defer(() => cleanRedis(prefix, settings.redisUrl))
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db'), REDIS_URL: settings.redisUrl, REDIS_KEY_PREFIX: prefix }
    const service = await startService('service', env, await prepareStore(env, 10), cleanup)
    await serviceOnly(result, service, ceiling)
  })
}

/** Marks a scenario skipped, saying what is missing, when PostgreSQL or Redis cannot be reached; true then. */
async function skippedWithoutServers (result: ScenarioResult): Promise<boolean> {
  const missing = [
    ...(await postgresReachable() ? [] : [`PostgreSQL not reachable at ${settings.postgresUrl} (BENCH_POSTGRES_URL)`]),
    ...(await redisReachable(settings.redisUrl) ? [] : [`Redis not reachable at ${settings.redisUrl} (BENCH_REDIS_URL)`])
  ]
  if (missing.length === 0) return false
  result.status = 'skipped'
  result.notes.push(...missing)
  return true
}

/** Scenario 4b: two instances on one PostgreSQL database and Redis, loaded at once, one load generator each. */
async function scaleOutScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  if (await skippedWithoutServers(result)) return
  await Cleanup.scope(async (cleanup) => {
    const database = `petstore_bench_${hex()}`
    const prefix = `petstore:bench:${hex()}:`
    cleanup.defer(() => cleanRedis(prefix, settings.redisUrl))
    await postgres(`CREATE DATABASE ${database}`)
    // FORCE: ends any session a killed instance may have left behind.
    cleanup.defer(() => postgres(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`))
    const url = new URL(settings.postgresUrl)
    url.pathname = `/${database}`
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: url.toString(), REDIS_URL: settings.redisUrl, REDIS_KEY_PREFIX: prefix }
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

// ---------------------------------------------------------------------------------------------------------
// costs-pg-2x: what one GET and one PATCH cost each component (the inputs of docs/scaling.md)

/**
 * costs-pg-2x: pets in its store (the listing is get-10's; every PATCH also takes the store-wide inventory_version
 * and feed_clock rows, which serialize writers more than ten pets' row locks do), its mixes (one PATCH in k requests:
 * 5% and 1% writes), and the commit probe's writers, sequential statements and seconds.
 */
const COSTS = { pets: 10, mixes: [20, 100], writers: 8, sequential: 300, probeSeconds: 3, redisRequests: 100_000, quickRedisRequests: 20_000 }

/** What the harness itself sends to Redis while it measures (its INFO reads): never counted. */
const OWN_REDIS_COMMANDS = new Set(['info'])

/** Redis's commands so far (INFO commandstats: calls and microseconds of execution, by name) and its CPU seconds. */
interface RedisStats { calls: Record<string, number>, usec: Record<string, number>, cpuSeconds: number | null }

async function redisStats (client: Redis): Promise<RedisStats> {
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
interface PgCounts { seq: number, statements: number, transactions: number, byStatement: Record<string, number> }

function readPgCounts (file: string): PgCounts | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as PgCounts
  } catch {
    return null
  }
}

/** Asks an instance started with bench/pg-count.js for its statement counts (SIGUSR2) and waits for the answer. */
async function pgCounts (target: Target, file: string): Promise<PgCounts> {
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
interface Served {
  /** Answered GET /v1/inventory and PATCH /v1/inventory/{petId}, any status. */
  get: number
  patch: number
  /** Rate-limit decisions: requests that reached the gate (one limiter call each), answered or not. */
  gated: number
  /** Switches from Redis to the in-process fallback (a Redis command failed or outlasted REDIS_COMMAND_TIMEOUT_MS). */
  fallbacks: number
}

async function servedRequests (target: Target): Promise<Served> {
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
async function postgresCpu (monitor: pg.Client, database: string): Promise<Map<number, number> | null> {
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
function postgresCpuDelta (before: Map<number, number> | null, after: Map<number, number> | null): number | null {
  if (before === null || after === null) return null
  let sum = 0
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0)
  return sum
}

/** Per table (pg_stat_user_tables) and per trigger function (pg_stat_user_functions, track_functions = 'pl'). */
interface ServerStats { tables: Record<string, Record<string, number>>, functions: Record<string, number> }

/**
 * The scratch database's table and function counters, read over a session on it (its catalog reads touch no user
 * table and call no user function). A backend publishes its counters at most once a second, else 10 s into
 * idleness: read after `waitMs`, then every second until two reads agree.
 */
async function serverStats (scratch: pg.Client, waitMs: number): Promise<ServerStats> {
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
function serverStatsPer (before: ServerStats, after: ServerStats, per: number): { tables: Record<string, Record<string, number>>, functions: Record<string, number> } {
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

/**
 * A ledger write as the service's PATCH makes it, from the database side: the entry updated (the inventory_version
 * trigger), a ledger row inserted (feed_clock's deferred trigger at commit), one autocommit statement.
 */
const LEDGER_WRITE = `WITH u AS (UPDATE inventory SET revision = revision + 1 WHERE pet_id = $1 RETURNING pet_id, quantity)
  INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, created_at)
  SELECT pet_id, quantity, quantity, 'adjustment', now() FROM u`

interface Latency { meanMs: number, p50Ms: number }

/** The commit probe's findings (see commitProbe). */
interface CommitProbe {
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
async function commitProbe (url: string, monitor: pg.Client, database: string): Promise<CommitProbe> {
  const open = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 })
    client.on('error', () => {})
    await client.connect()
    return client
  }
  const clients = await Promise.all(Array.from({ length: COSTS.writers }, open))
  const first = clients[0] as pg.Client
  try {
    await first.query('CREATE TABLE bench_commit (id integer PRIMARY KEY, n bigint NOT NULL)')
    await first.query('INSERT INTO bench_commit SELECT g, 0 FROM generate_series(1, $1::integer) g', [COSTS.writers])
    const sequential = async (sql: string, values: unknown[]): Promise<Latency> => {
      const times: number[] = []
      for (let i = 0; i < COSTS.sequential; i++) {
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
      for (let i = 0; i < COSTS.sequential; i++) {
        const started = performance.now()
        await inTransaction(first, [1])
        times.push(performance.now() - started)
      }
      return { meanMs: times.reduce((sum, t) => sum + t, 0) / times.length, p50Ms: median(times) }
    }
    let writes = 0
    const concurrently = async (sql: string | null, values: (i: number) => unknown[]): Promise<number> => {
      const end = performance.now() + COSTS.probeSeconds * 1000
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
      return writes / COSTS.probeSeconds
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
    const ledgerWritesPerSecondConcurrent = await concurrently(LEDGER_WRITE, (i) => [(i % COSTS.pets) + 1])
    const cpuAfter = await postgresCpu(monitor, database)
    const ledgerWriteInTransaction = await sequentialInTransaction()
    const ledgerWritesPerSecondConcurrentInTransaction = await concurrently(null, (i) => [(i % COSTS.pets) + 1])
    await first.query('DROP TABLE bench_commit')
    return {
      roundTrip,
      commit,
      ledgerWrite,
      commitsPerSecondConcurrent,
      ledgerWritesPerSecondConcurrent,
      ledgerWriteInTransaction,
      ledgerWritesPerSecondConcurrentInTransaction,
      writers: COSTS.writers,
      ledgerWriteCpuUs: cpuPerWrite(cpuBefore, cpuBetween, COSTS.sequential),
      ledgerWriteConcurrentCpuUs: cpuPerWrite(cpuThen, cpuAfter, writes)
    }
  } finally {
    await Promise.all(clients.map(async (client) => { await client.end().catch(() => {}) }))
  }
}

/** One redis-benchmark run: its requests/s, and Redis's main-thread CPU and execution time per call (of `command`, top level). */
interface RedisProbe { name: string, command: string, rps: number, calls: number, cpuUsPerCall: number | null, execUsPerCall: number | null }

/**
 * Redis's own throughput for the commands the service sends (redis-benchmark on the load core, the bench's
 * connections, keys under the scenario's prefix): the consume script (EVALSHA, as the service calls it, admitting),
 * GET and INCR of a change counter copy (what Redis Cluster mode adds), and the announce script where the limiter
 * has one (each write runs it on the counter, or on every copy on a Cluster). CPU per call from INFO cpu, which a
 * saturated Redis spends per command; a string says why it was not measured.
 */
async function redisThroughput (redisUrl: string, prefix: string): Promise<RedisProbe[] | string> {
  if (!hasCommand('redis-benchmark')) return 'redis-benchmark is not installed'
  const url = new URL(redisUrl)
  if (url.password !== '' || url.protocol !== 'redis:') return 'BENCH_REDIS_URL has a password or TLS: not passed to redis-benchmark'
  const client = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  try {
    // The limiter loads its script on first use; ioredis keeps the SHA1 of each script it defines.
    const limiter = new RedisLimiter({ client, prefix })
    await limiter.consume({ kind: 'key', id: 'bench' }, { perMinute: 1_000_000_000, perDay: 1_000_000_000 })
    await limiter.announceChange()
    const scripts = (client as unknown as { scriptsSet?: Record<string, { sha?: string }> }).scriptsSet
    const sha = scripts?.petstoreRateLimitConsume?.sha
    if (sha === undefined) return 'the consume script\'s SHA1 was not found on the ioredis client'
    // Since 88bc14b a change is announced by a script (the counter set to at least Redis TIME); before, by INCR.
    const announce = scripts?.petstoreAnnounceChange?.sha
    const requests = settings.quick ? COSTS.quickRedisRequests : COSTS.redisRequests
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

/**
 * A redis-server of the scenario's own (same binary as the shared one, no persistence, files in `dir`), so that
 * INFO commandstats and INFO cpu count only what the scenario sends; null when redis-server is not installed (the
 * scenario then uses BENCH_REDIS_URL, where other clients' commands count too). Stopped by `cleanup`.
 */
async function privateRedis (dir: string, cleanup: Cleanup): Promise<string | null> {
  if (!hasCommand('redis-server')) return null
  const port = await freePort()
  const proc = startCommand(['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {})
  cleanup.defer(() => stop(proc))
  const url = `redis://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if (!proc.running()) throw new Error(`redis-server exited: ${describeExit(proc)}`)
    if (await redisReachable(url)) return url
    await sleep(100)
  }
  throw new Error(`redis-server did not answer on port ${port} within 10 s`)
}

/**
 * A Redis Cluster of `nodes` primaries without replicas, of the scenario's own (as README.md's local Cluster, on
 * free ports, files in `dir`), once every node says cluster_state:ok; its seed URLs, or why it was not started.
 * Stopped by `cleanup`.
 */
async function privateCluster (dir: string, cleanup: Cleanup, nodes = 3): Promise<string[] | string> {
  if (!hasCommand('redis-server') || !hasCommand('redis-cli')) return 'redis-server or redis-cli is not installed'
  const ports: number[] = []
  for (let i = 0; i < nodes; i++) {
    const port = await freePort()
    const bus = await freePort()
    const nodeDir = join(dir, `cluster-${port}`)
    mkdirSync(nodeDir)
    const proc = startCommand(['redis-server', '--port', String(port), '--cluster-port', String(bus), '--bind', '127.0.0.1',
      '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--save', '', '--appendonly', 'no', '--dir', nodeDir], {})
    cleanup.defer(() => stop(proc))
    ports.push(port)
  }
  const urls = ports.map((port) => `redis://127.0.0.1:${port}`)
  for (const url of urls) {
    const deadline = Date.now() + 10_000
    while (!await redisReachable(url)) {
      if (Date.now() > deadline) throw new Error(`${url} did not answer within 10 s`)
      await sleep(100)
    }
  }
  await runCommand(['redis-cli', '--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'], {}, undefined, 60_000)
  for (const url of urls) {
    const client = new Redis(url, { maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    try {
      const deadline = Date.now() + 20_000
      while (!/cluster_state:ok/.test(String(await client.call('CLUSTER', 'INFO')))) {
        if (Date.now() > deadline) throw new Error(`${url} did not reach cluster_state:ok within 20 s`)
        await sleep(200)
      }
    } finally {
      client.disconnect()
    }
  }
  return urls
}

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
    `PostgreSQL per request: ${c.pgStatementsPerRequest.toFixed(4)} statements, ${c.pgTransactionsPerRequest.toFixed(4)} transactions, ` +
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
    const database = `petstore_bench_${hex()}`
    const prefix = `petstore:bench:${hex()}:`
    const dir = scenarioDir(result.id)
    const own = await privateRedis(dir, cleanup)
    const redisUrl = own ?? settings.redisUrl
    if (own === null) cleanup.defer(() => cleanRedis(prefix, redisUrl))
    await postgres(`CREATE DATABASE ${database}`)
    cleanup.defer(() => postgres(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`))
    // Trigger functions' calls in pg_stat_user_functions, for the sessions that start from now on.
    await postgres(`ALTER DATABASE ${database} SET track_functions = 'pl'`)
    const url = new URL(settings.postgresUrl)
    url.pathname = `/${database}`
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: url.toString(), REDIS_URL: redisUrl, REDIS_KEY_PREFIX: prefix }
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
    const scratch = await session(url.toString())

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
        const t: PhaseTotals = { requests: 0, patches: 0, gated: 0, fallbacks: 0, loadGeneratorRequests: 0, seconds: 0, instanceCpu: 0, redisCpu: 0, redisCalls: {}, pgCpu: 0, statements: 0, transactions: 0, byStatement: {}, runs: [] }
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

    const commit = await commitProbe(url.toString(), monitor, database)
    log(`${result.id}: commit probe: SELECT 1 ${commit.roundTrip.meanMs.toFixed(3)} ms, commit ${commit.commit.meanMs.toFixed(3)} ms, ` +
      `ledger write ${commit.ledgerWrite.meanMs.toFixed(3)} ms sequential; ${commit.writers} sessions at once: ` +
      `${Math.round(commit.commitsPerSecondConcurrent)} independent commits/s, ${Math.round(commit.ledgerWritesPerSecondConcurrent)} ledger writes/s`)
    const redisProbe = await redisThroughput(redisUrl, prefix)
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
      name: 'PostgreSQL statements/PATCH',
      value: patch.pgStatementsPerRequest,
      text: patch.pgStatementsPerRequest.toFixed(4),
      target: '1, flagged from 1.05',
      met: patch.pgStatementsPerRequest < 1.05,
      flag: 'POSTGRESQL STATEMENTS PER PATCH'
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

// ---------------------------------------------------------------------------------------------------------
// Webhooks: commit-to-receiver latency

/**
 * 100 changes a second for WEBHOOKS.seconds through one server (SQLite), 3 subscriptions on local receivers: the time
 * from sending each PATCH (its commit comes after) to each receiver getting its event, matched by the request id the
 * event carries (the subscriptions belong to the writing key's quota). Events that arrive before their PATCH's answer
 * are matched once the answer is in.
 */
const WEBHOOKS = { rate: 100, seconds: 20, subscriptions: 3 }

async function webhookLatency (result: ScenarioResult): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { DATABASE_URL: join(dir, 'petstore.db'), WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }
    const key = await prepareStore(env, 100)
    const service = await startService('service', env, key, cleanup)
    const base = service.url.replace(/\/v1\/inventory$/, '')
    const acknowledged = new Map<string, number>()
    const arrivals: Array<[string, number]> = []
    let received = 0
    const receivers = await Promise.all(Array.from({ length: WEBHOOKS.subscriptions }, async () => {
      const server = createServer((request, response) => {
        const chunks: Buffer[] = []
        request.on('data', (chunk: Buffer) => chunks.push(chunk)).on('end', () => {
          const at = performance.now()
          received++
          const requestId = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { requestId: string | null } }).data.requestId
          if (requestId !== null) arrivals.push([requestId, at])
          response.writeHead(204).end()
        })
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      cleanup.defer(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
    }))
    const headers = { ...service.headers, 'content-type': 'application/json' }
    for (const url of receivers) {
      const res = await fetch(`${base}/v1/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url, events: ['inventory.changed'] }) })
      if (res.status !== 201) throw new Error(`createWebhook answered ${res.status}: ${await res.text()}`)
    }
    const total = WEBHOOKS.rate * WEBHOOKS.seconds
    let failed = 0
    const started = performance.now()
    const writes: Array<Promise<void>> = []
    for (let i = 0; i < total; i++) {
      const due = started + i * 1000 / WEBHOOKS.rate
      const wait = due - performance.now()
      if (wait > 0) await sleep(wait)
      const requestId = `bench-${i}`
      // From the moment the write is sent: the commit happens after it, so this bounds commit-to-receiver from above
      // (a delivery can even arrive before the write's own answer does).
      const sentAt = performance.now()
      writes.push(fetch(`${base}/v1/inventory/${i % 100 + 1}`, { method: 'PATCH', headers: { ...headers, 'x-request-id': requestId }, body: JSON.stringify({ quantity: i % 1000 }) })
        .then(async (res) => {
          await res.arrayBuffer()
          if (res.status === 200) acknowledged.set(requestId, sentAt)
          else failed++
        }, () => { failed++ }))
    }
    await Promise.all(writes)
    const deadline = performance.now() + 30_000
    while (received < acknowledged.size * WEBHOOKS.subscriptions && performance.now() < deadline) await sleep(50)
    const latencies = arrivals.flatMap(([requestId, at]) => {
      const sent = acknowledged.get(requestId)
      return sent === undefined ? [] : [at - sent]
    })
    const sorted = [...latencies].sort((a, b) => a - b)
    const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
    const expected = acknowledged.size * WEBHOOKS.subscriptions
    result.details = { changes: acknowledged.size, failedWrites: failed, expectedDeliveries: expected, received, matched: latencies.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: sorted.at(-1) ?? NaN }
    result.notes.push(`${acknowledged.size} changes at ${WEBHOOKS.rate}/s, ${WEBHOOKS.subscriptions} subscriptions: ${received} of ${expected} deliveries received; ` +
      `commit-to-receiver p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms` +
      (failed > 0 ? `; ${failed} writes failed` : ''))
    if (received < expected || failed > 0) result.status = 'failed'
  })
}

// ---------------------------------------------------------------------------------------------------------
// Report

function fmtMb (mb: number | null): string {
  return mb === null ? '-' : round1(mb)
}

function table (results: ScenarioResult[]): string {
  const header = ['scenario', 'rps', 'p50 ms', 'p99 ms', 'ceiling rps', 'ratio', 'target', 'other targets', 'peak RSS MB', 'non-2xx+err', 'status']
  const rows = results.map((r) => [
    r.id,
    r.service === null ? '-' : String(Math.round(r.service.rps)),
    r.service === null ? '-' : r.service.p50.toFixed(2),
    r.service === null ? '-' : r.service.p99.toFixed(2),
    r.ceiling === null ? '-' : `${Math.round(r.ceiling.rps)}${r.ceilingFrom === 'own' ? '' : ` (${r.ceilingFrom})`}`,
    r.ratio === null ? '-' : r.ratio.toFixed(3),
    r.target === null ? '-' : `>= ${r.target}`,
    r.checks.length === 0 ? '-' : r.checks.map((c) => `${c.name} ${c.text} (target ${c.target})`).join('; '),
    fmtMb(r.peakRssMb),
    r.service === null ? '-' : String(r.service.non2xx + r.service.errors),
    r.status !== 'ok' ? r.status.toUpperCase() : r.flags.length === 0 ? 'ok' : r.flags.join(', ')
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)))
  // Left-aligned: the scenario, the other targets (text) and the status; the numbers are right-aligned.
  const left = new Set([0, header.indexOf('other targets'), header.length - 1])
  const line = (cells: string[]): string => cells.map((c, i) => left.has(i) ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number)).join('  ').trimEnd()
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)]
  for (const r of results) {
    for (const note of r.notes) out.push(`  ${r.id}: ${note}`)
    if (r.service !== null) out.push(`  ${r.id}: server CPU ${pct(r.service.serverCpuPct)}, load generator CPU ${pct(r.service.loadCpuPct)}`)
    if (r.ceiling !== null && r.ceilingFrom === 'own') {
      out.push(`  ${r.id}: ceiling p50 ${r.ceiling.p50.toFixed(2)} ms, p99 ${r.ceiling.p99.toFixed(2)} ms, non-2xx ${r.ceiling.non2xx + r.ceiling.errors}, ` +
        `bare server CPU ${pct(r.ceiling.serverCpuPct)}, load generator CPU ${pct(r.ceiling.loadCpuPct)}`)
    }
  }
  return out.join('\n')
}

function summary (results: ScenarioResult[], startedAt: Date): unknown {
  const cpu = cpus()
  const stats = (s: Side | null) => s === null
    ? null
    : { rps: s.rps, p50: s.p50, p99: s.p99, non2xx: s.non2xx, errors: s.errors, serverCpuPct: s.serverCpuPct, loadCpuPct: s.loadCpuPct }
  return {
    machine: {
      cpu: cpu[0]?.model ?? 'unknown',
      cpus: cpu.length,
      totalMemoryMb: Math.round(totalmem() / 1024 / 1024),
      node: process.version,
      os: platform(),
      kernel: release()
    },
    date: startedAt.toISOString(),
    settings: { ...settings, pinned: PINNING !== null },
    scenarios: results.map((r) => ({
      id: r.id,
      title: r.title,
      status: r.status,
      ...(stats(r.service) ?? { rps: null, p50: null, p99: null, non2xx: null, errors: null }),
      ratio: r.ratio,
      target: r.target,
      peakRssMb: r.peakRssMb,
      flags: r.flags,
      checks: r.checks.map(({ name, value, target, met }) => ({ name, value, target, met })),
      ...(r.details === undefined ? {} : { details: r.details }),
      ceiling: stats(r.ceiling),
      ceilingFrom: r.ceilingFrom,
      ...(r.memory === undefined ? {} : { memory: r.memory }),
      ...(r.instancesPeakRssMb === undefined ? {} : { instancesPeakRssMb: r.instancesPeakRssMb }),
      notes: r.notes,
      runs: r.service?.runs.map(({ rps, p50, p99, non2xx, errors, statusCodes }) => ({ rps, p50, p99, non2xx, errors, statusCodes })) ?? [],
      ceilingRuns: r.ceilingFrom === 'own' ? r.ceiling?.runs.map(({ rps, p50, p99, non2xx, errors }) => ({ rps, p50, p99, non2xx, errors })) ?? [] : []
    }))
  }
}

// ---------------------------------------------------------------------------------------------------------

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
    workDir = mkdtempSync(join(tmpdir(), 'petstore-bench-'))
    cleanup.defer(() => rmSync(workDir, { recursive: true, force: true }))
    const wanted = (id: string): boolean => settings.only.length === 0 || settings.only.includes(id)
    // The peer runs in get-10's rounds when both are wanted; the peer scenario reports what they measured.
    let peerRounds: PeerRounds | null = null
    const scenarios: Array<{ id: string, title: string, target: number | null, run: (r: ScenarioResult) => Promise<void> }> = [
      { id: 'get-10', title: 'GET /v1/inventory, 10 entries', target: 0.75, run: async (r) => { peerRounds = await getVsCeiling(r, 10, wanted('peer')) } },
      { id: 'get-10k', title: 'GET /v1/inventory, 10,000 entries', target: 0.8, run: async (r) => { await getVsCeiling(r, 10_000) } },
      { id: 'get-100k-memory', title: 'GET /v1/inventory, 100,000 entries (memory check)', target: null, run: memoryCheck },
      { id: 'patch', title: 'PATCH /v1/inventory/{petId}, durable SQLite commits', target: 0.40, run: (r) => patchScenario(r, get10Ceiling()) },
      { id: 'peer', title: 'GET /v1/inventory, 10 entries: the peer (Fastify + bearer-auth + rate-limit + SQLite WAL)', target: null, run: (r) => peerScenario(r, peerRounds) },
      { id: 'floor-fastify', title: 'Reference: Fastify 5 alone sending fixed bytes (no auth, limiter, store, extra fields)', target: null, run: (r) => floorScenario(r, 'fastify') },
      { id: 'floor-fields', title: 'Reference: Fastify 5 sending fixed bytes with the service\'s response fields', target: null, run: (r) => floorScenario(r, 'floor') },
      { id: 'floor-gate', title: 'Reference: the same with the least gate: a synchronous hook, a token Map, two window counters', target: null, run: (r) => floorScenario(r, 'gate') },
      { id: 'listing-1m', title: 'A client alternating PATCH and GET on 1,000,000 pets, /healthz probed every 10 ms', target: null, run: listingMillion },
      { id: 'get-10-redis', title: 'GET /v1/inventory, 10 entries, Redis limiter', target: null, run: (r) => redisScenario(r, get10Ceiling()) },
      { id: 'get-10-pg-2x', title: 'GET /v1/inventory, 10 entries, 2 instances on PostgreSQL + Redis', target: null, run: (r) => scaleOutScenario(r, get10Ceiling()) },
      { id: 'costs-pg-2x', title: 'Per-request costs of GET and PATCH, 2 instances on PostgreSQL + Redis (docs/scaling.md)', target: null, run: costsScenario },
      { id: 'webhooks', title: 'Webhooks: commit-to-receiver latency at 100 changes/s, 3 subscriptions (SQLite)', target: null, run: webhookLatency }
    ]
    const get10Ceiling = (): Side | null => results.find((r) => r.id === 'get-10')?.ceiling ?? null
    for (const scenario of scenarios) {
      if (!wanted(scenario.id)) continue
      const result = emptyResult(scenario.id, scenario.title, scenario.target)
      log(`${scenario.id}: ${scenario.title}`)
      try {
        await scenario.run(result)
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
