/**
 * Process plumbing for the benchmark: child processes pinned to cores, readiness, peak memory, and a cleanup
 * stack that also runs when the harness is interrupted.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
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
 * Starts `node ARGS` (under `taskset -c CORE` when pinning) with exactly the given environment plus PATH, so
 * nothing from the caller's shell (DATABASE_URL, PORT, ...) leaks in. taskset execs node, so the pid is
 * node's own: /proc/<pid>/status describes the server, not a wrapper.
 */
export function startNode (args: string[], env: Record<string, string>, core?: 'server' | 'load'): Proc {
  const pin = core !== undefined && PINNING !== null ? ['taskset', '-c', PINNING[core]] : []
  const command = [...pin, process.execPath, ...args]
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
  return {
    child,
    pid: child.pid,
    output: () => ({ stdout, stderr }),
    exited,
    running: () => child.exitCode === null && child.signalCode === null
  }
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

/** Runs `node ARGS` to completion; throws with its stderr when it fails. Returns stdout. */
export async function runNode (args: string[], env: Record<string, string>, core?: 'server' | 'load', timeoutMs = 120_000): Promise<string> {
  const proc = startNode(args, env, core)
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs)
  try {
    const { code, signal } = await proc.exited
    const { stdout, stderr } = proc.output()
    if (code !== 0) throw new Error(`node ${args.join(' ').slice(0, 200)} failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`)
    return stdout
  } finally {
    clearTimeout(timer)
    proc.child.kill('SIGKILL')
  }
}

/** A port that was free a moment ago. */
export function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      if (address === null || typeof address === 'string') {
        server.close()
        reject(new Error('no port'))
        return
      }
      server.close(() => resolve(address.port))
    })
  })
}

/** Waits until `url` answers 200, failing early when the process dies. */
export async function waitHttp (url: string, proc: Proc, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (!proc.running()) throw new Error(`process exited before answering ${url}: ${proc.output().stderr.trim()}`)
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
      await res.arrayBuffer()
      if (res.status === 200) return
    } catch {
      // Not listening yet.
    }
    await sleep(100)
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms: ${proc.output().stderr.trim()}`)
}

/** Waits for a line on the process's stdout matching `pattern`; returns the first capture. */
export async function waitOutput (proc: Proc, pattern: RegExp, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const match = pattern.exec(proc.output().stdout)
    if (match !== null) return match[1] as string
    if (!proc.running()) throw new Error(`process exited: ${proc.output().stderr.trim()}`)
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

export function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}
