/**
 * The dispatcher: each instance's background loop that turns committed changes into webhook deliveries and attempts
 * them. Nothing is sent from a request: the ledger is the outbox, and a delivery exists for every change committed
 * after its subscription was made (the store's fan-out moves each subscription's feed position in the same
 * transaction that creates its deliveries). Attempts are leased (an instance killed mid-attempt loses its lease when
 * it ends, and another instance, or this one restarted, takes the delivery over), so every event arrives at least
 * once; receivers deduplicate by `webhook-id`.
 *
 * Order: deliveries are claimed oldest first, but up to `perSubscription` of one subscription are in flight at once
 * and a failed one is retried later while newer ones go on, so events can arrive out of feed order. Each carries what
 * reorders them: its `cursor` (feed order) and, per pet, its `changeId`, which grows with each change of the pet
 * (docs/webhooks.md). A stalled endpoint thus never holds back the events behind it, and never holds back other
 * subscriptions: each has at most `perSubscription` of the instance's `concurrency` slots.
 */
import { redactSecrets } from '../redact.js'
import { eventJson } from './entry-json.js'
import { viewEntry } from './feed.js'
import { deliveryHeaders, eventId } from './webhooks.js'
import type { AttemptOutcome, ClaimedDelivery, DeliveryState, FailureRun, WebhookWrites } from '../store/webhooks/types.js'

/** What the dispatcher does with the store: the webhook area's delivery writes. */
type DispatchStore = {
  readonly webhooks: Pick<WebhookWrites, 'enqueueWebhookDeliveries' | 'claimWebhookDeliveries' | 'releaseWebhookLeases' | 'recordWebhookAttempts' |
    'purgeWebhookDeliveries' | 'updateWebhook'>
}

/** One request to a subscriber's endpoint. */
export interface OutgoingRequest { url: string, headers: Record<string, string>, body: string }
/**
 * What came of it: an HTTP status, or why none came. Never throws for network outcomes. `error` names no address a
 * host resolved to; `responseExcerpt`, the start of the answer's body, comes only from public addresses.
 */
export interface TransportResult { status: number | null, error: string | null, durationMs: number, responseExcerpt?: string }
export interface Transport {
  send (request: OutgoingRequest, signal?: AbortSignal): Promise<TransportResult>
}

export interface DispatchPolicy {
  /**
   * Attempts in flight on this instance, per quota, and per subscription (one while the subscription's last attempts
   * failed: an endpoint that hangs holds one slot, not many).
   */
  concurrency: number
  perQuota: number
  perSubscription: number
  /** One attempt's deadline: the lease lasts this long and a margin more. */
  timeoutMs: number
  retryForMs: number
  retryBaseMs: number
  retryMaxDelayMs: number
  disableAfterFailures: number
  disableAfterMs: number
  /** How often an idle loop looks again. */
  pollMs: number
  /** How long delivered and failed deliveries stay in the log. */
  retentionMs: number
}

/** An attempt's outcome, for metrics: delivered, failed (to be retried), gave up (failed for good). */
export type AttemptOutcomeKind = 'delivered' | 'retrying' | 'failed'

export interface DispatchEvents {
  attempted?: (outcome: AttemptOutcomeKind, durationMs: number) => void
  /** A subscription was disabled (410, or a run of failures). */
  disabled?: (webhookId: string, reason: string) => void
  /** A step of the loop failed (the store away); it is tried again at the next tick. */
  failed?: (error: unknown) => void
}

/** Beyond the attempt's own deadline, the lease covers recording its outcome. */
const LEASE_MARGIN_MS = 5000
/** The least time between two ticks a local commit starts. */
const NUDGE_GAP_MS = 5
/**
 * Deliveries one fan-out creates at most, shared by the subscriptions: on SQLite a fan-out is synchronous work, and a
 * large import times many subscriptions must not hold the event loop (the next tick, after I/O, goes on).
 */
const FAN_OUT_BUDGET = 200
/** Outcomes recorded in one transaction at most. */
const RECORD_BATCH = 100
/** How often delivered and failed deliveries past the retention are purged, and how many at a time. */
const PURGE_INTERVAL_MS = 60_000
const PURGE_LIMIT = 1000
/** How long a stop lets attempts in flight finish before it abandons them (their leases are given back). */
const STOP_GRACE_MS = 2000

/** The body of an event: the entry, of whatever type, as the feed shows it to the subscription's quota. */
export function eventBody (delivery: Pick<ClaimedDelivery, 'change' | 'own'>): string {
  return eventJson(viewEntry(delivery.change, delivery.own))
}

