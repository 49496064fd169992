/**
 * The process entry of `petstore serve`: config -> store (migrated) -> app -> listen, and a graceful stop on
 * SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the store). A second signal exits at once.
 */
import type { FastifyInstance } from 'fastify'
import cluster from 'node:cluster'
import type { Logger } from 'pino'
import { buildApp } from './app.js'
import type { Config } from './config.js'
import { ConfigError } from './errors.js'
import { Lifecycle } from './lifecycle.js'
import { createLogger } from './logger.js'
import { seedDemoIfEmpty } from './domain/demo.js'
import { processMetrics } from './metrics/cluster.js'
import { startMetricsServer, type MetricsServer } from './metrics/http.js'
import type { ChangeSignal } from './changes/types.js'
import { MemoryLimiter } from './ratelimit/memory.js'
import { ResilientLimiter } from './ratelimit/resilient.js'
import type { RateLimiter } from './ratelimit/types.js'
import { aheadError, requireUsable } from './store/migrations.js'
import { epochNotice, migrateStore, openStore } from './store/open.js'
import { readOnly } from './store/read-only.js'
import type { EpochConfirmation } from './store/schema/types.js'
import type { Store } from './store/store.js'
import { commitSpans } from './tracing/commits.js'
import { tracingOn } from './tracing/spans.js'

export interface ServeOptions {
  /** Import the shipped demo data set when the store has no pets yet. */
  seedDemo: boolean
  /** How the person who started it types a petstore command (`petstore`, `npx petstore`): the start line names one. */
  command: string
  /** Set to draining by the stop (closeOnSignals); a fresh one, never draining, when omitted. */
  lifecycle?: Lifecycle
}

/**
 * The limiter named by the configuration: Redis (shared by every instance; while Redis is away, an in-process
 * fallback or refusals, as RATE_LIMIT_ON_REDIS_DOWN says) or in-process. A Redis that answers but cannot be used
 * as configured stops the start (ConfigError, exit 2); one that cannot be reached is an outage and the service
 * starts. With Redis, also the change signal over the same client (its counter read in the limiter's calls). Returns a
 * close function for what it opened.
 */
async function openLimiter (config: Config, logger: Logger): Promise<{ limiter: RateLimiter, changes?: ChangeSignal, close: () => Promise<void> }> {
  const local = new MemoryLimiter({ maxSubjects: config.rateLimits.maxSubjects })
  if (config.redis === null) return { limiter: local, close: async () => {} }
  // Loaded only here: a process counting in-process never loads the Redis client.
  const { connectLimiterRedis, RedisSetupError } = await import('./redis/connect.js')
  const { redis, check } = await connectLimiterRedis(config.redis, config.redisKeyPrefix, { check: 'start' }).catch((error: unknown) => {
    throw error instanceof RedisSetupError ? new ConfigError(error.message) : error
  })
  if (!check.usable) {
    logger.warn({ redis: redis.where, reason: check.reason, onDown: config.redis.onDown },
      'Redis is not reachable at start: serving as during an outage until it is')
  }
  const limiter = new ResilientLimiter({ redis: redis.limiter, memory: local, logger, onDown: config.redis.onDown })
  // A failed announcement is an outage of the client they share, as a failed decision is.
  redis.changes.reportTo(limiter)
  logger.info({ mode: config.redis.mode, redis: redis.where, onDown: config.redis.onDown }, 'rate limits counted in Redis')
  return {
    limiter,
    changes: redis.changes,
    close: async () => {
      await limiter.close()
      redis.close()
    }
  }
}

/**
 * The start check of the configured Redis on a connection of its own, closed again (the primary of --workers,
 * which serves nothing itself): a ConfigError when Redis cannot be used as configured, a warning when it cannot be
 * reached.
 */
export async function checkLimiter (config: Config, logger: Logger): Promise<void> {
  const { close } = await openLimiter(config, logger)
  await close()
}

/**
 * Readies the store for serving, the rule of `serve` (docs/adr/0004-migrations-append-only-and-rolling-upgrades.md):
 * a store without a schema
 * is initialized; the embedded SQLite file is migrated at start (after a backup copy) so that `npm start` stays
 * one command, as the server owns that file; a PostgreSQL store shared by instances is never migrated here (it
 * must be at this release's version: SchemaError says to run `petstore migrate`); a store ahead of this release
 * is served read-only.
 */
