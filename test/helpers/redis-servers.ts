/**
 * Private Redis servers for the tests of the Redis topologies: a Redis Cluster of three primaries, a primary with
 * a replica watched by a Sentinel, and single servers with a setting of their own (a password, a replica). Each
 * runs from `redis-server` on free ports in a temporary directory and is stopped and removed after the test (or
 * the suite) that started it. Without `redis-server`, CI fails (services.ts's rule) and elsewhere the tests skip.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before } from 'node:test'
import { Cluster, Redis } from 'ioredis'
import { freePort } from './net.js'
import { requireService } from './services.js'

/** Something to run after a test or suite (node:test's t.after or after). */
type After = (fn: () => unknown) => void

export function hasRedisServer (): boolean {
  return spawnSync('sh', ['-c', 'command -v redis-server && command -v redis-cli']).status === 0
}

/** See requireService: these tests fail in CI without redis-server and redis-cli, and are skipped elsewhere. */
export function requireRedisServer (what: string): Promise<boolean> {
  return requireService('redis-server', 'redis-server://local', async () => hasRedisServer(), what, 'PATH')
}

export interface RedisServer {
  port: number
  url: string
  /** Kills the process at once (SIGKILL): what a crash looks like to its clients. */
  kill: () => Promise<void>
  /** Starts it again on the same port and directory (a Cluster node keeps its identity from nodes.conf). */
  restart: () => Promise<void>
}

/** Runs `work` on a short-lived connection to the server on `port`, closed afterwards. */
async function withClient<T> (port: number, work: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    await client.connect()
    return await work(client)
  } finally {
    client.disconnect()
  }
}

async function answers (port: number, password?: string): Promise<boolean> {
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null, ...(password === undefined ? {} : { password }) })
  client.on('error', () => {})
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch (error) {
    // A server that wants a password is up.
    return error instanceof Error && /NOAUTH|WRONGPASS/.test(error.message)
  } finally {
    client.disconnect()
  }
}

/** A server that ended before it answered: on its first start, most likely its port was taken meanwhile. */
class ServerEnded extends Error {}

async function until (what: string, check: () => Promise<boolean>, ms = 15_000, ended: () => boolean = () => false): Promise<void> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (ended()) throw new ServerEnded(`${what} ended before it answered`)
    if (await check().catch(() => false)) return
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

/**
 * One redis-server on a free port with `args` (redis-server command-line settings, e.g. ['--requirepass', 'x']);
 * `sentinel`: run as a Sentinel from a config file holding `config`.
 */
export async function startRedisServer (after: After, args: string[] = [], options: { sentinelConfig?: string } = {}): Promise<RedisServer> {
  let port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'petstore-redis-'))
  let child: ChildProcess | null = null
  const start = async (): Promise<void> => {
    let command: string[]
    if (options.sentinelConfig === undefined) {
      command = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--logfile', join(dir, 'log'), ...args]
    } else {
      const file = join(dir, 'sentinel.conf')
      writeFileSync(file, `port ${port}\nbind 127.0.0.1\ndir ${dir}\nlogfile ${join(dir, 'log')}\n${options.sentinelConfig}\n`)
      command = [file, '--sentinel']
    }
    const spawned = spawn('redis-server', command, { stdio: 'ignore' })
    child = spawned
    spawned.on('error', () => {})
    const password = args[args.indexOf('--requirepass') + 1]
    await until(`redis-server on port ${port}`, () => answers(port, args.includes('--requirepass') ? password : undefined), 15_000,
      () => spawned.exitCode !== null || spawned.signalCode !== null)
  }
  const kill = async (): Promise<void> => {
    const running = child
    child = null
    if (running === null || running.exitCode !== null || running.signalCode !== null) return
    const exited = once(running, 'exit')
    running.kill('SIGKILL')
    await exited
  }
  after(async () => {
    await kill()
    rmSync(dir, { recursive: true, force: true })
  })
  // A port taken between freePort() and the bind (an outgoing connection's, on a busy machine) is the one failure worth
  // another try, on another port; a restart keeps the port its clients know.
  for (let attempt = 1; ; attempt++) {
    try {
      await start()
      break
    } catch (error) {
      if (!(error instanceof ServerEnded) || attempt === 3) throw error
      port = await freePort()
    }
  }
  return { port, url: `redis://127.0.0.1:${port}`, kill, restart: start }
}

