/**
 * Where the SQLite PATCH tail comes from: one instance on SQLite (durable commits), PATCH over 10,000 pets at fixed
 * rates, open loop (bench/open-loop.ts, as the latency scenario runs it), with bench/sqlite-probe.js preloaded into
 * the server. Per rate it prints the open-loop result, the event-loop delay histogram, each cause's events (group
 * commits: batch, body, COMMIT; checkpoints on each thread; GC pauses) and the event-loop stalls of 5 ms or more
 * attributed to the cause that overlaps most of each (a cause owns a stall when it covers half of it or more).
 *
 *   npm run build && node --import tsx bench/sqlite-tail.ts 2300,4600      # rates per second
 *   node --import tsx bench/sqlite-tail.ts capacity                        # PATCH capacity, closed loop, to pick them
 *
 * BENCH_TAIL_SATURATE=N runs N closed-loop runs at saturation first, as the latency scenario does to find the capacity.
 * BENCH_TAIL_STALL_PROFILE=1 profiles the server and names what ran inside each long stall (see STALL_PROFILE).
 * BENCH_TAIL_IDLE=S leaves the server idle S seconds before the run, as the latency scenario's bare control does.
 * BENCH_TAIL_NODE_ARGS='--flag ...' starts the server with these Node.js options (a GC setting, to compare). GC pauses
 * are counted by kind (minor, incremental marking, weak callbacks) and by flags.
 * BENCH_TAIL_OP=GET measures GET /v1/inventory (10 entries) instead. BENCH_LATENCY_WARMUP / BENCH_LATENCY_DURATION
 * as for `latency`; a fresh store per rate. Writes the raw probe records and the summary under the run's work folder
 * and prints where. Never part of `npm run bench`.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import type { OpenLoopResult, OpenLoopSpec } from './open-loop.js'
import { measure } from './measure.js'
import { openWorkDir, prepareStore, scenarioDir, startService } from './servers.js'
import { settings } from './settings.js'
import { Cleanup, cleanupOnSignals, ROOT, runNode, runQueueSeconds, cpuSeconds } from './support.js'

/** BENCH_TAIL_OP=GET: GET /v1/inventory (10 entries) instead of PATCH, as the latency scenario's sqlite-get. */
const GET = (process.env.BENCH_TAIL_OP ?? 'PATCH').toUpperCase() === 'GET'
const PETS = GET ? 10 : 10_000
/**
 * BENCH_TAIL_STALL_PROFILE=1: the server runs under V8's CPU profiler too, and for each of the longest stalls the
 * functions it sampled inside it are listed. A stall with few samples for its length is time the process did not run
 * (another process had the core); one full of samples is the server's own work, named.
 */
const STALL_PROFILE = process.env.BENCH_TAIL_STALL_PROFILE === '1'
const STALL_MS = 5
/** perf_hooks' NODE_PERFORMANCE_GC_* kinds of a GC entry. */
const GC_KINDS: Record<number, string> = { 1: 'minor', 2: 'major', 4: 'incremental', 8: 'weak callbacks' }
/** BENCH_TAIL_NODE_ARGS: Node.js options for the server, space-separated (a GC setting, say), to compare with none. */
const NODE_ARGS = (process.env.BENCH_TAIL_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '')

interface Commit { start: number, bodyMs: number, commitMs: number, batch: number, walFrames: number | null }
interface Checkpoint { start: number, ms: number, mode: string, emulated: boolean, log?: number, checkpointed?: number }
/** kind: one of GC_KINDS; flags: perf_hooks' NODE_PERFORMANCE_GC_FLAGS_*. */
interface Gc { start: number, ms: number, kind?: number, flags?: number }
interface Stall { end: number, ms: number }
interface ProbeData {
  thread: number
  main: boolean
  commits: Commit[]
  checkpoints: Checkpoint[]
  gc: Gc[]
  stalls: Stall[]
  /** When the process started (epoch ms). */
  origin?: number
  /** One instant on both clocks: epoch ms (the probe's times) and the monotonic µs of V8's CPU profiles. */
  clock?: { epochMs: number, monotonicUs: number }
  eventLoopDelay: Record<string, number> | null
  window?: { start: number, end: number | null }
}

