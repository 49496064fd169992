/**
 * The service's Prometheus metrics: one prom-client Registry per app (never the global default registry, so
 * that tests can build many apps in one process). Every label takes its values from a bounded set — route
 * operations, HTTP methods and statuses, store method names, fixed words — and never a URL, a key id or an
 * IP address. docs/observability.md lists what is exported.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client'
import { ResilientLimiter } from '../ratelimit/resilient.js'
import type { RateLimiter } from '../ratelimit/types.js'
import type { Store } from '../store/store.js'
import type { WebhookReads } from '../store/webhooks/types.js'
import type { AttemptOutcomeKind } from '../domain/webhook-dispatch.js'
import { VERSION } from '../version.js'

const WEBHOOK_OUTCOMES: readonly AttemptOutcomeKind[] = ['delivered', 'retrying', 'failed']
import { watchHeapAfterGc } from './heap.js'
import { CounterFamily, HistogramFamily, type CounterChild, type HistogramChild } from './series.js'

/** Request latency buckets (seconds): most answers take well under a millisecond to a few milliseconds. */
const HTTP_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const
/** Store call buckets (seconds): an embedded SQLite read takes tens of microseconds. */
const STORE_BUCKETS = [0.00005, 0.0001, 0.00025, ...HTTP_BUCKETS] as const

export type RateLimitSubject = 'key' | 'ip'
export type RateLimitOutcome = 'allowed' | 'limited' | 'banned' | 'not_modified'
export type LimiterBackend = 'redis' | 'memory'

const SUBJECTS: readonly RateLimitSubject[] = ['key', 'ip']
const OUTCOMES: readonly RateLimitOutcome[] = ['allowed', 'limited', 'banned', 'not_modified']
const POOL_STATES = ['total', 'idle', 'waiting', 'max'] as const

// Methods outside this set (Node's parser knows a few dozen) share one label value.
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

export interface MetricsOptions {
  /**
   * prom-client's default process and Node.js metrics (standard names: process_*, nodejs_*). On for
   * `petstore serve`; off by default because each registry that has them keeps an event-loop sampler running.
   */
  processMetrics?: boolean
  /** Where a scrape's text comes from: this registry by default; a cluster worker asks its primary instead. */
  exposition?: () => Promise<string>
}

type DecisionSeries = Record<RateLimitSubject, Record<RateLimitOutcome, CounterChild>>

/** Where the webhook gauges read the backlog. */
type WebhookBacklogStore = { readonly webhooks: Pick<WebhookReads, 'webhookBacklog'> }

interface MethodSeries {
  duration: HistogramChild
  byStatus: Map<number, CounterChild>
}

/** The request series of one operation, bound once per route so that recording allocates nothing. */
export class OperationSeries {
  readonly #byMethod = new Map<string, MethodSeries>()
  readonly #requests: CounterFamily
  readonly #durations: HistogramFamily

  constructor (readonly operation: string, requests: CounterFamily, durations: HistogramFamily) {
    this.#requests = requests
    this.#durations = durations
  }

  record (method: string, status: number, seconds: number): void {
    let series = this.#byMethod.get(method)
    if (series === undefined) {
      const label = METHODS.has(method) ? method : 'other'
      series = { duration: this.#durations.child(this.operation, label), byStatus: new Map() }
      this.#byMethod.set(method, series)
    }
    let counter = series.byStatus.get(status)
    if (counter === undefined) {
      counter = this.#requests.child(this.operation, METHODS.has(method) ? method : 'other', String(status))
      series.byStatus.set(status, counter)
    }
    counter.inc()
    series.duration.observe(seconds)
  }
}

/** The series of one store method: call latency and failures. */
export interface StoreSeries {
  duration: HistogramChild
  errors: CounterChild
}

function limiterBackend (limiter: RateLimiter): LimiterBackend | 'none' {
  if (limiter instanceof ResilientLimiter) return limiter.backend === 'redis' ? 'redis' : limiter.backend === 'unavailable' ? 'none' : 'memory'
  return limiter.kind === 'redis' ? 'redis' : 'memory'
}

export class Metrics {
  readonly registry = new Registry()
  readonly #requests: CounterFamily
  readonly #durations: HistogramFamily
  readonly #storeDurations: HistogramFamily
  readonly #storeErrors: CounterFamily
  readonly #decisions: DecisionSeries
  readonly #bans: CounterChild
  readonly #operations = new Map<string, OperationSeries>()
  readonly #stores = new Map<string, StoreSeries>()
  readonly #exposition: () => Promise<string>
  #limiter: RateLimiter | null = null
  #store: Pick<Store, 'poolStats'> | null = null
  #streams: (() => number) | null = null
  readonly #webhookAttempts: Record<AttemptOutcomeKind, CounterChild>
  #webhookStore: { store: WebhookBacklogStore, clock: () => number } | null = null