export interface RedisClusterServers {
  nodes: RedisServer[]
  /** The nodes as REDIS_URL of REDIS_MODE=cluster: comma-separated seed URLs. */
  seeds: string
  /** Resolves when every node reports cluster_state:ok. */
  healthy: () => Promise<void>
}

async function clusterState (port: number): Promise<string> {
  return withClient(port, async (client) => /cluster_state:(\w+)/.exec(await client.cluster('INFO'))?.[1] ?? 'unknown')
}

/** A Redis Cluster of `size` primaries (no replicas), every slot assigned, ready. */
export async function startRedisCluster (after: After, size = 3): Promise<RedisClusterServers> {
  const nodes = await Promise.all(Array.from({ length: size }, () => startRedisServer(after, [
    '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'
  ])))
  const created = spawnSync('redis-cli', ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '0', '--cluster-yes'],
    { encoding: 'utf8', timeout: 30_000 })
  if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`)
  const healthy = (): Promise<void> => until('cluster_state:ok on every node', async () => {
    const states = await Promise.all(nodes.map((node) => clusterState(node.port)))
    return states.every((state) => state === 'ok')
  }, 30_000)
  await healthy()
  return { nodes, seeds: nodes.map((node) => node.url).join(','), healthy }
}

/**
 * A Redis Cluster of three primaries for the tests of one describe block: started before them and stopped after,
 * with `client()` opening a ready ioredis Cluster client to it (each disconnected after the block). Call it inside
 * the describe.
 */
export function clusterForSuite (): { client: () => Promise<Cluster> } {
  let servers: RedisClusterServers
  const clients: Cluster[] = []
  const stops: Array<() => unknown> = []
  before(async () => { servers = await startRedisCluster((stop) => stops.push(stop)) })
  after(async () => {
    for (const client of clients) client.disconnect()
    for (const stop of stops) await stop()
  })
  return {
    client: async () => {
      const client = new Cluster(servers.nodes.map((node) => ({ host: '127.0.0.1', port: node.port })), { redisOptions: { connectTimeout: 2000 } })
      client.on('error', () => {})
      clients.push(client)
      if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve))
      return client
    }
  }
}

export interface SentinelServers {
  primary: RedisServer
  replica: RedisServer
  sentinel: RedisServer
  /** The primary's name the Sentinel monitors. */
  name: string
  /** The port of the primary the Sentinel names now. */
  primaryPort: () => Promise<number>
}

/** A primary, a replica of it, and a Sentinel (quorum 1) that fails over within a few seconds of losing the primary. */
export async function startSentinel (after: After): Promise<SentinelServers> {
  const primary = await startRedisServer(after)
  const replica = await startRedisServer(after, ['--replicaof', '127.0.0.1', String(primary.port)])
  const name = 'petstore'
  const sentinel = await startRedisServer(after, [], {
    sentinelConfig: [
      `sentinel monitor ${name} 127.0.0.1 ${primary.port} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 5000`,
      `sentinel parallel-syncs ${name} 1`
    ].join('\n')
  })
  const primaryPort = (): Promise<number> => withClient(sentinel.port, async (client) => {
    const [, port] = await client.call('SENTINEL', 'get-master-addr-by-name', name) as [string, string]
    return Number(port)
  })
  // Ready when the replica has synced and the Sentinel has found it.
  await until('the replica in sync', () => withClient(replica.port, async (client) => /master_link_status:up/.test(await client.info('replication'))))
  await until('the Sentinel to know the replica', () => withClient(sentinel.port, async (client) => (await client.call('SENTINEL', 'replicas', name) as unknown[]).length > 0))
  return { primary, replica, sentinel, name, primaryPort }
}