export async function prepareStore (store: Store, config: Config, log: Logger): Promise<'read-write' | 'read-only'> {
  const status = await store.schema.schemaStatus()
  if (status.objectsUnchecked !== undefined) {
    log.info({ reason: status.objectsUnchecked }, 'the store schema\'s objects were not compared with what the migrations make here; petstore migrate, run by the schema\'s owner, compares them')
  }
  if (status.ahead.length > 0) {
    log.warn({ schemaVersion: status.version, releaseVersion: status.latest }, `${aheadError(status).message} Serving reads only.`)
    return 'read-only'
  }
  if (status.pending.length === 0) {
    confirmed(await store.schema.confirmEpoch(), log)
    return 'read-write'
  }
  if (status.version > 0 && store.kind !== 'sqlite') requireUsable(status, 'write')
  const { applied, from, to, backup, epoch } = await migrateStore(store, config.databaseUrl)
  log.info({ applied, from, to, backup }, backup === null ? 'store schema created' : `store migrated from version ${from} to ${to}; the file before it is at ${backup}`)
  confirmed(epoch, log)
  return 'read-write'
}

/** Logs what confirming the store's epoch found (a new epoch, a part of the database's identity it cannot read). */
function confirmed (confirmation: EpochConfirmation, log: Logger): void {
  const notice = epochNotice(confirmation)
  if (notice === null) return
  const fields = { epoch: confirmation.epoch.epoch, reason: confirmation.epoch.reason, after: String(confirmation.epoch.after.id) }
  if (confirmation.started) log.warn(fields, notice)
  else log.warn({ unreadable: confirmation.unreadable }, notice)
}

export async function startServer (config: Config, options: ServeOptions): Promise<FastifyInstance> {
  // One logger for the app and the limiter (which reports Redis outages).
  const log = createLogger(config)
  // A traced process traces the SQLite store's group commits too (src/tracing/commits.ts). A serving SQLite store
  // checkpoints on a thread of its own, never in a request's COMMIT (src/store/sqlite/checkpointer.ts).
  const store = await openStore(config, { ...(tracingOn() ? { commitObserver: commitSpans } : {}), backgroundCheckpoints: true, writerThread: true })
  let opened: Awaited<ReturnType<typeof openLimiter>>
  try {
    opened = await openLimiter(config, log)
  } catch (error) {
    await store.close()
    throw error
  }
  const { limiter, changes, close: closeLimiter } = opened
  // Early: a cluster worker must answer the primary's metric collection as soon as possible.
  const metrics = processMetrics()
  let metricsServer: MetricsServer | null = null
  const release = async (): Promise<void> => {
    await metricsServer?.close()
    await closeLimiter()
    await store.close()
  }
  let app: FastifyInstance | undefined
  try {
    const mode = await prepareStore(store, config, log)
    app = await buildApp(config, {
      store: mode === 'read-only' ? readOnly(store, await store.schema.schemaStatus()) : store,
      limiter,
      ...(changes === undefined ? {} : { changes }),
      logger: log,
      metrics,
      lifecycle: options.lifecycle ?? new Lifecycle(),
      // After the app's own hooks: the webhook dispatcher records the outcomes of attempts in flight, and the streams
      // close their registrations, before the store closes.
      release
    })
    // METRICS_PORT: a server of its own, opened before the main port so that a port clash fails the start.
    // In a cluster the primary serves it (src/metrics/cluster.ts).
    if (config.metrics.port !== null && !cluster.isWorker) {
      metricsServer = await startMetricsServer(metrics, { host: config.host, port: config.metrics.port, token: config.metrics.token, log })
      log.info({ address: metricsServer.address.address, port: metricsServer.address.port }, 'metrics listening')
    }
    const openedMetrics = metricsServer
    app.log.info({ store: store.kind, limiter: limiter.kind }, 'backends ready')
    if (options.seedDemo && mode === 'read-write' && await seedDemoIfEmpty(store)) app.log.info('store was empty: imported the demo data set')
    const metricsPort = openedMetrics?.address.port ?? null
    await app.listen({
      port: config.port,
      host: config.host,
      // In a cluster the primary says where to find things, once (src/cluster.ts).
      listenTextResolver: (address) => cluster.isWorker ? `worker ${process.pid} listening at ${address}` : startLine(config, address, metricsPort, options.command)
    })
    return app
  } catch (error) {
    // A port clash after the app was built: its close stops what it started (the webhook dispatcher) and then releases.
    if (app === undefined) await release()
    else await app.close().catch((closeError: unknown) => { log.warn({ err: closeError }, 'error while closing after a failed start') })
    throw error
  }
}