  constructor (options: MetricsOptions = {}) {
    const registry = this.registry
    this.#exposition = options.exposition ?? (() => registry.metrics())
    this.#requests = new CounterFamily(registry, 'petstore_http_requests_total',
      'HTTP requests answered, by operation (the OpenAPI operationId, or a fixed name), method and status.',
      ['operation', 'method', 'status'])
    this.#durations = new HistogramFamily(registry, 'petstore_http_request_duration_seconds',
      'Time from receiving a request to finishing its answer, by operation and method.',
      ['operation', 'method'], HTTP_BUCKETS)

    const decisions = new CounterFamily(registry, 'petstore_ratelimit_decisions_total',
      'Rate-limit decisions on /v1 requests: subject key (a valid API key) or ip (no valid key); decision ' +
      'allowed, limited (429: over a limit), banned (429: the key is banned) or not_modified (304, not counted).',
      ['subject', 'decision'])
    // Every combination exists from the start, at 0, so that rate() works from the first scrape.
    const bySubject = (subject: RateLimitSubject) =>
      Object.fromEntries(OUTCOMES.map((outcome) => [outcome, decisions.child(subject, outcome)])) as Record<RateLimitOutcome, CounterChild>
    this.#decisions = Object.fromEntries(SUBJECTS.map((subject) => [subject, bySubject(subject)])) as DecisionSeries
    this.#bans = new CounterFamily(registry, 'petstore_ratelimit_bans_total',
      'Bans imposed on API keys that kept sending after 429.', []).child()

    // The gauges read these at scrape time; collect() runs with the gauge as `this`.
    const watchedLimiter = (): RateLimiter | null => this.#limiter
    const watchedStore = (): Pick<Store, 'poolStats'> | null => this.#store
    new Gauge({
      name: 'petstore_ratelimit_backend',
      help: 'The rate limiter answering now: 1 for the backend in use (redis, or memory alone or while Redis is unavailable; none while ' +
        'Redis is unavailable and RATE_LIMIT_ON_REDIS_DOWN=deny refuses requests), 0 for the others.',
      labelNames: ['backend'],
      registers: [registry],
      collect () {
        const limiter = watchedLimiter()
        const current = limiter === null ? 'memory' : limiterBackend(limiter)
        this.set({ backend: 'redis' }, current === 'redis' ? 1 : 0)
        this.set({ backend: 'memory' }, current === 'memory' ? 1 : 0)
        this.set({ backend: 'none' }, current === 'none' ? 1 : 0)
      }
    })
    new Counter({
      name: 'petstore_ratelimit_fallbacks_total',
      help: 'Times the limiter switched from Redis to the in-process fallback (Redis unreachable or failing).',
      registers: [registry],
      collect () {
        const limiter = watchedLimiter()
        this.reset()
        this.inc(limiter instanceof ResilientLimiter ? limiter.fallbacks : 0)
      }
    })

    this.#storeDurations = new HistogramFamily(registry, 'petstore_store_operation_duration_seconds',
      'Time a store call took, by store method (listInventory, findApiKeyByHash, ...), failures included.',
      ['operation'], STORE_BUCKETS)
    this.#storeErrors = new CounterFamily(registry, 'petstore_store_errors_total',
      'Store calls that failed, by store method.', ['operation'])
    new Gauge({
      name: 'petstore_store_pool_connections',
      help: 'The PostgreSQL connection pool: total (open), idle, waiting (callers queued for a connection) and max. ' +
        'No samples with SQLite, which has no pool.',
      labelNames: ['state'],
      registers: [registry],
      collect () {
        this.reset()
        const stats = watchedStore()?.poolStats() ?? null
        if (stats === null) return
        for (const state of POOL_STATES) this.set({ state }, stats[state])
      }
    })
    const watchedStreams = (): number => this.#streams?.() ?? 0
    new Gauge({
      name: 'petstore_change_streams_open',
      help: 'Change streams (GET /v1/inventory/changes/stream) open on this instance.',
      registers: [registry],
      collect () {
        this.set(watchedStreams())
      }
    })

    const attempts = new CounterFamily(registry, 'petstore_webhook_deliveries_total',
      'Webhook delivery attempts made by this instance, by outcome: delivered (2xx), retrying (failed, tried again later), ' +
      'failed (failed, and retries ran out).', ['outcome'])
    this.#webhookAttempts = Object.fromEntries(WEBHOOK_OUTCOMES.map((outcome) => [outcome, attempts.child(outcome)])) as Record<AttemptOutcomeKind, CounterChild>
    const watchedWebhooks = (): { store: WebhookBacklogStore, clock: () => number } | null => this.#webhookStore
    // Read from the store at scrape time: every instance reports the same shared backlog.
    const backlog = async (): Promise<Array<{ webhookId: string, pending: number, age: number }>> => {
      const watched = watchedWebhooks()
      if (watched === null) return []
      const rows = await watched.store.webhooks.webhookBacklog().catch(() => [])
      const now = watched.clock()
      return rows.map((row) => ({ webhookId: row.webhookId, pending: row.pending, age: row.oldest === null ? 0 : Math.max(0, (now - row.oldest.getTime()) / 1000) }))
    }
    let pendingRows: Promise<Array<{ webhookId: string, pending: number, age: number }>> | null = null
    new Gauge({
      name: 'petstore_webhook_oldest_undelivered_seconds',
      help: 'Per webhook subscription, the age of its oldest event not yet delivered (0: none). Alert when it grows.',
      labelNames: ['webhook'],
      registers: [registry],
      async collect () {
        this.reset()
        pendingRows = backlog()
        for (const row of await pendingRows) this.set({ webhook: row.webhookId }, row.age)
      }
    })
    new Gauge({
      name: 'petstore_webhook_pending_deliveries',
      help: 'Per webhook subscription, the events not yet delivered.',
      labelNames: ['webhook'],
      registers: [registry],
      async collect () {
        this.reset()
        for (const row of await (pendingRows ?? backlog())) this.set({ webhook: row.webhookId }, row.pending)
        pendingRows = null
      }
    })

    new Gauge({
      name: 'petstore_build_info',
      help: 'The release this instance runs (version: package.json\'s) and the Node.js version it runs on; always 1.',
      labelNames: ['version', 'node'],
      registers: [registry],
      // A cluster's workers run one release: the primary's sum would count them instead.
      aggregator: 'max'
    }).set({ version: VERSION, node: process.version }, 1)

    if (options.processMetrics === true) {
      collectDefaultMetrics({ register: registry })
      watchHeapAfterGc(registry)
    }
  }

  recordWebhookAttempt (outcome: AttemptOutcomeKind): void {
    this.#webhookAttempts[outcome].inc()
  }

  /** The store whose webhook backlog the webhook gauges report (read at scrape time). */
  watchWebhooks (store: WebhookBacklogStore, clock: () => number): void {
    this.#webhookStore = { store, clock }
  }

  /** The request series for a route's operation name (a bounded set: one per route, plus fixed names). */
  operation (name: string): OperationSeries {
    let series = this.#operations.get(name)
    if (series === undefined) {
      series = new OperationSeries(name, this.#requests, this.#durations)
      this.#operations.set(name, series)
    }
    return series
  }

  /** The series of a store method, by its name. */
  storeOperation (name: string): StoreSeries {
    let series = this.#stores.get(name)
    if (series === undefined) {
      series = { duration: this.#storeDurations.child(name), errors: this.#storeErrors.child(name) }
      this.#stores.set(name, series)
    }
    return series
  }

  recordDecision (subject: RateLimitSubject, outcome: RateLimitOutcome): void {
    this.#decisions[subject][outcome].inc()
  }

  recordBan (): void {
    this.#bans.inc()
  }

  /** The limiter whose backend the petstore_ratelimit_backend gauge reports (read at scrape time). */
  watchLimiter (limiter: RateLimiter): void {
    this.#limiter = limiter
  }

  /** The store whose connection pool the pool gauges report (read at scrape time). */
  watchStore (store: Pick<Store, 'poolStats'>): void {
    this.#store = store
  }

  /** Where the petstore_change_streams_open gauge reads how many change streams are open (at scrape time). */
  watchStreams (count: () => number): void {
    this.#streams = count
  }

  /** The Prometheus text format of a scrape. */
  exposition (): Promise<string> {
    return this.#exposition()
  }

  get contentType (): string {
    return this.registry.contentType
  }
}
