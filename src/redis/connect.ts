/**
 * Reaching the deployment's shared Redis in the configured topology (standalone, Cluster, Sentinel), with what is
 * kept there over one client: the rate limiter (src/ratelimit) and the change signal (src/changes); and the start
 * check that tells a Redis that cannot be used as configured (a misconfiguration: the start stops) from one that
 * is away (an outage: the service starts and the run-time policy applies).
 */
import { once } from 'node:events'
import { setTimeout as sleep } from 'node:timers/promises'
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis'
import { RedisChangeSignal } from '../changes/redis.js'
import type { RedisConfig } from '../config.js'
import { createRedisClient, RedisLimiter, scriptSha, type RedisClient } from '../ratelimit/redis.js'

/** A Redis that answers but cannot serve the limiter as configured; `message` says why and what to change. */
export class RedisSetupError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'RedisSetupError'
  }
}

/**
 * Request-path settings of every topology: fail fast instead of queueing (no offline queue, one retry, the
 * configured time per command), keep reconnecting in the background at most a second apart (see createRedisClient).
 */
function nodeOptions (config: RedisConfig): RedisOptions {
  return { maxRetriesPerRequest: 1, commandTimeout: config.commandTimeoutMs, connectTimeout: 1000 }
}

/** The client for a configuration. Connection errors are swallowed here; the resilient limiter reports outages. */
export function openRedis (config: RedisConfig): RedisClient {
  switch (config.mode) {
    case 'standalone':
      return createRedisClient(config.url, config.commandTimeoutMs)
    case 'cluster': {
      const [first] = config.seeds.map((seed) => new URL(seed))
      const options: ClusterOptions = {
        enableOfflineQueue: false,
        // Both commands of a decision (the script, the change counter copy) leave in one write per node.
        enableAutoPipelining: true,
        // Keep trying to reach the cluster at most a second apart; a decision never waits for it (no offline queue).
        clusterRetryStrategy: (times: number) => Math.min(times * 100, 1000),
        // A restarted node is reconnected to without waiting for a MOVED to refresh the topology.
        clusterNodeRetryStrategy: (times: number) => Math.min(times * 100, 1000),
        retryDelayOnClusterDown: 100,
        // A command for a node that is away is retried a few times (a failover moves its slots within a moment),
        // not the default 16, which kept a request waiting 1.7 s before it fell back.
        retryDelayOnFailover: 100,
        maxRedirections: 3,
        slotsRefreshTimeout: 1000,
        slotsRefreshInterval: 2000,
        redisOptions: {
          ...nodeOptions(config),
          // Credentials and TLS of the first seed apply to every node the cluster names.
          ...(first?.username === undefined || first.username === '' ? {} : { username: decodeURIComponent(first.username) }),
          ...(first?.password === undefined || first.password === '' ? {} : { password: decodeURIComponent(first.password) }),
          ...(first?.protocol === 'rediss:' ? { tls: {} } : {})
        }
      }
      const cluster = new Cluster(config.seeds.map((seed) => {
        const url = new URL(seed)
        return { host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port === '' ? 6379 : Number(url.port) }
      }), options)
      cluster.on('error', () => {})
      return cluster
    }
    case 'sentinel': {
      const client = new Redis({
        ...nodeOptions(config),
        sentinels: config.sentinels.map(({ host, port }) => ({ host, port })),
        name: config.name,
        role: 'master',
        ...(config.username === null ? {} : { username: config.username }),
        ...(config.password === null ? {} : { password: config.password }),
        enableOfflineQueue: false,
        // Sentinels announce a failover (+switch-master): reconnect to the new primary at once.
        failoverDetector: true,
        retryStrategy: (times: number) => Math.min(times * 100, 1000),
        sentinelRetryStrategy: (times: number) => Math.min(times * 100, 1000)
      })
      client.on('error', () => {})
      reconnectAfterEnd(client)
      return client
    }
  }
}

/** How long a Sentinel client that ended without being closed waits before it connects again. */
const RECONNECT_AFTER_END_MS = 1000

