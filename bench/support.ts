/**
 * Process plumbing for the benchmark: child processes pinned to cores, readiness, peak memory, and a cleanup
 * stack that also runs when the harness is interrupted.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** Only the tail of a child's output is kept: enough to explain a failure, bounded for a chatty child. */
const OUTPUT_TAIL = 16_384

/**
 * Cores to pin servers and load generators to, or null when pinning is impossible (no taskset, one core):
 * without separate cores the load generator steals CPU from the server it measures.
 */
export const PINNING: { server: string, load: string } | null = (() => {
  if (cpus().length < 2) return null
  const found = spawnSync('sh', ['-c', 'command -v taskset'], { encoding: 'utf8' })
  return found.status === 0 && found.stdout.trim() !== '' ? { server: '0', load: '1' } : null
})()

/** Whether `name` is a command on PATH. */
export function hasCommand (name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`]).status === 0
}

/** Cleanup steps, run last-in first-out, each at most once, even when an earlier one fails. */
export class Cleanup {
  static readonly active = new Set<Cleanup>()
  private readonly steps: Array<() => Promise<void> | void> = []

  constructor () {
    Cleanup.active.add(this)
  }

  defer (step: () => Promise<void> | void): void {
    this.steps.push(step)
  }

  async run (): Promise<void> {
    Cleanup.active.delete(this)
    for (let step = this.steps.pop(); step !== undefined; step = this.steps.pop()) {
      try {
        await step()
      } catch (error) {
        console.error(`bench: cleanup step failed: ${(error as Error).message}`)
      }
    }
  }

  /** Runs `work` with a fresh Cleanup and always runs it afterwards. */
  static async scope<T> (work: (cleanup: Cleanup) => Promise<T>): Promise<T> {
    const cleanup = new Cleanup()
    try {
      return await work(cleanup)
    } finally {
      await cleanup.run()
    }
  }
}

/** Every child still running, so that an interrupted run leaves none behind (load generators included). */
const children = new Set<Proc>()

/** On Ctrl+C or SIGTERM: run every pending cleanup (children, database, Redis keys), then exit. */
export function cleanupOnSignals (): void {
  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) process.exit(130)
    stopping = true
    console.error(`\nbench: ${signal}: cleaning up`)
    const all = [...Cleanup.active].reverse()
    void (async () => {
      for (const cleanup of all) await cleanup.run()
      for (const proc of children) proc.child.kill('SIGKILL')
      process.exit(130)
    })()
  }
  process.on('SIGINT', () => stop('SIGINT'))
  process.on('SIGTERM', () => stop('SIGTERM'))
}

export interface Proc {
  child: ChildProcess
  pid: number
  output: () => { stdout: string, stderr: string }
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
  running: () => boolean
}

/**
 * Starts COMMAND (under `taskset -c CORE` when pinning) with exactly the given environment plus PATH, so
 * nothing from the caller's shell (DATABASE_URL, PORT, ...) leaks in. taskset execs the command, so the pid
 * is the command's own: /proc/<pid>/status describes the server, not a wrapper.
 */
export function startCommand (argv: string[], env: Record<string, string>, core?: 'server' | 'load'): Proc {
  const pin = core !== undefined && PINNING !== null ? ['taskset', '-c', PINNING[core]] : []
  const command = [...pin, ...argv]
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe']
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => { stdout = (stdout + chunk).slice(-OUTPUT_TAIL) })
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { stderr = (stderr + chunk).slice(-OUTPUT_TAIL) })
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    child.on('error', (error) => { stderr += String(error); resolve({ code: -1, signal: null }) })
    child.on('close', (code, signal) => resolve({ code, signal }))
  })
  if (child.pid === undefined) throw new Error(`could not start ${command.join(' ')}`)
  const proc: Proc = {
    child,
    pid: child.pid,
    output: () => ({ stdout, stderr }),
    exited,
    running: () => child.exitCode === null && child.signalCode === null
  }
  children.add(proc)
  void exited.then(() => children.delete(proc))
  return proc
}

/** Starts `node ARGS`; see startCommand. */
export function startNode (args: string[], env: Record<string, string>, core?: 'server' | 'load'): Proc {
  return startCommand([process.execPath, ...args], env, core)
}

/** SIGTERM (a graceful stop), then SIGKILL if the process is still there after `graceMs`. */
export async function stop (proc: Proc, graceMs = 5000): Promise<void> {
  if (!proc.running()) return
  proc.child.kill('SIGTERM')
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), graceMs)
  try {
    await proc.exited
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Runs COMMAND to completion; throws with its stderr when it fails. Returns stdout, and the CPU seconds the
 * process had used when last seen (sampled, since an exited process can no longer be asked).
 */
export async function runCommand (
  argv: string[], env: Record<string, string>, core?: 'server' | 'load', timeoutMs = 120_000
): Promise<{ stdout: string, cpuSeconds: number | null }> {
  const proc = startCommand(argv, env, core)
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs)
  let cpu: number | null = null
  const sampler = setInterval(() => { cpu = cpuSeconds(proc.pid) ?? cpu }, 100)
  try {
    const { code, signal } = await proc.exited
    const { stdout, stderr } = proc.output()
    if (code !== 0) {
      // The command line may carry a bench key (wrk -H): never print one, even a throwaway.
      const shown = argv.join(' ').replace(/Bearer \S+/g, 'Bearer ***').slice(0, 200)
      throw new Error(`${shown} failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`)
    }
    return { stdout, cpuSeconds: cpu }
  } finally {
    clearTimeout(timer)
    clearInterval(sampler)
    proc.child.kill('SIGKILL')
  }
}

/** Runs `node ARGS` to completion; see runCommand. Returns stdout. */
export async function runNode (args: string[], env: Record<string, string>, core?: 'server' | 'load', timeoutMs = 120_000): Promise<string> {
  return (await runCommand([process.execPath, ...args], env, core, timeoutMs)).stdout
}


/** Why a process is not (or no longer) running: its exit and the tail of its output (pino logs go to stdout). */
export function describeExit (proc: Proc): string {
  const { stdout, stderr } = proc.output()
  const exit = proc.child.signalCode ?? `exit code ${proc.child.exitCode}`
  return `${exit}; stderr: ${stderr.trim().slice(-1000) || '(empty)'}; stdout: ${stdout.trim().slice(-1000) || '(empty)'}`
}

/** Waits until `url` answers 200, failing early when the process dies. */
export async function waitHttp (url: string, proc: Proc, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (!proc.running()) throw new Error(`process exited before answering ${url}: ${describeExit(proc)}`)
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
      await res.arrayBuffer()
      if (res.status === 200) return
    } catch {
      // Not listening yet.
    }
    await sleep(100)
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms: ${describeExit(proc)}`)
}

