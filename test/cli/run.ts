/**
 * CLI test helpers: run the real `bin/petstore.js` (compiled dist/, so `npm run build` first) as a child
 * process with a clean environment, its own temporary directory and its own SQLite file.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { tempDir } from '../helpers/app.js'
import { freePort } from '../helpers/net.js'
import { WAIT_TIMEOUT_MS, within } from '../helpers/wait.js'

export { freePort, within }

export const BIN = fileURLToPath(new URL('../../bin/petstore.js', import.meta.url))

/**
 * A deadline for a command that hangs, not a measure: the longest run here (an import of 100,000 pets) takes a few
 * seconds on a quiet machine and over a minute on a two-core machine at a load of 15.
 */
const RUN_TIMEOUT_MS = 300_000

/**
 * How long a test waits for a server it stopped (SIGTERM without a drain, SIGINT, SIGKILL) to exit: a deadline for a
 * process that hangs, not a measure of how fast it stops (the tests that mean to bound that measure it themselves).
 */
export const EXIT_TIMEOUT_MS = 20_000

export interface CliResult {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
}

export interface Cli {
  /** The test's own temporary directory (also the child's working directory). */
  dir: string
  /** The test's own SQLite file (DATABASE_URL). */
  db: string
  /** The environment every run gets, before per-run overrides. */
  env: Record<string, string>
  /** Runs one command to completion; `input`, when given, is its standard input (otherwise it reads none). */
  run: (args: string[], env?: Record<string, string>, input?: string) => Promise<CliResult>
  /** Starts a long-running command (serve); the child is killed after the test if still running. */
  start: (args: string[], env?: Record<string, string>, input?: string) => Started
  /** Writes a file into the test's directory and returns its path. */
  file: (name: string, content: string | Uint8Array) => string
}

export interface Output { stdout: string, stderr: string }

export interface Started {
  child: ChildProcess
  /**
   * Everything written so far: only what the child had written when this is called, so a line it writes in answer to
   * a request may not be there yet. To assert on a line of a running child, wait for it with waitForOutput.
   */
  output: () => Output
  /**
   * Resolves with the output so far once `expected` holds: a pattern found in stdout (or in `stream`), or a predicate
   * on both streams. Fails, with the output so far, when the child exits without it or after `timeoutMs`
   * (WAIT_TIMEOUT_MS by default, a deadline generous enough for a loaded machine).
   */
  waitForOutput: (expected: RegExp | ((output: Output) => boolean), options?: { stream?: 'stdout' | 'stderr', timeoutMs?: number }) => Promise<Output>
  /** Resolves when the child has exited. */
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

/**
 * PETS_SUNSET for a server a test runs on the real clock: a year after the test starts. With the default (a fixed
 * date), the deprecated GET /v1/pets/{petId} would answer 410 Gone once that date has passed, and every test or
 * documentation example calling it would fail from that day on: no test may depend on the calendar.
 */
export function sunsetAYearAhead (): string {
  return new Date(Date.now() + 365 * 86_400_000).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

/**
 * A CLI bound to a fresh temporary directory and database. The child sees only PATH plus the given variables (and
 * PETS_SUNSET, above), so nothing from the developer's shell (DATABASE_URL, PORT, ...) leaks into a test.
 *
 * It runs as from a checkout (`node bin/petstore.js`), or with `installed` as an installed command runs: `petstore`
 * found on PATH, a link to bin/petstore.js, as the image and a global install have it.
 */
export function cliFor (t: TestContext, env: Record<string, string> = {}, { installed = false } = {}): Cli {
  const dir = tempDir(t)
  const db = join(dir, 'petstore.db')
  const binDir = join(dir, 'bin')
  if (installed) {
    mkdirSync(binDir)
    symlinkSync(BIN, join(binDir, 'petstore'))
  }
  const path = process.env.PATH ?? ''
  // No drain on SIGTERM (SHUTDOWN_DRAIN_MS): no balancer is in front of a test's server; the drain's own tests set it.
  const base: Record<string, string> = {
    PATH: installed ? `${binDir}${delimiter}${path}` : path, LOG_LEVEL: 'warn', DATABASE_URL: db, SHUTDOWN_DRAIN_MS: '0', PETS_SUNSET: sunsetAYearAhead(), ...env
  }

  const start = (args: string[], extra: Record<string, string> = {}, input?: string): Started => {
    const [file, argv] = installed ? ['petstore', args] : [process.execPath, [BIN, ...args]]
    const child = spawn(file, argv, { cwd: dir, env: { ...base, ...extra }, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] })
    if (input !== undefined) {
      // A command may stop reading before the end of its input (keys find reads a bounded amount): not the test's error.
      child.stdin?.on('error', (error: NodeJS.ErrnoException) => { if (error.code !== 'EPIPE') throw error })
      child.stdin?.end(input)
    }
    let stdout = ''
    let stderr = ''
    let closed = false
    /** Called on each chunk and once at the close; each waiter removes itself when done. */
    const watchers = new Set<() => void>()
    const notify = (): void => { for (const watcher of [...watchers]) watcher() }
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk; notify() })
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk; notify() })
    const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve, reject) => {
      child.on('error', reject)
      // 'close' comes after both streams ended: the output is complete by then.
      child.on('close', (code, signal) => { closed = true; notify(); resolve({ code, signal }) })
    })
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    })
    const output = (): Output => ({ stdout, stderr })
    const waitForOutput: Started['waitForOutput'] = async (expected, { stream = 'stdout', timeoutMs = WAIT_TIMEOUT_MS } = {}) => {
      const holds = (): boolean => typeof expected === 'function' ? expected(output()) : expected.test(output()[stream])
      const described = typeof expected === 'function' ? 'the output expected' : `${String(expected)} in ${stream}`
      await new Promise<void>((resolve, reject) => {
        const stop = (error?: Error): void => {
          clearTimeout(timer)
          watchers.delete(check)
          if (error === undefined) resolve()
          else reject(error)
        }
        const failure = (why: string): Error =>
          new assert.AssertionError({ message: `${described} ${why}; stdout so far:\n${stdout}\nstderr so far:\n${stderr}` })
        const check = (): void => {
          if (holds()) stop()
          else if (closed) stop(failure('never came: the process exited'))
        }
        const timer = setTimeout(() => { stop(failure(`did not come within ${timeoutMs} ms`)) }, timeoutMs)
        watchers.add(check)
        check()
      })
      return output()
    }
    return { child, output, waitForOutput, exited }
  }

  const run = async (args: string[], extra: Record<string, string> = {}, input?: string): Promise<CliResult> => {
    const started = start(args, extra, input)
    const timer = setTimeout(() => started.child.kill('SIGKILL'), RUN_TIMEOUT_MS)
    try {
      const { code, signal } = await started.exited
      return { code, signal, ...started.output() }
    } finally {
      clearTimeout(timer)
    }
  }

  const file = (name: string, content: string | Uint8Array): string => {
    const path = join(dir, name)
    writeFileSync(path, content)
    return path
  }

  return { dir, db, env: base, run, start, file }
}