/**
 * Keeps a Sentinel client connecting until it is closed. ioredis (6.0) ends a client for good when the failover
 * detector drops the connection while the client is asking the Sentinels where the primary is: on a +switch-master
 * that arrives during a reconnect, its connector stops, the pending connect fails with "Connection is closed." and the
 * client's status becomes `end`, which no retry strategy undoes. Seen under CPU load in the failover test
 * (test/ratelimit/topologies.test.ts): the limiter refused every request until the process restarted. A client that
 * ends without disconnect() or quit() having been called connects again a second later; one closed by its owner
 * stays closed.
 */
function reconnectAfterEnd (client: Redis): void {
  let closed = false
  const disconnect = client.disconnect.bind(client)
  const quit = client.quit.bind(client)
  client.disconnect = (reconnect = false) => {
    if (!reconnect) closed = true
    disconnect(reconnect)
  }
  client.quit = ((...args: Parameters<Redis['quit']>) => {
    closed = true
    return quit(...args)
  }) as Redis['quit']
  client.on('end', () => {
    if (closed) return
    setTimeout(() => {
      if (!closed && client.status === 'end') client.connect().catch(() => {})
    }, RECONNECT_AFTER_END_MS).unref()
  })
}

/**
 * Errors that mean "this Redis answers, but not as configured": a wrong password or user, missing command
 * permissions, a replica, a Cluster node addressed as one server (or the reverse), a cluster without all its
 * slots, scripts refused or not kept, a full memory with eviction off. Anything else (refused or timed out
 * connections, a closed connection) is an outage.
 */
const MISCONFIGURATION = /^(NOAUTH|WRONGPASS|NOPERM|READONLY|MOVED|ASK|CLUSTERDOWN|NOSCRIPT|OOM|ERR (unknown command|.*cluster support disabled|.*Lua|.*script|DB index|invalid password|AUTH|Client sent AUTH))/i

function errorText (error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  // The Cluster client wraps the last node's error in "Failed to refresh slots cache."
  const last = (error as Error & { lastNodeError?: unknown }).lastNodeError
  return last instanceof Error ? last.message : error.message
}

/** What the start check found: usable, or away for now (an outage, which the run-time policy handles). */
export type RedisCheck = { usable: true } | { usable: false, reason: string }

const HINTS: Array<[RegExp, string]> = [
  [/^(NOAUTH|WRONGPASS|ERR (invalid password|AUTH|Client sent AUTH))/i, 'the credentials are wrong or missing (user and password in REDIS_URL, or REDIS_USERNAME/REDIS_PASSWORD with Sentinel)'],
  [/^NOPERM/i, 'the Redis user lacks a permission the limiter needs (EVAL, EVALSHA, TIME, GET, HMGET, HSET, EXPIRE, PEXPIRE, INCRBY, DEL on the key prefix; INFO and SCRIPT EXISTS for the start check)'],
  [/^READONLY/i, 'it is a read-only replica: point REDIS_URL at the primary, or use REDIS_MODE=sentinel'],
  [/^(MOVED|ASK)/i, 'it is a Redis Cluster node: set REDIS_MODE=cluster and list the nodes in REDIS_URL'],
  [/cluster support disabled/i, 'REDIS_MODE=cluster, but the server is not a Cluster node: set REDIS_MODE=standalone'],
  [/^CLUSTERDOWN/i, 'the cluster does not serve all its slots (are all nodes up and every slot assigned?)'],
  [/^(NOSCRIPT|ERR (unknown command|.*Lua|.*script))/i, 'it does not run or keep Lua scripts (a proxy in front of Redis?); the limiter needs EVALSHA'],
  [/^OOM/i, 'it is out of memory and refuses writes (maxmemory with noeviction)'],
  [/^ERR DB index/i, 'the database number in REDIS_URL does not exist']
]

function misconfigured (where: string, text: string): RedisSetupError {
  const hint = HINTS.find(([pattern]) => pattern.test(text))?.[1] ?? 'it refuses the limiter\'s commands'
  return new RedisSetupError(`Redis at ${where} cannot serve the rate limiter: ${hint} (Redis said: ${text.split('\n')[0]})`)
}

