/**
 * Metrics under `serve --workers N`. Each worker counts in its own registry; prom-client's AggregatorRegistry
 * lets the primary collect every worker's registry over IPC and add them up (counters and histograms summed,
 * process metrics by their own rule). A scrape therefore always sees the whole cluster:
 * - with METRICS_PORT, the primary serves the aggregate there (the workers open no metrics port);
 * - without it, whichever worker receives GET /metrics on the main port asks the primary for the aggregate.
 */
import cluster from 'node:cluster'
import { AggregatorRegistry } from 'prom-client'
import type { Config } from '../config.js'
import { startMetricsServer, type MetricsServer } from './http.js'
import { Metrics } from './index.js'

const REQUEST = 'petstore:metrics:request'
const RESPONSE = 'petstore:metrics:response'

/** A worker waits this long for the primary (which itself gives the workers 5 s: prom-client's timeout). */
const ASK_TIMEOUT_MS = 6000

interface Request { type: typeof REQUEST, id: number }
interface Response { type: typeof RESPONSE, id: number, text?: string, error?: string }

const isRequest = (message: unknown): message is Request =>
  typeof message === 'object' && message !== null && (message as Request).type === REQUEST
const isResponse = (message: unknown): message is Response =>
  typeof message === 'object' && message !== null && (message as Response).type === RESPONSE

/**
 * The Metrics of this process: with the process metrics, and in a cluster worker also answering the primary's
 * collection requests and asking the primary for the aggregate when scraped.
 */
export function processMetrics (): Metrics {
  if (!cluster.isWorker) return new Metrics({ processMetrics: true })
  const pending = new Map<number, { resolve: (text: string) => void, reject: (error: Error) => void, timer: NodeJS.Timeout }>()
  let nextId = 0
  process.on('message', (message: unknown) => {
    if (!isResponse(message)) return
    const waiting = pending.get(message.id)
    if (waiting === undefined) return
    pending.delete(message.id)
    clearTimeout(waiting.timer)
    if (message.text === undefined) waiting.reject(new Error(`the primary could not aggregate the metrics: ${message.error ?? 'unknown error'}`))
    else waiting.resolve(message.text)
  })
  const askPrimary = (): Promise<string> => new Promise((resolve, reject) => {
    const id = nextId++
    const timer = setTimeout(() => {
      pending.delete(id)
      reject(new Error('the primary did not answer with the metrics in time'))
    }, ASK_TIMEOUT_MS)
    pending.set(id, { resolve, reject, timer })
    const fail = (error: Error): void => {
      if (!pending.delete(id)) return
      clearTimeout(timer)
      reject(error)
    }
    // During shutdown the channel may be gone: the scrape fails at once instead of waiting for the timeout.
    if (!process.connected || process.send === undefined) return fail(new Error('not connected to the cluster primary'))
    process.send({ type: REQUEST, id } satisfies Request, (error: Error | null) => { if (error !== null) fail(error) })
  })
  const metrics = new Metrics({ processMetrics: true, exposition: askPrimary })
  // Which registry this worker reports when the primary collects; the constructor installs the IPC listener.
  AggregatorRegistry.setRegistries([metrics.registry])
  void new AggregatorRegistry()
  return metrics
}

/**
 * In the primary: answers the workers' requests for the aggregate, and serves it on METRICS_PORT when set.
 * Returns the metrics server's real port (null without METRICS_PORT) and a close function (a no-op without it).
 */
export async function servePrimaryMetrics (
  config: Config, log: { info: (obj: object, msg: string) => void, warn: (obj: object, msg: string) => void }
): Promise<{ port: number | null, close: () => Promise<void> }> {
  const aggregator = new AggregatorRegistry()
  const collect = (): Promise<string> => aggregator.clusterMetrics()
  cluster.on('message', (worker, message: unknown) => {
    if (!isRequest(message)) return
    collect().then(
      (text) => { if (worker.isConnected()) worker.send({ type: RESPONSE, id: message.id, text } satisfies Response) },
      (error: unknown) => { if (worker.isConnected()) worker.send({ type: RESPONSE, id: message.id, error: (error as Error).message } satisfies Response) }
    )
  })
  if (config.metrics.port === null) return { port: null, close: async () => {} }
  const server: MetricsServer = await startMetricsServer(
    { exposition: collect, contentType: aggregator.contentType },
    { host: config.host, port: config.metrics.port, token: config.metrics.token, log }
  )
  log.info({ address: server.address.address, port: server.address.port, workers: 'aggregated' }, 'metrics listening')
  return { port: server.address.port, close: server.close }
}