/** Opens the test's SQLite store directly (migrated), runs `work`, and closes it again. */
export async function inspectStore<T> (db: string, work: (store: SqliteStore) => Promise<T>): Promise<T> {
  const store = new SqliteStore(db)
  try {
    await store.schema.migrate()
    return await work(store)
  } finally {
    await store.close()
  }
}


/** The address in the line `serve` logs once it listens (JSON or pretty; the real port also for PORT=0). */
const LISTENING = /Petstore Inventory Service: API (http:\/\/127\.0\.0\.1:(\d+))\/v1/

/**
 * Starts `petstore serve` and waits until it listens and GET /healthz answers 200; fails early, with the
 * server's stderr, when the process exits first. Without env.PORT it asks for port 0 and reads the port the server
 * got from its start line (at LOG_LEVEL info unless the test sets another level, with env.PORT then): a port
 * picked free beforehand could be taken by another test's server in between. The deadline is for a server that
 * never comes up, not a measure of its start (a single server starts in a few seconds at a load of 6 on two cores);
 * with --workers it is twice as long: the primary starts first, then each worker loads the whole server.
 */
export async function startServe (cli: Cli, args: string[] = [], env: Record<string, string> = {}, timeoutMs = args.includes('--workers') ? 60_000 : 30_000): Promise<{ base: string, port: number, server: Started }> {
  const server = cli.start(['serve', ...args], { PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env })
  const deadline = Date.now() + timeoutMs
  let base: string | null = env.PORT === undefined ? null : `http://127.0.0.1:${env.PORT}`
  while (Date.now() < deadline) {
    if (server.child.exitCode !== null || server.child.signalCode !== null) {
      assert.fail(`serve exited early (${server.child.exitCode ?? server.child.signalCode}): ${server.output().stderr}`)
    }
    base ??= LISTENING.exec(server.output().stdout)?.[1] ?? null
    const healthy = base !== null && await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(1000) }).then((r) => r.status === 200, () => false)
    if (healthy && base !== null) return { base, port: Number(new URL(base).port), server }
    await sleep(50)
  }
  assert.fail(`serve did not answer GET /healthz within ${timeoutMs} ms: ${server.output().stderr}`)
}