/** Where the configuration points, for messages (no credentials). */
export function redisTarget (config: RedisConfig): string {
  // Up to the last '@': a password may hold a raw '@' (ioredis accepts it).
  const hide = (url: string): string => url.replace(/\/\/.*@/, '//')
  switch (config.mode) {
    case 'standalone': return hide(config.url)
    case 'cluster': return `the cluster of ${config.seeds.map(hide).join(', ')}`
    case 'sentinel': return `the primary "${config.name}" of Sentinels ${config.sentinels.map(({ host, port }) => `${host}:${port}`).join(', ')}`
  }
}

/** Resolves when the client is ready; rejects with its first error; resolves false when `ms` pass first. */
export async function whenReady (client: RedisClient, ms: number): Promise<boolean> {
  if (client.status === 'ready') return true
  const controller = new AbortController()
  try {
    return await Promise.race([
      once(client, 'ready', { signal: controller.signal }).then(() => true),
      once(client, 'error', { signal: controller.signal }).then(([error]: unknown[]) => { throw error }),
      sleep(ms, false, { signal: controller.signal })
    ])
  } finally {
    controller.abort()
  }
}

function field (info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim()
}

/** The limiter and the change signal over one client under one key prefix. */
export interface SharedRedis {
  readonly limiter: RedisLimiter
  readonly changes: RedisChangeSignal
}

/**
 * The limiter and the change signal over `client` under `prefix`, as an instance uses them: the signal's counter is
 * read in the limiter's calls (its piggyback), so each decision tells the signal's watch what it read.
 */
export function sharedRedis (client: RedisClient, prefix: string, options: { changeCopy?: number, timeOffsetSeconds?: () => number } = {}): SharedRedis {
  const changes = new RedisChangeSignal({ client, prefix, ...(options.changeCopy === undefined ? {} : { changeCopy: options.changeCopy }) })
  const limiter = new RedisLimiter({ client, prefix, piggyback: changes.piggyback, ...(options.timeOffsetSeconds === undefined ? {} : { timeOffsetSeconds: options.timeOffsetSeconds }) })
  return { limiter, changes }
}

/**
 * The start check: connects, asks the server what it is, and makes probe decisions through `shared.limiter`, retrying
 * what fails like an outage (refused connections, timeouts) for up to `waitMs`. Throws RedisSetupError when
 * Redis answers but cannot be used as configured; returns `usable: false` with the reason when it cannot be
 * reached in that time (an outage, not a configuration error).
 */
export async function checkRedis (config: RedisConfig, client: RedisClient, shared: SharedRedis, waitMs = 5000): Promise<RedisCheck> {
  const where = redisTarget(config)
  const deadline = Date.now() + waitMs
  let reason = `no connection within ${waitMs} ms`
  for (;;) {
    try {
      if (config.mode === 'sentinel') await askSentinels(config, where)
      if (!await whenReady(client, Math.max(0, deadline - Date.now()))) return { usable: false, reason }
      await inspect(where, client, shared)
      return { usable: true }
    } catch (error) {
      if (error instanceof RedisSetupError) throw error
      const text = errorText(error)
      if (MISCONFIGURATION.test(text)) throw misconfigured(where, text)
      reason = text
    }
    if (Date.now() >= deadline) return { usable: false, reason }
    await sleep(200)
  }
}

/** The configured Redis, opened for the shared limiter and the change signal. */
export interface LimiterRedis extends SharedRedis {
  readonly client: RedisClient
  /** The limiter over the client, under the configured key prefix: the keys every instance counts in. */
  readonly limiter: RedisLimiter
  /** The change signal over the client, under the same prefix; its counter is read in the limiter's calls. */
  readonly changes: RedisChangeSignal
  /** Where the configuration points, for messages (no credentials). */
  readonly where: string
  /** Drops the connection at once. */
  close: () => void
}

/**
 * How connectLimiterRedis checks what it opened:
 * - `start`: the start check of a server (checkRedis): probe decisions, a change announced; RedisSetupError when
 *   Redis answers but cannot be used as configured, `usable: false` when it cannot be reached within `waitMs`.
 * - `ready`: only that the connection is ready within `waitMs`, for a command that reads (nothing is written, nothing
 *   is thrown): `usable: false` with the connection's first error, or the time waited.
 */
export type RedisCheckMode = { check: 'start', waitMs?: number } | { check: 'ready', waitMs: number }

