/**
 * `petstore serve --workers N`: one primary that migrates (and seeds) once, then N worker processes sharing
 * the port through node:cluster, each a whole instance. The primary replaces a worker that dies and, on
 * SIGTERM/SIGINT, asks every worker (over IPC) to stop gracefully and exits 0 when all have; a second signal
 * kills them.
 */
import cluster, { type Worker } from 'node:cluster'
import type { Config } from './config.js'
import { createLogger } from './logger.js'
import { seedDemoIfEmpty } from './domain/demo.js'
import { servePrimaryMetrics } from './metrics/cluster.js'
import { checkLimiter, prepareStore, SHUTDOWN_MESSAGE, SHUTDOWN_NOW_MESSAGE, startLine } from './server.js'
import { openStore } from './store/open.js'

/** Why more than one worker needs Redis: each process would count its own windows and multiply the limits. */
export const WORKERS_NEED_REDIS = '--workers above 1 needs REDIS_URL (or REDIS_SENTINELS with REDIS_MODE=sentinel): with in-process rate limiting every worker would count ' +
  'its own windows and a key would get N times its limits'

/** The exit code of a configuration error (the CLI's): a worker exiting with it is not replaced. */
const CONFIGURATION_EXIT = 2

// A worker that dies this soon after starting is not replaced at once again, to avoid a crash loop.
const RESTART_BACKOFF_MS = 1000

export async function runPrimary (config: Config, workers: number, options: { seedDemo: boolean, command: string }): Promise<number> {
  const log = createLogger(config)
  const store = await openStore(config)
  try {
    // Once, here; each worker then finds the store ready (or serves it read-only, as the primary would).
    const mode = await prepareStore(store, config, log)
    if (options.seedDemo && mode === 'read-write' && await seedDemoIfEmpty(store)) log.info('store was empty: imported the demo data set')
  } finally {
    await store.close()
  }
  // A Redis that cannot be used as configured stops the start here, once, rather than in every worker.
  await checkLimiter(config, log)

  // The workers' metrics, added up: on METRICS_PORT (served here) or relayed to the worker scraped on PORT.
  const primaryMetrics = await servePrimaryMetrics(config, log)

  let stopping = false
  const started = new Map<Worker, number>()
  // A worker handles the stop message only once it listens: one still starting gets it when it does (a message sent
  // before would be lost, and the worker would serve on after the primary's stop).
  const listening = new Set<Worker>()
  let stopMessage: string | null = null
  const fork = (): void => {
    if (!stopping) started.set(cluster.fork(), Date.now())
  }
  cluster.on('listening', (worker) => {
    if (listening.has(worker)) return
    listening.add(worker)
    if (stopMessage !== null) worker.send(stopMessage)
  })
  let refused: ((code: number) => void) | null = null
  cluster.on('exit', (worker, code, signal) => {
    const since = started.get(worker) ?? 0
    started.delete(worker)
    listening.delete(worker)
    if (stopping) return
    if (code === CONFIGURATION_EXIT) {
      // What it printed (a configuration error) would stop every replacement too: stop, with its code.
      log.error({ pid: worker.process.pid, code }, 'a worker could not start (configuration error): stopping')
      refused?.(CONFIGURATION_EXIT)
      return
    }
    log.error({ pid: worker.process.pid, code, signal }, 'worker died: starting a new one')
    setTimeout(fork, Math.max(0, RESTART_BACKOFF_MS - (Date.now() - since)))
  })
  // Where to find things, once: when the first worker listens (the port is the real one, also for PORT=0).
  cluster.once('listening', (_worker, address) => {
    const host = address.address === null || address.address === undefined ? config.host : address.address
    log.info(startLine(config, `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`, primaryMetrics.port, options.command))
  })
  for (let i = 0; i < workers; i++) fork()
  log.info({ workers, port: config.port }, 'primary started workers')

  const code = await new Promise<number>((resolve) => {
    refused = (exitCode) => {
      stopping = true
      for (const worker of started.keys()) worker.process.kill('SIGTERM')
      resolve(exitCode)
    }
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) {
        log.warn({ signal }, 'second signal: killing workers')
        for (const worker of started.keys()) worker.process.kill('SIGKILL')
        resolve(1)
        return
      }
      stopping = true
      log.info({ signal }, 'stopping workers')
      if (started.size === 0) resolve(0)
      // SIGTERM: each worker drains as a single instance would (closeOnSignals); SIGINT: at once.
      stopMessage = signal === 'SIGTERM' ? SHUTDOWN_MESSAGE : SHUTDOWN_NOW_MESSAGE
      for (const worker of listening) worker.send(stopMessage)
      cluster.on('exit', () => { if (started.size === 0) resolve(0) })
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
  })
  await primaryMetrics.close()
  return code
}

export const isWorker = (): boolean => cluster.isWorker

/** A worker that has closed its server lets go of the IPC channel, which would otherwise keep it alive. */
export function leaveCluster (): void {
  cluster.worker?.disconnect()
}
