/**
 * `npm run bench`: the service against a bare node:http ceiling, on this machine, in one run. See
 * bench/README.md for the scenarios and the knobs. Every process, database and Redis key it creates is
 * removed again, also when a scenario fails or the run is interrupted.
 */
import { spawnSync } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, release, tmpdir, totalmem, platform } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { cleanRedis, redisReachable } from '../test/ratelimit/redis-env.js'
import type { ClientResult, ClientSpec, ProbeResult, ProbeSpec } from './listing.js'
import type { LoadResult, LoadSpec } from './load.js'
import {
  Cleanup, cleanupOnSignals, cpuSeconds, describeExit, freePort, median, memoryMb, PINNING, ROOT,
  runCommand, runNode, startNode, stop, waitHttp, waitOutput, type Proc
} from './support.js'

const BIN = join(ROOT, 'bin/petstore.js')
const LOAD = join(ROOT, 'bench/load.ts')
const BARE = join(ROOT, 'bench/bare-server.js')
const LISTING_CLIENTS = join(ROOT, 'bench/listing.ts')
const PEER_DIR = join(ROOT, 'bench/peer')
const WRK_SCRIPT = join(ROOT, 'bench/wrk.lua')
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

async function startService (name: string, env: Record<string, string>, key: string, cleanup: Cleanup): Promise<Target> {
  const port = await freePort()
  const proc = startNode([BIN, 'serve'], { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }, 'server')
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
  args.push(spec.url, '--', String(spec.patchPets ?? 0))
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

/** Scenario 4b: two instances on one PostgreSQL database and Redis, loaded at once, one load generator each. */
async function scaleOutScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  const missing = [
    ...(await postgresReachable() ? [] : [`PostgreSQL not reachable at ${settings.postgresUrl} (BENCH_POSTGRES_URL)`]),
    ...(await redisReachable(settings.redisUrl) ? [] : [`Redis not reachable at ${settings.redisUrl} (BENCH_REDIS_URL)`])
  ]
  if (missing.length > 0) {
    result.status = 'skipped'
    result.notes.push(...missing)
    return
  }
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
      { id: 'get-10-pg-2x', title: 'GET /v1/inventory, 10 entries, 2 instances on PostgreSQL + Redis', target: null, run: (r) => scaleOutScenario(r, get10Ceiling()) }
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
