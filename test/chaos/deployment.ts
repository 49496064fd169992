/**
 * What a fault runs against: a store with the run's pets and keys (made with the CLI, as an operator would) and
 * instances of `petstore serve` on free ports, stopped when the fault's cleanup runs.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { type Cleanup, freePort, type Proc, ROOT, runNode, startNode, stop, waitHttp } from '../../bench/support.js'

const BIN = join(ROOT, 'bin/petstore.js')

/** Writing clients, each with pets of its own (every pet starts at quantity 0), and reading clients. */
export const CLIENTS = 6
export const PETS_PER_CLIENT = 4
export const READERS = 2

/**
 * Settings of every instance: warnings only (the run prints what matters), a short drain (a SIGTERM is served
 * cleanly, and the run stays short), the rest as configured by the fault.
 */
const INSTANCE_ENV = { LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: '500', HOST: '127.0.0.1' }

export interface Instance {
  base: string
  proc: Proc
}

export interface Deployment {
  instances: Instance[]
  bases: string[]
  /** Two keys whose limits never bind in a run (enterprise, 1,000,000 a minute). */
  keys: string[]
  /** The instances' environment (without PORT). */
  env: Record<string, string>
}

/** Migrates and fills the store named by env.DATABASE_URL, then starts `count` instances on it. */
export async function deploy (cleanup: Cleanup, env: Record<string, string>, count: number): Promise<Deployment> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-chaos-'))
  cleanup.defer(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'pets.json')
  const pets = Array.from({ length: CLIENTS * PETS_PER_CLIENT }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available', quantity: 0 }))
  writeFileSync(file, JSON.stringify({ pets }))
  const base = { ...INSTANCE_ENV, ...env }
  await runNode([BIN, 'migrate'], base)
  await runNode([BIN, 'import', file], base)
  const keys: string[] = []
  for (let i = 0; i < 2; i++) {
    keys.push((await runNode([BIN, 'keys', 'create', '--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '100000000'], base)).trim())
  }
  const instances: Instance[] = []
  // One step for all of them: their drains then overlap instead of adding up.
  cleanup.defer(() => Promise.all(instances.map((instance) => stop(instance.proc))).then(() => {}))
  for (let i = 0; i < count; i++) {
    const port = await freePort()
    const proc = startNode([BIN, 'serve'], { ...base, PORT: String(port) })
    instances.push({ base: `http://127.0.0.1:${port}`, proc })
  }
  await Promise.all(instances.map((instance) => waitHttp(`${instance.base}/readyz`, instance.proc)))
  return { instances, bases: instances.map((instance) => instance.base), keys, env: base }
}

/** What /readyz says: 'ready' with the limiter answering, or the status code of a refusal, or 'down' without an answer. */
export async function readiness (base: string): Promise<string> {
  try {
    const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2000) })
    const body = await res.json() as { rateLimiter?: string }
    return res.status === 200 ? `ready ${body.rateLimiter ?? ''}`.trim() : String(res.status)
  } catch {
    return 'down'
  }
}

/** Polls /readyz of every base until each says `want` (e.g. 'ready redis'); the time it first did, or null after `timeoutMs`. */
export async function untilReady (bases: string[], want: string, timeoutMs: number): Promise<number | null> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const states = await Promise.all(bases.map(readiness))
    if (states.every((state) => state === want)) return Date.now()
    await sleep(100)
  }
  return null
}
