/**
 * What the scenarios start: the run's work folder and import files, stores prepared with the CLI, the service, its
 * bare ceiling, the peer, and the PostgreSQL and Redis the server scenarios need.
 */
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import pg from 'pg'
import { cleanRedis, redisReachable } from '../test/ratelimit/redis-env.js'
import { hex, log, type ScenarioResult, type Target } from './scenario.js'
import { settings } from './settings.js'
import {
  describeExit, freePort, hasCommand, ROOT, runCommand, runNode, startCommand, startNode, stop, waitHttp, waitOutput, type Cleanup
} from './support.js'

export const BIN = join(ROOT, 'bin/petstore.js')
export const BARE = join(ROOT, 'bench/bare-server.js')
export const PEER_DIR = join(ROOT, 'bench/peer')
const UNBOUNDED_KEY = ['keys', 'create', '--plan', 'enterprise', '--name', 'bench', '--per-minute', '1000000000', '--per-day', '1000000000']

let workDir = ''
const petFiles = new Map<number, string>()

/** The run's work folder (import files, stores), removed by `cleanup`. */
export function openWorkDir (cleanup: Cleanup): void {
  workDir = mkdtempSync(join(tmpdir(), 'petstore-bench-'))
  cleanup.defer(() => rmSync(workDir, { recursive: true, force: true }))
}

/** An import file with `count` pets, ids 1..count, each with a stock entry (written once per run). */
export function petsFile (count: number): string {
  const existing = petFiles.get(count)
  if (existing !== undefined) return existing
  const statuses = ['available', 'pending', 'sold']
  const pets = Array.from({ length: count }, (_, i) => ({ id: i + 1, name: `Pet ${i + 1}`, status: statuses[i % 3], quantity: (i * 7) % 100 }))
  const file = join(workDir, `pets-${count}.json`)
  writeFileSync(file, JSON.stringify({ pets, orders: [] }))
  petFiles.set(count, file)
  return file
}

export function scenarioDir (id: string): string {
  return mkdtempSync(join(workDir, `${id}-`))
}

const cli = (args: string[], env: Record<string, string>, timeoutMs?: number): Promise<string> => runNode([BIN, ...args], env, undefined, timeoutMs)

/** Migrates, imports `pets` pets and creates a key whose limits never bind; returns the key. */
export async function prepareStore (env: Record<string, string>, pets: number, importTimeoutMs?: number): Promise<string> {
  await cli(['migrate'], env)
  await cli(['import', petsFile(pets)], env, importTimeoutMs)
  return (await cli(UNBOUNDED_KEY, env)).trim()
}

/** `nodeArgs` go before the script (e.g. `--import bench/pg-count.js`). */
export async function startService (name: string, env: Record<string, string>, key: string, cleanup: Cleanup, nodeArgs: string[] = []): Promise<Target> {
  const port = await freePort()
  // No drain on SIGTERM: nothing balances in front of a benchmarked server.
  const proc = startNode([...nodeArgs, BIN, 'serve'], { ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_MS: '0' }, 'server')
  cleanup.defer(() => stop(proc))
  await waitHttp(`http://127.0.0.1:${port}/healthz`, proc)
  return { name, url: `http://127.0.0.1:${port}/v1/inventory`, headers: { authorization: `Bearer ${key}` }, proc }
}

/**
 * The bare server, serving the bytes the service answers now (fetched once). Returns it, the body size, the file
 * holding the body and the content type.
 */
export async function startCeiling (
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

/** bench/peer's own dependencies (bench/peer/package.json and its lock), installed once, on first use. */
let peerInstall: Promise<void> | null = null

export function installPeer (): Promise<void> {
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
export async function startPeer (dir: string, bodyFile: string, cleanup: Cleanup): Promise<Target> {
  await installPeer()
  const key = `peer_${randomBytes(24).toString('base64url')}`
  const keyHash = createHash('sha256').update(key).digest('hex')
  const proc = startNode([join(PEER_DIR, 'server.js'), join(dir, 'peer.db'), bodyFile, keyHash], {}, 'server')
  cleanup.defer(() => stop(proc))
  const port = await waitOutput(proc, /listening (\d+)/)
  return { name: 'peer', url: `http://127.0.0.1:${port}/v1/inventory`, headers: { authorization: `Bearer ${key}` }, proc }
}

export async function postgres (sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: settings.postgresUrl, connectionTimeoutMillis: 3000 })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.query(sql)
  } finally {
    await client.end().catch(() => {})
  }
}