/**
 * The line that tells, at start, where the API, its reference page and the metrics are and how to get a key.
 * `address` is the URL the server listens at (the real port when PORT=0); `metricsPort` the METRICS_PORT
 * server's real port, or null when /metrics is on the main port; `command` how the person who started it types a
 * petstore command.
 *
 * In a container (PETSTORE_CONTAINER, set by the image) the addresses it listens at are the container's own: a
 * person reaches them where the port is published, which the process cannot know, so the line names the paths
 * and the port; and the CLI runs inside the container, which the line says with the three usual ways in.
 */
export function startLine (config: Config, address: string, metricsPort: number | null, command: string): string {
  const url = new URL(address)
  const token = config.metrics.token === null ? '' : ' (bearer METRICS_TOKEN)'
  const createKey = `${command} keys create --plan free --name me`
  if (config.container) {
    const metrics = metricsPort === null ? '/metrics' : `/metrics on port ${metricsPort}`
    // URL drops a scheme's default port: http://0.0.0.0:80 has port ''.
    const port = url.port === '' ? '80' : url.port
    return `Petstore Inventory Service: API /v1, reference /docs, metrics ${metrics}${token}, on port ${port} of this container ` +
      `(open them where that port is published). Create a key in the container with: ${createKey} ` +
      '(docker exec CONTAINER ..., docker compose exec SERVICE ..., kubectl exec POD -- ...)'
  }
  // An unspecified bind address is reachable on this machine as localhost.
  if (url.hostname === '0.0.0.0' || url.hostname === '[::]') url.hostname = 'localhost'
  const base = url.origin
  const metrics = metricsPort === null ? `${base}/metrics` : `${url.protocol}//${url.hostname}:${metricsPort}/metrics`
  return `Petstore Inventory Service: API ${base}/v1, reference ${base}/docs, metrics ${metrics}${token}. Create a key with: ${createKey}`
}

/**
 * The IPC messages a cluster primary sends its workers to stop them: after a drain (the primary got SIGTERM) or at
 * once (SIGINT).
 */
export const SHUTDOWN_MESSAGE = 'petstore:shutdown'
export const SHUTDOWN_NOW_MESSAGE = 'petstore:shutdown-now'

export interface StopTimes {
  /** How long a SIGTERM's drain lasts before the listener closes (SHUTDOWN_DRAIN_MS). */
  drainMs: number
  /** How long in-flight requests may take once the listener has closed (SHUTDOWN_TIMEOUT_MS). */
  deadlineMs: number
}

/**
 * Resolves when the server has closed after SIGTERM or SIGINT (or the primary's message, in a cluster worker).
 *
 * SIGTERM, what orchestrators send, drains first: `lifecycle` turns /readyz to 503 at once and requests are served,
 * each answer closing its connection, for `drainMs`, the time a balancer needs to notice; then the listener closes
 * and in-flight requests get `deadlineMs` to finish. SIGINT, a terminal's Ctrl+C, closes at once. A second signal
 * exits at once; the primary's message never counts as one, since a terminal's Ctrl+C reaches the workers and the
 * primary alike.
 */
export function closeOnSignals (app: FastifyInstance, lifecycle: Lifecycle, { drainMs, deadlineMs }: StopTimes): Promise<void> {
  return new Promise((resolve) => {
    let stopping = false
    const close = (): void => {
      const timer = setTimeout(() => {
        app.log.error('in-flight requests did not finish in time: exiting')
        process.exit(1)
      }, deadlineMs)
      timer.unref()
      app.close().then(() => { clearTimeout(timer); resolve() }, (error: unknown) => {
        app.log.error({ err: error }, 'error while closing')
        process.exitCode = 1
        resolve()
      })
    }
    const stop = (reason: string, isSignal: boolean, drain: boolean): void => {
      if (stopping) {
        if (!isSignal) return
        app.log.warn({ signal: reason }, 'second signal: exiting now')
        process.exit(1)
      }
      stopping = true
      lifecycle.drain()
      if (!drain || drainMs === 0) {
        app.log.info({ reason }, 'shutting down')
        close()
        return
      }
      app.log.info({ reason, drainMs }, 'draining: /readyz answers 503, requests are served until the listener closes')
      // Not unref'd: the drain is what keeps the process here while connections come and go.
      setTimeout(() => {
        app.log.info({ reason }, 'drained: closing the listener')
        close()
      }, drainMs)
    }
    process.on('SIGTERM', () => stop('SIGTERM', true, true))
    process.on('SIGINT', () => stop('SIGINT', true, false))
    process.on('message', (message) => {
      if (message === SHUTDOWN_MESSAGE) stop('primary', false, true)
      else if (message === SHUTDOWN_NOW_MESSAGE) stop('primary', false, false)
    })
  })
}
