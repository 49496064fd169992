/**
 * Load and what it measured: one run of the load generator (wrk or autocannon, on the load core) against a target,
 * the medians of a scenario's runs, and the measured rounds of a service alone.
 */
import { join } from 'node:path'
import type { LoadResult, LoadSpec } from './load.js'
import { log, ms, pct, type ScenarioResult, type Side, type Target } from './scenario.js'
import { settings } from './settings.js'
import { cpuSeconds, describeExit, median, memoryMb, ROOT, runCommand, runNode } from './support.js'

const LOAD = join(ROOT, 'bench/load.ts')
const WRK_SCRIPT = join(ROOT, 'bench/wrk.lua')

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
export async function measure (target: Target, seconds: number, extra: Partial<LoadSpec> = {}): Promise<LoadResult> {
  if (!target.proc.running()) throw new Error(`${target.name} is not running: ${describeExit(target.proc)}`)
  // wrk takes whole seconds.
  const duration = settings.loadGenerator === 'wrk' && extra.holdPets === undefined ? Math.max(1, Math.round(seconds)) : seconds
  const spec: LoadSpec = { url: target.url, connections: settings.connections, duration, headers: target.headers, ...extra }
  const cpuBefore = cpuSeconds(target.proc.pid)
  // Holds need a generator that reads each answer (see LoadSpec.holdPets).
  const result = settings.loadGenerator === 'wrk' && spec.holdPets === undefined ? await wrk(spec) : await autocannon(spec)
  const cpuAfter = cpuSeconds(target.proc.pid)
  if (!target.proc.running()) throw new Error(`${target.name} died under load: ${describeExit(target.proc)}`)
  // Over the run's duration: the load generator's own start-up puts no load on the server.
  result.serverCpuPct = cpuBefore === null || cpuAfter === null ? null : (cpuAfter - cpuBefore) * 100 / duration
  return result
}

export function side (runs: LoadResult[]): Side {
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
export function combine (a: LoadResult, b: LoadResult): LoadResult {
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

export const describeRun = (r: LoadResult): string =>
  `${Math.round(r.rps)} rps, p50 ${ms(r.p50)} ms, p99 ${ms(r.p99)} ms, CPU server ${pct(r.serverCpuPct)} load ${pct(r.loadCpuPct)}${r.non2xx + r.errors > 0 ? `, non-2xx ${r.non2xx}, errors ${r.errors} ${JSON.stringify(r.statusCodes)}` : ''}`

/** Runs `rounds` measured runs against one service, after a warm-up; the ceiling is get-10's. */
export async function serviceOnly (result: ScenarioResult, service: Target, ceiling: Side | null, extra: Partial<LoadSpec> = {}): Promise<void> {
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
