/**
 * One fault of the chaos run: what it needs on this machine, and how it is injected while clients keep sending.
 * underLoad() runs the traffic around the injection and judges it the same way for every fault: no error answer but
 * 503 with Retry-After, every acknowledged write stored on every instance still running, no instance dead that the
 * fault did not kill; and it measures the recovery, the longest gap between acknowledged writes, the 503s and the
 * writes acknowledged during the fault.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { type Cleanup, describeExit, type Proc } from '../../bench/support.js'
import { CLIENTS, type Deployment, type Instance, PETS_PER_CLIENT, READERS } from './deployment.js'
import { Traffic } from './traffic.js'

export interface Fault {
  /** A short name for CHAOS_FAULTS. */
  id: string
  name: string
  /** Why this fault cannot run here (a missing binary, no mount), or null when it can. */
  missing: () => Promise<string | null>
  run: (cleanup: Cleanup) => Promise<Outcome>
}

export interface Outcome {
  ok: boolean
  /** The one summary line (without PASS/FAIL and the name). */
  summary: string
}

export interface Injected {
  injectedAt: number
  /** When the fault was repaired (or, for a fault the system heals itself, when the healing was seen). */
  repairedAt: number
  /** What recovery is measured from: the repair, or (a killed instance, a failover) the injection itself. */
  recoverFrom: 'repair' | 'injection'
  /** Processes the fault ended on purpose: not expected to be running at the end. */
  ended?: Proc[]
  /** What the fault's own checks found wrong (a drain that did not end cleanly, a limiter that never came back). */
  problems?: string[]
  /** Measurements of the fault's own, for the summary line. */
  notes?: string[]
}

/** Traffic before the fault, so that it meets clients at work. */
const WARMUP_MS = 2000
/** The longest wait for the first acknowledged write after the fault. */
const RECOVERY_TIMEOUT_MS = 30_000
/** How long an instance may take to stop after the run (a drain of SHUTDOWN_DRAIN_MS, then its requests). */
const STOP_TIMEOUT_MS = 10_000
/** Traffic after recovery, before the clients stop and the state is checked. */
const SETTLE_MS = 1500

export function seconds (ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`
}

/** SIGTERMs every instance at once; what did not exit 0 within STOP_TIMEOUT_MS, described. */
async function stopCleanly (instances: Instance[]): Promise<string[]> {
  const stopped = await Promise.all(instances.map(async (instance) => {
    instance.proc.child.kill('SIGTERM')
    const timeout = sleep(STOP_TIMEOUT_MS).then(() => null)
    const exit = await Promise.race([instance.proc.exited, timeout])
    if (exit === null) return `the instance at ${instance.base} did not exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM`
    return exit.code === 0 ? null : `the instance at ${instance.base} exited ${exit.signal ?? exit.code} on SIGTERM: ${describeExit(instance.proc)}`
  }))
  return stopped.filter((problem) => problem !== null)
}

/** Runs the clients against `deployment`, `inject`s the fault among them, and judges the result. */
export async function underLoad (deployment: Deployment, inject: (traffic: Traffic) => Promise<Injected>): Promise<Outcome> {
  const traffic = new Traffic({ bases: deployment.bases, keys: deployment.keys, clients: CLIENTS, readers: READERS, petsPerClient: PETS_PER_CLIENT })
  traffic.start()
  let injected: Injected
  let recoveredAt: number | null
  try {
    await sleep(WARMUP_MS)
    injected = await inject(traffic)
    const from = injected.recoverFrom === 'repair' ? injected.repairedAt : injected.injectedAt
    recoveredAt = await traffic.firstAckAfter(from, RECOVERY_TIMEOUT_MS)
    await sleep(SETTLE_MS)
  } finally {
    await traffic.stop()
  }
  const from = injected.recoverFrom === 'repair' ? injected.repairedAt : injected.injectedAt
  const problems = [...traffic.failures, ...(injected.problems ?? [])]
  if (recoveredAt === null) problems.push(`no write acknowledged within ${RECOVERY_TIMEOUT_MS / 1000} s of the ${injected.recoverFrom}`)
  const ended = new Set(injected.ended ?? [])
  const running = deployment.instances.filter((instance) => !ended.has(instance.proc))
  for (const instance of running) {
    if (!instance.proc.running()) problems.push(`the instance at ${instance.base} died: ${describeExit(instance.proc)}`)
  }
  const alive = running.filter((instance) => instance.proc.running()).map((instance) => instance.base)
  const mismatches = await traffic.verify(alive)
  problems.push(...mismatches)
  // What the fault left behind must not keep an instance from stopping: each survivor drains and exits 0.
  problems.push(...await stopCleanly(running.filter((instance) => instance.proc.running())))

  const within = (times: number[]): number => times.filter((at) => at >= injected.injectedAt && at <= injected.repairedAt).length
  const latency = (from: number, to: number): string => {
    const ms = traffic.medianLatency(from, to)
    return ms === null ? 'none' : `${ms} ms`
  }
  const parts = [
    recoveredAt === null ? 'NOT RECOVERED' : `recovered ${seconds(recoveredAt - from)} after the ${injected.recoverFrom}`,
    `longest gap ${seconds(traffic.longestGap())}`,
    `503s ${traffic.unavailable.length} (${traffic.unavailableReads.length} to reads)`,
    `connection errors ${traffic.connectionErrors}`,
    `writes acknowledged ${traffic.acks.length}, ${within(traffic.acks)} during the fault (${seconds(injected.repairedAt - injected.injectedAt)})`,
    `median write ${latency(traffic.startedAt, injected.injectedAt)} before, ${latency(injected.injectedAt, injected.repairedAt)} during the fault`,
    `reads answered ${traffic.reads.length}, ${within(traffic.reads)} during the fault`,
    ...(traffic.inFlightRetries > 0 ? [`retries told in flight ${traffic.inFlightRetries}`] : []),
    ...(injected.notes ?? []),
    mismatches.length === 0 ? `final state exact on ${alive.length} instance(s)` : `final state WRONG (${mismatches.length} differences)`
  ]
  if (problems.length > 0) {
    console.log(`  problems (${problems.length}):`)
    for (const problem of problems.slice(0, 10)) console.log(`    ${problem}`)
    if (problems.length > 10) console.log(`    ... and ${problems.length - 10} more`)
  }
  return { ok: problems.length === 0, summary: parts.join('; ') }
}