/** Waits for a line on the process's stdout matching `pattern`; returns the first capture. */
export async function waitOutput (proc: Proc, pattern: RegExp, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const match = pattern.exec(proc.output().stdout)
    if (match !== null) return match[1] as string
    if (!proc.running()) throw new Error(`process exited: ${describeExit(proc)}`)
    await sleep(50)
  }
  throw new Error(`no ${pattern.source} within ${timeoutMs} ms`)
}

/** A /proc/<pid>/status field in MB (VmHWM: peak resident set; VmRSS: current), or null off Linux. */
export function memoryMb (pid: number, field: 'VmHWM' | 'VmRSS'): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)
    return match === null ? null : Number(match[1]) / 1024
  } catch {
    return null
  }
}

const CLOCK_TICKS = (() => {
  const ticks = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout)
  return Number.isInteger(ticks) && ticks > 0 ? ticks : 100
})()

/** CPU seconds (user + system) a process has used so far, or null off Linux. */
export function cpuSeconds (pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // After "pid (comm) ", whose comm may hold spaces: state is field 3, utime 14 and stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return null
  }
}

/**
 * Seconds the process's main thread has spent runnable but waiting for a CPU (the scheduler's run-queue delay,
 * /proc/<pid>/schedstat), or null where the kernel does not say: on a shared machine, time the process was ready to
 * serve and could not.
 */
export function runQueueSeconds (pid: number | 'self'): number | null {
  try {
    const wait = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(' ')[1])
    return Number.isFinite(wait) ? wait / 1e9 : null
  } catch {
    return null
  }
}

export function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

export { freePort } from '../test/helpers/net.js'