/** The most of an answer's body the deliveries log keeps, in bytes of UTF-8 (docs/webhooks.md). */
export const RESPONSE_EXCERPT_BYTES = 256

/**
 * What the deliveries log keeps of an answer's body: redacted first by the one secrets filter (src/redact.ts), over
 * all the sender returned (so that a secret the cut would halve is still found), then at most RESPONSE_EXCERPT_BYTES,
 * cut between characters.
 */
export function responseExcerpt (body: string): string {
  const bytes = Buffer.from(redactSecrets(body))
  if (bytes.length <= RESPONSE_EXCERPT_BYTES) return bytes.toString()
  // A fresh decoder in stream mode holds back a character the cut left incomplete.
  return new TextDecoder().decode(bytes.subarray(0, RESPONSE_EXCERPT_BYTES), { stream: true })
}

/**
 * The delay before attempt `attempt + 1` after attempt `attempt` failed: exponential from retryBaseMs, capped at
 * retryMaxDelayMs, with "equal jitter" (half fixed, half random) so that deliveries failing together spread out.
 */
export function retryDelay (attempt: number, policy: Pick<DispatchPolicy, 'retryBaseMs' | 'retryMaxDelayMs'>, random: () => number): number {
  const ceiling = Math.min(policy.retryMaxDelayMs, policy.retryBaseMs * 2 ** Math.min(attempt - 1, 40))
  return Math.round(ceiling / 2 + random() * ceiling / 2)
}

/** Whether a run of failures disables its subscription: long enough in both attempts and time. */
export function failureRunDisables (run: { failures: number, failingSince: Date | null }, at: Date, policy: Pick<DispatchPolicy, 'disableAfterFailures' | 'disableAfterMs'>): boolean {
  return run.failingSince !== null && run.failures >= policy.disableAfterFailures && at.getTime() - run.failingSince.getTime() >= policy.disableAfterMs
}

/** Attempts in flight, per subscription and per quota. */
interface InFlightCounts { subscriptions: Map<string, number>, quotas: Map<string, number> }

export interface DispatcherOptions {
  store: DispatchStore
  transport: Transport
  policy: DispatchPolicy
  /** This instance's name on the leases it holds. */
  owner: string
  clock?: () => number
  random?: () => number
  events?: DispatchEvents
}

export class WebhookDispatcher {
  readonly #store: DispatchStore
  readonly #transport: Transport
  readonly #policy: DispatchPolicy
  readonly #owner: string
  readonly #clock: () => number
  readonly #random: () => number
  readonly #events: DispatchEvents
  /** Attempts in flight: delivery id -> its subscription and quota. */
  readonly #inFlight = new Map<bigint, { webhookId: string, quotaId: string }>()
  readonly #abort = new AbortController()
  #timer: NodeJS.Timeout | undefined
  #running: Promise<void> | null = null
  #again = false
  #stopped = true
  /** The subscriptions the last fan-out found: without any, a commit here has nothing to wake. */
  #subscriptions = 0
  /** What this instance knows of the subscriptions it attempted: their quota, and whether they are failing. */
  readonly #known = new Map<string, { quotaId: string, failing: boolean }>()
  /** When the last tick started: nudges are at most one every NUDGE_GAP_MS. */
  #lastTick = 0
  #lastPurge = 0
  readonly #attempts = new Set<Promise<void>>()
  /** Outcomes waiting to be recorded, and whether a recording is under way. */
  readonly #toRecord: Array<{ outcome: AttemptOutcome, resolve: (run: FailureRun) => void, reject: (error: unknown) => void }> = []
  #recording = false

  constructor (options: DispatcherOptions) {
    this.#store = options.store
    this.#transport = options.transport
    this.#policy = options.policy
    this.#owner = options.owner
    this.#clock = options.clock ?? Date.now
    this.#random = options.random ?? Math.random
    this.#events = options.events ?? {}
  }