const pct = (values: number[], p: number): number => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p / 100 * sorted.length) - 1)] as number
}
const f = (n: number): string => n.toFixed(n < 10 ? 2 : 1)
const dist = (values: number[]): string =>
  `n ${values.length}, p50 ${f(pct(values, 50))}, p99 ${f(pct(values, 99))}, max ${f(Math.max(0, ...values))}`

/** GC pauses by kind: the durations of each kind, and how many of each kind came with each set of flags. */
function gcByKind (gcs: Gc[]): { byKind: Record<string, string>, flags: Record<string, number> } {
  const durations = new Map<string, number[]>()
  const flags: Record<string, number> = {}
  for (const gc of gcs) {
    const kind = GC_KINDS[gc.kind ?? 0] ?? String(gc.kind ?? 0)
    const ms = durations.get(kind) ?? []
    ms.push(gc.ms)
    durations.set(kind, ms)
    const label = `${kind} flags ${gc.flags ?? 0}`
    flags[label] = (flags[label] ?? 0) + 1
  }
  return { byKind: Object.fromEntries([...durations].map(([kind, ms]) => [kind, dist(ms)])), flags }
}

/** What overlaps [a, b) of each interval, summed. */
function overlap (a: number, b: number, spans: Array<[number, number]>): number {
  let sum = 0
  for (const [s, e] of spans) sum += Math.max(0, Math.min(b, e) - Math.max(a, s))
  return sum
}

/** The main thread's event-loop stalls of STALL_MS or more that ended inside the measured window. */
function windowStalls (main: ProbeData, windowStart: number, windowEnd: number): Stall[] {
  return main.stalls.filter((s) => s.end >= windowStart && s.end < windowEnd && s.ms >= STALL_MS)
}

interface CpuProfile {
  nodes: Array<{ id: number, callFrame: { functionName: string, url: string, lineNumber: number }, children?: number[] }>
  startTime: number
  samples: number[]
  timeDeltas: number[]
}

/** The longest stalls of the window with what the profiler sampled inside each: the top functions and call paths. */
function insideStalls (main: ProbeData, profile: CpuProfile, windowStart: number, windowEnd: number): unknown[] {
  const clock = main.clock
  if (clock === undefined) return []
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const name = (id: number): string => {
    const { functionName, url, lineNumber } = (nodes.get(id) as CpuProfile['nodes'][number]).callFrame
    return `${functionName === '' ? '(anonymous)' : functionName} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`
  }
  const times: number[] = []
  let t = profile.startTime
  for (const delta of profile.timeDeltas) times.push(t += delta)
  const monotonic = (epochMs: number): number => (epochMs - clock.epochMs) * 1000 + clock.monotonicUs
  const stalls = windowStalls(main, windowStart, windowEnd).sort((a, b) => b.ms - a.ms).slice(0, 8)
  return stalls.map((stall) => {
    const from = monotonic(stall.end - stall.ms)
    const to = monotonic(stall.end)
    const self = new Map<string, number>()
    const paths = new Map<string, number>()
    let samples = 0
    profile.samples.forEach((id, i) => {
      const at = times[i] as number
      if (at < from || at > to) return
      samples++
      const own = name(id)
      self.set(own, (self.get(own) ?? 0) + 1)
      const path: string[] = []
      for (let x: number | undefined = id; x !== undefined && path.length < 8; x = parent.get(x)) path.push(name(x))
      const key = path.join(' < ')
      paths.set(key, (paths.get(key) ?? 0) + 1)
    })
    const top = (m: Map<string, number>, n: number): string[] => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `${v} ${k}`)
    return { atMs: Math.round(stall.end - stall.ms - windowStart), ms: Math.round(stall.ms * 10) / 10, samples, functions: top(self, 6), paths: top(paths, 3) }
  })
}