/**
 * Opens the configured Redis with the limiter over it under `prefix`, and checks it as `mode` says: the one way the
 * server and the CLI reach the shared limiter. Returns the connection and what the check found; when the check
 * throws, the connection is closed first.
 */
export async function connectLimiterRedis (config: RedisConfig, prefix: string, mode: RedisCheckMode): Promise<{ redis: LimiterRedis, check: RedisCheck }> {
  const client = openRedis(config)
  const redis: LimiterRedis = {
    client,
    ...sharedRedis(client, prefix),
    where: redisTarget(config),
    close: () => { client.disconnect() }
  }
  try {
    return { redis, check: mode.check === 'start' ? await checkRedis(config, client, redis, mode.waitMs) : await ready(client, mode.waitMs) }
  } catch (error) {
    redis.close()
    throw error
  }
}

/** Whether the client is ready within `ms`: the reason is its first error, or the time waited. */
async function ready (client: RedisClient, ms: number): Promise<RedisCheck> {
  try {
    return await whenReady(client, ms) ? { usable: true } : { usable: false, reason: `no answer within ${ms / 1000} s` }
  } catch (error) {
    return { usable: false, reason: (error as Error).message }
  }
}

/**
 * Sentinel: each Sentinel that answers must be one and must know the primary's name. A typo in
 * REDIS_SENTINEL_NAME, or a data node listed as a Sentinel, would otherwise look like an outage forever.
 * Throws the first error when no Sentinel answers (an outage).
 */
async function askSentinels (config: RedisConfig & { mode: 'sentinel' }, where: string): Promise<void> {
  let unreachable: unknown = null
  for (const { host, port } of config.sentinels) {
    const sentinel = new Redis({ host, port, lazyConnect: true, connectTimeout: 1000, commandTimeout: 1000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableReadyCheck: false })
    sentinel.on('error', () => {})
    try {
      await sentinel.connect()
      let primary: unknown
      try {
        primary = await sentinel.call('SENTINEL', 'get-master-addr-by-name', config.name)
      } catch (error) {
        const text = errorText(error)
        if (/unknown command|unknown subcommand|ERR.*sentinel/i.test(text)) throw new RedisSetupError(`Redis at ${where} cannot serve the rate limiter: ${host}:${port} is not a Sentinel (REDIS_SENTINELS lists the Sentinels, not the data nodes) (Redis said: ${text.split('\n')[0]})`)
        throw error
      }
      if (primary === null) throw new RedisSetupError(`Redis at ${where} cannot serve the rate limiter: the Sentinel at ${host}:${port} monitors no primary named "${config.name}" (check REDIS_SENTINEL_NAME)`)
      return
    } catch (error) {
      if (error instanceof RedisSetupError) throw error
      unreachable = error
    } finally {
      sentinel.disconnect()
    }
  }
  throw unreachable
}

/** One pass of the check on a ready client; throws what it finds. */
async function inspect (where: string, client: RedisClient, { limiter, changes }: SharedRedis): Promise<void> {
  if (client instanceof Cluster) {
    const info = await client.cluster('INFO')
    if (field(info, 'cluster_state') !== 'ok') throw misconfigured(where, `CLUSTERDOWN cluster_state:${field(info, 'cluster_state') ?? 'unknown'}`)
  } else {
    const info = await client.info()
    if (field(info, 'cluster_enabled') === '1') throw misconfigured(where, 'MOVED (INFO says cluster_enabled:1)')
    if (field(info, 'role') !== 'master') throw misconfigured(where, `READONLY (INFO says role:${field(info, 'role') ?? 'unknown'})`)
  }
  // Twice: a connection's first call sends the script (EVAL), the next ones its digest (EVALSHA), as requests do.
  await limiter.probe()
  await limiter.probe()
  // What a write does (the change counter, every copy on a Cluster): the other instances then check the store once.
  await changes.count()
  if (!(client instanceof Cluster)) {
    // A proxy that forwards EVAL but keeps no scripts answers every EVALSHA with NOSCRIPT: a round trip more per
    // request, and the whole script each time.
    const [kept] = await client.script('EXISTS', scriptSha('reading')) as number[]
    if (kept !== 1) throw misconfigured(where, 'NOSCRIPT (the consume script is not kept after it ran)')
  }
}