/**
 * What instances of a scale-out scenario share: a scratch PostgreSQL database and a Redis key prefix, both removed at
 * cleanup (the keys only on the shared Redis, `settings.redisUrl`; a private Redis goes with its process), and the
 * environment of an instance on them.
 */
export async function scratchScaleOut (cleanup: Cleanup, redisUrl = settings.redisUrl): Promise<{ database: string, url: string, prefix: string, env: Record<string, string> }> {
  const database = `petstore_bench_${hex()}`
  const prefix = `petstore:bench:${hex()}:`
  if (redisUrl === settings.redisUrl) cleanup.defer(() => cleanRedis(prefix, redisUrl))
  await postgres(`CREATE DATABASE ${database}`)
  // FORCE: ends any session a killed instance may have left behind.
  cleanup.defer(() => postgres(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`))
  const url = new URL(settings.postgresUrl)
  url.pathname = `/${database}`
  return { database, url: url.toString(), prefix, env: { LOG_LEVEL: 'warn', DATABASE_URL: url.toString(), REDIS_URL: redisUrl, REDIS_KEY_PREFIX: prefix } }
}

export async function postgresReachable (): Promise<boolean> {
  try {
    await postgres('SELECT 1')
    return true
  } catch {
    return false
  }
}

/** Marks a scenario skipped, saying what is missing, when PostgreSQL or Redis cannot be reached; true then. */
export async function skippedWithoutServers (result: ScenarioResult): Promise<boolean> {
  const missing = [
    ...(await postgresReachable() ? [] : [`PostgreSQL not reachable at ${settings.postgresUrl} (BENCH_POSTGRES_URL)`]),
    ...(await redisReachable(settings.redisUrl) ? [] : [`Redis not reachable at ${settings.redisUrl} (BENCH_REDIS_URL)`])
  ]
  if (missing.length === 0) return false
  result.status = 'skipped'
  result.notes.push(...missing)
  return true
}

/**
 * A redis-server of the scenario's own (same binary as the shared one, no persistence, files in `dir`), so that
 * INFO commandstats and INFO cpu count only what the scenario sends; null when redis-server is not installed (the
 * scenario then uses BENCH_REDIS_URL, where other clients' commands count too). Stopped by `cleanup`.
 */
export async function privateRedis (dir: string, cleanup: Cleanup): Promise<string | null> {
  if (!hasCommand('redis-server')) return null
  const port = await freePort()
  const proc = startCommand(['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {})
  cleanup.defer(() => stop(proc))
  const url = `redis://127.0.0.1:${port}`
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if (!proc.running()) throw new Error(`redis-server exited: ${describeExit(proc)}`)
    if (await redisReachable(url)) return url
    await sleep(100)
  }
  throw new Error(`redis-server did not answer on port ${port} within 10 s`)
}

/**
 * A Redis Cluster of `nodes` primaries without replicas, of the scenario's own (as docs/scaling.md's local Cluster, on
 * free ports, files in `dir`), once every node says cluster_state:ok; its seed URLs, or why it was not started.
 * Stopped by `cleanup`.
 */
export async function privateCluster (dir: string, cleanup: Cleanup, nodes = 3): Promise<string[] | string> {
  if (!hasCommand('redis-server') || !hasCommand('redis-cli')) return 'redis-server or redis-cli is not installed'
  const ports: number[] = []
  for (let i = 0; i < nodes; i++) {
    const port = await freePort()
    const bus = await freePort()
    const nodeDir = join(dir, `cluster-${port}`)
    mkdirSync(nodeDir)
    const proc = startCommand(['redis-server', '--port', String(port), '--cluster-port', String(bus), '--bind', '127.0.0.1',
      '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--save', '', '--appendonly', 'no', '--dir', nodeDir], {})
    cleanup.defer(() => stop(proc))
    ports.push(port)
  }
  const urls = ports.map((port) => `redis://127.0.0.1:${port}`)
  for (const url of urls) {
    const deadline = Date.now() + 10_000
    while (!await redisReachable(url)) {
      if (Date.now() > deadline) throw new Error(`${url} did not answer within 10 s`)
      await sleep(100)
    }
  }
  await runCommand(['redis-cli', '--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'], {}, undefined, 60_000)
  for (const url of urls) {
    const client = new Redis(url, { maxRetriesPerRequest: 1 })
    client.on('error', () => {})
    try {
      const deadline = Date.now() + 20_000
      while (!/cluster_state:ok/.test(String(await client.call('CLUSTER', 'INFO')))) {
        if (Date.now() > deadline) throw new Error(`${url} did not reach cluster_state:ok within 20 s`)
        await sleep(200)
      }
    } finally {
      client.disconnect()
    }
  }
  return urls
}