  start (): void {
    if (!this.#stopped) return
    this.#stopped = false
    this.wake()
  }

  /**
   * A change was committed on this instance: look for work at once rather than at the next poll, when there are
   * subscriptions at all (an instance without any stays at one poll per pollMs, whatever its write rate), and at most
   * once every NUDGE_GAP_MS.
   */
  committed (): void {
    if (this.#subscriptions === 0 || this.#stopped) return
    const wait = this.#lastTick + NUDGE_GAP_MS - this.#clockNow()
    if (wait <= 0) {
      this.wake()
    } else if (this.#running === null) {
      clearTimeout(this.#timer)
      this.#timer = setTimeout(() => { this.wake() }, wait)
      this.#timer.unref()
    }
  }

  /** performance.now(): the gap between ticks is measured in real time, whatever the injected clock. */
  #clockNow (): number {
    return performance.now()
  }

  /** Looks for work now, instead of at the next poll. */
  wake (): void {
    if (this.#stopped) return
    if (this.#running !== null) {
      this.#again = true
      return
    }
    clearTimeout(this.#timer)
    this.#lastTick = this.#clockNow()
    this.#running = this.#tick().finally(() => {
      this.#running = null
      if (this.#stopped) return
      // Again (more may be due) after I/O and timers had their turn, as a tick on SQLite is synchronous work; else at
      // the next poll.
      const delay = this.#again ? 0 : this.#policy.pollMs
      this.#again = false
      this.#timer = setTimeout(() => { this.wake() }, delay)
      this.#timer.unref()
    })
  }

  /**
   * Stops claiming, lets attempts in flight finish for a moment, then abandons the rest: their leases are given
   * back (nothing recorded), so another instance attempts them again at once.
   */
  async stop (): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#timer)
    await this.#running
    const settled = Promise.allSettled([...this.#attempts])
    // Not unref'd: the stop must reach the release below even when nothing else keeps the process alive.
    let graceTimer: NodeJS.Timeout | undefined
    const grace = new Promise<void>((resolve) => { graceTimer = setTimeout(resolve, Math.min(STOP_GRACE_MS, this.#policy.timeoutMs)) })
    await Promise.race([settled, grace])
    clearTimeout(graceTimer)
    if (this.#inFlight.size > 0) {
      const abandoned = [...this.#inFlight.keys()]
      this.#abort.abort()
      await settled
      await this.#store.webhooks.releaseWebhookLeases(this.#owner, abandoned).catch((error: unknown) => this.#events.failed?.(error))
    }
  }

  async #tick (): Promise<void> {
    try {
      const now = this.#clock()
      const at = new Date(now)
      const perSubscription = Math.max(10, Math.floor(FAN_OUT_BUDGET / Math.max(1, this.#subscriptions)))
      const fanOut = await this.#store.webhooks.enqueueWebhookDeliveries(at, new Date(now + this.#policy.retryForMs), perSubscription)
      this.#subscriptions = fanOut.subscriptions
      // A full fan-out may have left changes behind: look again soon.
      if (fanOut.created >= perSubscription) this.#again = true
      const free = this.#policy.concurrency - this.#inFlight.size
      if (free > 0) {
        const claimed = await this.#store.webhooks.claimWebhookDeliveries({
          owner: this.#owner, at, leaseUntil: new Date(now + this.#policy.timeoutMs + LEASE_MARGIN_MS), limit: free,
          perSubscription: this.#policy.perSubscription, exclude: this.#atCapacity()
        })
        const extra: bigint[] = []
        const counts = this.#counts()
        for (const delivery of claimed) {
          this.#known.set(delivery.webhookId, { quotaId: delivery.quotaId, failing: delivery.failing })
          if (this.#stopped || this.#full(counts, delivery.webhookId, delivery)) {
            extra.push(delivery.deliveryId)
            continue
          }
          counts.subscriptions.set(delivery.webhookId, (counts.subscriptions.get(delivery.webhookId) ?? 0) + 1)
          counts.quotas.set(delivery.quotaId, (counts.quotas.get(delivery.quotaId) ?? 0) + 1)
          this.#begin(delivery)
        }
        if (extra.length > 0) await this.#store.webhooks.releaseWebhookLeases(this.#owner, extra)
        // A full claim may have left due deliveries behind: look again as soon as a slot frees.
        if (claimed.length === free) this.#again = true
      }
      if (now - this.#lastPurge >= PURGE_INTERVAL_MS) {
        this.#lastPurge = now
        await this.#store.webhooks.purgeWebhookDeliveries(new Date(now - this.#policy.retentionMs), PURGE_LIMIT)
      }
    } catch (error) {
      this.#events.failed?.(error)
    }
  }

  /**
   * Records an attempt's outcome with the others that ended in the same turn of the event loop: one transaction (one
   * durable commit on SQLite) for all of them, as stock writes are group-committed.
   */
  async #record (outcome: AttemptOutcome): Promise<FailureRun> {
    return await new Promise<FailureRun>((resolve, reject) => {
      this.#toRecord.push({ outcome, resolve, reject })
      if (this.#toRecord.length === 1 && !this.#recording) setImmediate(() => { void this.#flush() })
    })
  }

  async #flush (): Promise<void> {
    this.#recording = true
    while (this.#toRecord.length > 0) {
      const batch = this.#toRecord.splice(0, RECORD_BATCH)
      try {
        const runs = await this.#store.webhooks.recordWebhookAttempts(batch.map(({ outcome }) => outcome))
        batch.forEach(({ resolve }, i) => { resolve(runs[i] ?? { failures: 0, failingSince: null }) })
      } catch (error) {
        for (const { reject } of batch) reject(error)
      }
    }
    this.#recording = false
  }

  /** Attempts in flight now, per subscription and per quota. */
  #counts (): InFlightCounts {
    const subscriptions = new Map<string, number>()
    const quotas = new Map<string, number>()
    for (const { webhookId, quotaId } of this.#inFlight.values()) {
      subscriptions.set(webhookId, (subscriptions.get(webhookId) ?? 0) + 1)
      quotas.set(quotaId, (quotas.get(quotaId) ?? 0) + 1)
    }
    return { subscriptions, quotas }
  }

  /** Whether a subscription may have no more attempts in flight: at its own limit (1 while failing), or its quota at its. */
  #full ({ subscriptions, quotas }: InFlightCounts, webhookId: string, { quotaId, failing }: { quotaId: string, failing: boolean }): boolean {
    return (subscriptions.get(webhookId) ?? 0) >= (failing ? 1 : this.#policy.perSubscription) || (quotas.get(quotaId) ?? 0) >= this.#policy.perQuota
  }

  /** The subscriptions not to claim for now. */
  #atCapacity (): string[] {
    const counts = this.#counts()
    return [...this.#known].filter(([webhookId, known]) => this.#full(counts, webhookId, known)).map(([webhookId]) => webhookId)
  }

  #begin (delivery: ClaimedDelivery): void {
    this.#inFlight.set(delivery.deliveryId, { webhookId: delivery.webhookId, quotaId: delivery.quotaId })
    const attempt = this.#attempt(delivery)
      .catch((error: unknown) => this.#events.failed?.(error))
      .finally(() => {
        this.#inFlight.delete(delivery.deliveryId)
        this.#attempts.delete(attempt)
        // A slot freed: more may be due.
        if (!this.#stopped) this.wake()
      })
    this.#attempts.add(attempt)
  }

  async #attempt (delivery: ClaimedDelivery): Promise<void> {
    const body = eventBody(delivery)
    const sentAt = new Date(this.#clock())
    const headers = deliveryHeaders(delivery.secrets, eventId(delivery.change), sentAt, body)
    const result = await this.#transport.send({ url: delivery.url, headers, body }, this.#abort.signal)
    // Abandoned by a stop: not recorded; the released lease lets it be attempted again.
    if (this.#abort.signal.aborted) return
    const now = this.#clock()
    const at = new Date(now)
    const ok = result.status !== null && result.status >= 200 && result.status < 300
    let state: DeliveryState = 'delivered'
    let nextAttemptAt: Date | null = null
    if (!ok) {
      const next = now + retryDelay(delivery.attempt, this.#policy, this.#random)
      state = next > delivery.giveUpAt.getTime() ? 'failed' : 'pending'
      nextAttemptAt = state === 'pending' ? new Date(next) : null
    }
    // Redacted too: a redirect's target is the endpoint's text.
    const error = ok ? null : redactSecrets(result.error ?? `HTTP ${result.status} (a 2xx status is expected)`)
    const run = await this.#record({
      deliveryId: delivery.deliveryId,
      webhookId: delivery.webhookId,
      owner: this.#owner,
      at: sentAt,
      status: result.status,
      error,
      response: result.responseExcerpt === undefined ? null : responseExcerpt(result.responseExcerpt),
      durationMs: result.durationMs,
      state,
      nextAttemptAt
    })
    this.#known.set(delivery.webhookId, { quotaId: delivery.quotaId, failing: run.failures > 0 })
    this.#events.attempted?.(ok ? 'delivered' : state === 'failed' ? 'failed' : 'retrying', result.durationMs)
    let reason: string | null = null
    if (result.status === 410) {
      reason = `The endpoint answered 410 Gone at ${at.toISOString()}: it asked for no more deliveries.`
    } else if (!ok && failureRunDisables(run, at, this.#policy)) {
      reason = `${run.failures} attempts in a row failed since ${run.failingSince?.toISOString() ?? '?'}; the last: ${error ?? ''}`
    }
    if (reason !== null) {
      await this.#store.webhooks.updateWebhook(delivery.webhookId, { enabled: false, disabledReason: reason }, at)
      this.#events.disabled?.(delivery.webhookId, reason)
    }
  }
}
