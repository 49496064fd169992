/**
 * CLI test helpers: run the real `bin/petstore.js` (compiled dist/, so `npm run build` first) as a child
 * process with a clean environment, its own temporary directory and its own SQLite file.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { SqliteStore } from '../../src/store/sqlite/index.js'
import { tempDir } from '../helpers/app.js'
import { freePort } from '../helpers/net.js'

export { freePort }

export const BIN = fileURLToPath(new URL('../../bin/petstore.js', import.meta.url))

/** No CLI run in these tests should take anywhere near this long. */
const RUN_TIMEOUT_MS = 20_000

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

export interface Started {
  child: ChildProcess
  /** Everything written so far. */
  output: () => { stdout: string, stderr: string }
  /** Resolves when the child has exited. */
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

/**
 * A CLI bound to a fresh temporary directory and database. The child sees only PATH plus the given variables,
 * so nothing from the developer's shell (DATABASE_URL, PORT, ...) leaks into a test.
 */
export function cliFor (t: TestContext, env: Record<string, string> = {}): Cli {
  const dir = tempDir(t)
  const db = join(dir, 'petstore.db')
  // No drain on SIGTERM (SHUTDOWN_DRAIN_MS): no balancer is in front of a test's server; the drain's own tests set it.
  const base: Record<string, string> = { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', DATABASE_URL: db, SHUTDOWN_DRAIN_MS: '0', ...env }

  const start = (args: string[], extra: Record<string, string> = {}, input?: string): Started => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, env: { ...base, ...extra }, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] })
    if (input !== undefined) {
      // A command may stop reading before the end of its input (keys find reads a bounded amount): not the test's error.
      child.stdin?.on('error', (error: NodeJS.ErrnoException) => { if (error.code !== 'EPIPE') throw error })
      child.stdin?.end(input)
    }
    let stdout = ''
    let stderr = ''
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
    const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve, reject) => {
      child.on('error', reject)
      child.on('close', (code, signal) => resolve({ code, signal }))
    })
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    })
    return { child, output: () => ({ stdout, stderr }), exited }
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
    await store.migrate()
    return await work(store)
  } finally {
    await store.close()
  }
}


/** Rejects when `promise` does not settle within `ms`. */
export async function within<T> (ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}


/** The address in the line `serve` logs once it listens (JSON or pretty; the real port also for PORT=0). */
const LISTENING = /Petstore Inventory Service: API (http:\/\/127\.0\.0\.1:(\d+))\/v1/

/**
 * Starts `petstore serve` and waits until it listens and GET /healthz answers 200; fails early, with the
 * server's stderr, when the process exits first. Without env.PORT it asks for port 0 and reads the port the server
 * got from its start line (at LOG_LEVEL info unless the test sets another level, with env.PORT then): a port
 * picked free beforehand could be taken by another test's server in between. With --workers it waits twice as long:
 * the primary starts first, then each worker loads the whole server (on a loaded two-core machine, over 10 s).
 */
export async function startServe (cli: Cli, args: string[] = [], env: Record<string, string> = {}, timeoutMs = args.includes('--workers') ? 20_000 : 10_000): Promise<{ base: string, port: number, server: Started }> {
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
