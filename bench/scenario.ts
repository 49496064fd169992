/**
 * What every scenario module exports (a Scenario), what it fills in (its ScenarioResult), and what it may ask of
 * the run (RunContext); plus the log and the number formats the scenarios and the report share.
 */
import { randomBytes } from 'node:crypto'
import type { LoadResult } from './load.js'
import type { Proc } from './support.js'

export interface Side {
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
export interface Check {
  name: string
  value: number | null
  text: string
  target: string
  met: boolean | null
  flag: string
}

export interface ScenarioResult {
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

export interface Target { name: string, url: string, headers: Record<string, string>, proc: Proc }

/** What the peer's rounds measured (see scenarios/peer.ts), or why the peer could not be measured. */
export interface PeerRounds {
  peer: Side | null
  /** The service and the ceiling of the same rounds. */
  service: Side
  ceiling: Side
  peakRssMb: number | null
  /** Whether the peer answered exactly the service's bytes and content type (and so the same ceiling applies). */
  sameBytes: boolean
  error: Error | null
}

/** What a scenario may ask of the run it is part of. */
export interface RunContext {
  /** Whether a scenario is part of this run (BENCH_ONLY). */
  wanted (id: string): boolean
  /** get-10's ceiling when it ran before: the reference of the scenarios without a bare server of their own. */
  get10Ceiling (): Side | null
  /** The peer's runs in get-10's rounds, for the peer scenario: set by get-10 when the peer is wanted too. */
  peerRounds: PeerRounds | null
}

/**
 * One scenario (bench/scenarios/<id>.ts; the three floor-* in floor.ts): the runner runs it on a fresh result and
 * reports that result.
 */
export interface Scenario {
  id: string
  title: string
  /** The ratio to the ceiling it should reach; null where there is none. */
  target: number | null
  /** Fills in `result`; a thrown error marks the scenario failed. */
  run (result: ScenarioResult, context: RunContext): Promise<void>
}

export function emptyResult (id: string, title: string, target: number | null): ScenarioResult {
  return { id, title, status: 'ok', service: null, ceiling: null, ceilingFrom: null, ratio: null, target, peakRssMb: null, flags: [], notes: [], checks: [] }
}

export const log = (text: string): void => { process.stderr.write(`bench: ${text}\n`) }
export const round1 = (n: number): string => n.toFixed(1)
export const hex = (): string => randomBytes(5).toString('hex')
export const ms = (n: number): string => String(Math.round(n * 100) / 100)
export const pct = (n: number | null): string => n === null ? '-' : `${Math.round(n)}%`

export function fmtMb (mb: number | null): string {
  return mb === null ? '-' : round1(mb)
}