function analyse (files: ProbeData[], windowStart: number, windowEnd: number): Record<string, unknown> {
  const main = files.find((d) => d.main)
  if (main === undefined) throw new Error('no probe record of the main thread')
  const inWindow = <T extends { start: number }>(xs: T[]): T[] => xs.filter((x) => x.start >= windowStart && x.start < windowEnd)
  // Commits on the serving thread stall it; those of a writer thread (a serving store's, ADR 0048) only take time there.
  const commits = inWindow(main.commits)
  const allCommits = files.flatMap((d) => inWindow(d.commits))
  const mainCheckpoints = inWindow(main.checkpoints)
  const otherCheckpoints = files.filter((d) => !d.main).flatMap((d) => inWindow(d.checkpoints)).filter((c) => (c.log ?? 0) > 0 || c.ms >= 1)
  const gcs = inWindow(main.gc)
  const stalls = windowStalls(main, windowStart, windowEnd)
  const causes: Record<string, Array<[number, number]>> = {
    'COMMIT (WAL write + fsync)': commits.map((c) => [c.start + c.bodyMs, c.start + c.bodyMs + c.commitMs]),
    'checkpoint on the serving thread': mainCheckpoints.map((c) => [c.start, c.start + c.ms]),
    'GC pause': gcs.map((g) => [g.start, g.start + g.ms]),
    'transaction body (BEGIN + statements)': commits.map((c) => [c.start, c.start + c.bodyMs])
  }
  const owned: Record<string, number[]> = {}
  for (const stall of stalls) {
    const a = stall.end - stall.ms
    let best = 'other (request handling, batches of callbacks)'
    let most = 0
    for (const [cause, spans] of Object.entries(causes)) {
      const o = overlap(a, stall.end, spans)
      if (o > most) { most = o; if (o >= stall.ms / 2) best = cause }
    }
    ;(owned[best] ??= []).push(stall.ms)
  }
  const table = Object.entries(owned).sort((x, y) => y[1].length - x[1].length).map(([cause, ms]) => ({
    cause, count: ms.length, p50: pct(ms, 50), p99: pct(ms, 99), max: Math.max(...ms), share: ms.length / stalls.length
  }))
  const seconds = (windowEnd - windowStart) / 1000
  return {
    seconds,
    eventLoopDelay: main.eventLoopDelay,
    stalls: { count: stalls.length, ms: dist(stalls.map((s) => s.ms)), over20: stalls.filter((s) => s.ms >= 20).length },
    attribution: table,
    // The longest stalls, each at its start (ms into the window): periodic work shows as regular spacing.
    longest: [...stalls].sort((x, y) => y.ms - x.ms).slice(0, 12).map((st) => ({
      atMs: Math.round(st.end - st.ms - windowStart), sinceStartMs: Math.round(st.end - st.ms - (main.origin ?? 0)), ms: Math.round(st.ms * 10) / 10
    })),
    commits: {
      perSecond: allCommits.length / seconds,
      onServingThread: commits.length,
      batch: dist(allCommits.map((c) => c.batch)),
      bodyMs: dist(allCommits.map((c) => c.bodyMs)),
      commitMs: dist(allCommits.map((c) => c.commitMs)),
      commitsOver5ms: allCommits.filter((c) => c.commitMs >= 5).length,
      walFramesMax: Math.max(0, ...allCommits.map((c) => c.walFrames ?? 0))
    },
    checkpointsServingThread: { ms: dist(mainCheckpoints.map((c) => c.ms)), pagesCheckpointed: dist(mainCheckpoints.map((c) => c.checkpointed ?? 0)) },
    checkpointsOtherThreads: { ms: dist(otherCheckpoints.map((c) => c.ms)), log: dist(otherCheckpoints.map((c) => c.log ?? 0)) },
    gc: {
      ms: dist(gcs.map((g) => g.ms)),
      over5ms: gcs.filter((g) => g.ms >= 5).length,
      ...gcByKind(gcs)
    }
  }
}

async function oneRate (rate: number): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(`sqlite-tail-${rate}`)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const key = await prepareStore(env, PETS)
    const probeOut = join(dir, 'probe')
    const service = await startService('service', { ...env, SQLITE_PROBE_OUT: probeOut }, key, cleanup,
      ['--import', join(ROOT, 'bench/sqlite-probe.js'), ...NODE_ARGS, ...(STALL_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${join(dir, 'cpu')}`] : [])])
    // BENCH_TAIL_SATURATE=N: N closed-loop runs at saturation first, as the latency scenario measures capacity.
    for (let i = 0; i < Number(process.env.BENCH_TAIL_SATURATE ?? 0); i++) await measure(service, settings.duration, GET ? undefined : { patchPets: PETS })
    // BENCH_TAIL_IDLE=S: S seconds with nothing sent before the run, as the latency scenario's bare control leaves it.
    await new Promise((resolve) => setTimeout(resolve, Number(process.env.BENCH_TAIL_IDLE ?? 0) * 1000))
    const spec: OpenLoopSpec = {
      origins: [new URL(service.url).origin],
      rate,
      warmup: settings.latencyWarmup,
      duration: settings.latencyDuration,
      maxConnections: settings.connections,
      timeoutMs: 10_000,
      ...(GET ? {} : { patchPets: PETS })
    }
    const cpu0 = cpuSeconds(service.proc.pid)
    const wait0 = runQueueSeconds(service.proc.pid)
    const started = Date.now()
    // The window starts as the generator's measured window does (its warm-up, plus its own start-up of ~0.5 s).
    const mark = setTimeout(() => service.proc.child.kill('SIGUSR2'), settings.latencyWarmup * 1000 + 500)
    const stdout = await runNode(['--import', 'tsx', join(ROOT, 'bench/open-loop.ts'), JSON.stringify(spec)],
      { BENCH_HEADERS: JSON.stringify(service.headers) }, 'load', (spec.warmup + spec.duration + 70) * 1000)
    clearTimeout(mark)
    service.proc.child.kill('SIGUSR2')
    const span = (Date.now() - started) / 1000
    const cpu1 = cpuSeconds(service.proc.pid)
    const wait1 = runQueueSeconds(service.proc.pid)
    const result = JSON.parse(stdout.trim().split('\n').pop() ?? '') as OpenLoopResult
    await new Promise((resolve) => setTimeout(resolve, 200))
    service.proc.child.kill('SIGTERM')
    await service.proc.exited
    const files = readdirSync(dir).filter((n) => n.startsWith('probe.')).map((n) => JSON.parse(readFileSync(join(dir, n), 'utf8')) as ProbeData)
    const mainData = files.find((d) => d.main)
    const window = mainData?.window
    if (window === undefined || window.end === null) throw new Error(`the probe did not mark the window: ${JSON.stringify(window)} in ${readdirSync(dir).join(',')} files, exit ${JSON.stringify(await service.proc.exited)} ${JSON.stringify(service.proc.output())}`)
    const summary = analyse(files, window.start, window.end)
    if (STALL_PROFILE && mainData !== undefined) {
      const profile = readdirSync(join(dir, 'cpu')).map((n) => join(dir, 'cpu', n)).sort((a, b) => statSync(b).size - statSync(a).size)[0]
      if (profile !== undefined) Object.assign(summary, { stallProfiles: insideStalls(mainData, JSON.parse(readFileSync(profile, 'utf8')) as CpuProfile, window.start, window.end) })
    }
    const r = result
    console.log(JSON.stringify({
      rate,
      openLoop: {
        latency: r.latency, serviceTime: r.serviceTime, lag: r.lag, sentRate: r.sentRate, non2xx: r.non2xx, errors: r.errors,
        behind: r.behind, behindReasons: r.behindReasons, generatorRunQueueMsPerS: r.runQueueMsPerS
      },
      serverCpuPct: cpu0 === null || cpu1 === null ? null : (cpu1 - cpu0) / span * 100,
      serverRunQueueMsPerS: wait0 === null || wait1 === null ? null : (wait1 - wait0) / span * 1000,
      probeFiles: dir,
      ...summary
    }, null, 1))
  })
}

/** Closed loop at saturation on a fresh store, as the latency scenario measures capacity: requests/s. */
async function capacity (): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir('sqlite-tail-capacity')
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const service = await startService('service', env, await prepareStore(env, PETS), cleanup)
    const write = GET ? undefined : { patchPets: PETS }
    await measure(service, settings.warmup, write)
    const run = await measure(service, settings.duration, write)
    console.log(JSON.stringify({ capacity: run.rps, p99: run.p99, serverCpuPct: run.serverCpuPct }))
  })
}

cleanupOnSignals()
await Cleanup.scope(async (cleanup) => {
  openWorkDir(cleanup)
  if (process.argv[2] === 'capacity') await capacity()
  else for (const rate of (process.argv[2] ?? '2300,4600').split(',').map(Number)) await oneRate(rate)
})
