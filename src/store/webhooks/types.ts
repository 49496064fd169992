/**
 * What the store keeps for webhooks: subscriptions, their deliveries and attempts (the ledger stays the outbox: a
 * delivery is made from a committed change by the dispatcher, never by the request that made the change).
 * Implemented by both stores; one contract suite (test/store/webhooks.contract.ts).
 */
import type { FeedChange, FeedPosition } from '../stock/types.js'

/** A subscription as stored. Secrets are kept as they are: signing needs them (API keys, which only need checking, are hashed). */
export interface WebhookRecord {
  /** `wh_` + 26 characters. */
  id: string
  /** The quota of the key that created it: every key of that quota (a rotated key too) manages it. */
  quotaId: string
  url: string
  events: string[]
  description: string | null
  enabled: boolean
  /** Why it was disabled (by its owner, the operator, a 410, a run of failures); null while enabled. */
  disabledReason: string | null
  /** `whsec_` + base64 of the key. */
  secret: string
  /** The secret a rotation replaced, which still signs until previousSecretUntil. */
  previousSecret: string | null
  previousSecretUntil: Date | null
  /** Failed attempts since the last success, and when the run began (null: none). */
  failures: number
  failingSince: Date | null
  createdAt: Date
  updatedAt: Date
}

export interface NewWebhook {
  id: string
  quotaId: string
  url: string
  events: string[]
  description: string | null
  secret: string
  createdAt: Date
}

/** What an update changes; an absent field stays. Enabling clears the reason and the failure run. */
export interface WebhookUpdate {
  url?: string
  events?: string[]
  description?: string | null
  enabled?: boolean
  /** With enabled: false, the reason recorded. */
  disabledReason?: string | null
}

export type DeliveryState = 'pending' | 'delivered' | 'failed'

/** One attempt of a delivery, as the deliveries log shows it. */
export interface WebhookAttempt {
  /** From 1. */
  attempt: number
  at: Date
  /** The HTTP status of the answer; null when none came. */
  status: number | null
  /** Why the attempt failed, when it did (no answer, a redirect, a status outside 2xx, a refused address). */
  error: string | null
  /** The first bytes of the answer, when there was one. */
  response: string | null
  durationMs: number
}

/** One event of one subscription: a change of the feed, delivered at least once. */
export interface WebhookDelivery {
  id: bigint
  webhookId: string
  changeId: bigint
  /** The change's place in the feed, and the store epoch it was made in (null: before epochs). */
  position: FeedPosition
  epoch: string | null
  state: DeliveryState
  /** Attempts made so far; the log lists them, oldest first. */
  attempts: WebhookAttempt[]
  /** When the next attempt is due (pending only). */
  nextAttemptAt: Date | null
  /** Retries stop after this: the delivery fails. */
  giveUpAt: Date
  createdAt: Date
}

/** A delivery an instance leased to attempt now, with what it needs to send it. */
export interface ClaimedDelivery {
  deliveryId: bigint
  webhookId: string
  /** The subscription's quota, and whether its last attempts failed (a failure run is going on). */
  quotaId: string
  failing: boolean
  url: string
  /** The secrets that sign it now: the current one, and the one a rotation replaced while it still signs. */
  secrets: string[]
  /** This attempt's number, from 1. */
  attempt: number
  giveUpAt: Date
  /** The change, as the feed has it. */
  change: FeedChange
  /** Whether a key of the subscription's own quota made the change (its request id is then shown). */
  own: boolean
}

export interface ClaimRequest {
  /** Who holds the lease: this instance. */
  owner: string
  at: Date
  /** The lease ends then: afterwards another instance may take the delivery over. */
  leaseUntil: Date
  limit: number
  /** At most this many of one subscription: each subscription due gets its turn, the oldest due first. */
  perSubscription: number
  /** Subscriptions this instance attempts enough of already: none of theirs is claimed. */
  exclude: readonly string[]
}

/** What became of an attempt, recorded with it in one transaction. */
export interface AttemptOutcome {
  deliveryId: bigint
  webhookId: string
  owner: string
  at: Date
  status: number | null
  error: string | null
  response: string | null
  durationMs: number
  /**
   * delivered; pending again (nextAttemptAt); or failed for good. Applied only while `owner` still holds the lease: a
   * delivery retried by hand meanwhile (a redelivery asked for) or taken over by another instance keeps its state, and
   * a delivered delivery never goes back to pending. The attempt is logged either way.
   */
  state: DeliveryState
  nextAttemptAt: Date | null
}

/** A subscription's failure run after an attempt was recorded. */
export interface FailureRun {
  failures: number
  failingSince: Date | null
}

/** What a fan-out found: the subscriptions that take events now, and the deliveries it created. */
export interface EnqueueResult {
  subscriptions: number
  created: number
}

/** The undelivered events of one subscription, for metrics. */
export interface WebhookBacklog {
  webhookId: string
  pending: number
  /** When the oldest undelivered event of the subscription was created; null when none. */
  oldest: Date | null
}

export interface WebhookReads {
  /** The subscriptions of a quota, or every subscription (null), oldest first. */
  listWebhooks (quotaId: string | null): Promise<WebhookRecord[]>
  getWebhook (id: string): Promise<WebhookRecord | null>
  /** Deliveries of a subscription, newest first, with their attempts: those with an id below `beforeId` when given. */
  listWebhookDeliveries (webhookId: string, beforeId: bigint | null, limit: number): Promise<WebhookDelivery[]>
  getWebhookDelivery (webhookId: string, deliveryId: bigint): Promise<WebhookDelivery | null>
  /** Undelivered events per subscription (every subscription is listed, with 0 and null when it has none). */
  webhookBacklog (): Promise<WebhookBacklog[]>
}

export interface WebhookWrites {
  /**
   * Creates a subscription whose events are the changes committed after the feed's head at that moment, unless its
   * quota has `maxPerQuota` subscriptions already (counted in the same transaction: two creations at once cannot
   * both pass). Returns the subscription, or 'limit'.
   */
  createWebhook (webhook: NewWebhook, maxPerQuota: number): Promise<WebhookRecord | 'limit'>
  /** Null when there is no such subscription. */
  updateWebhook (id: string, update: WebhookUpdate, at: Date): Promise<WebhookRecord | null>
  /** Deletes a subscription with its deliveries and their log; false when there was none. */
  deleteWebhook (id: string): Promise<boolean>
  /** Sets a new secret; the current one keeps signing until `previousUntil`. Null when there is no such subscription. */
  rotateWebhookSecret (id: string, secret: string, previousUntil: Date, at: Date): Promise<WebhookRecord | null>
  /**
   * Creates the deliveries of the changes committed since each enabled subscription of an active quota (one with a
   * key neither revoked nor expired at `at`) last took its events, at most `limit` per subscription per call, in feed
   * order, and moves each subscription's position past them, in one transaction per subscription. Instances running it
   * at once each take other subscriptions (none is taken twice). Returns how many enabled subscriptions of active quotas
   * there are and how many deliveries it created. Writes nothing when no subscription is behind the feed.
   */
  enqueueWebhookDeliveries (at: Date, giveUpAt: Date, limit: number): Promise<EnqueueResult>
  /**
   * Leases at most `limit` pending deliveries that are due at `at` and not leased by anyone (or whose lease ended),
   * of enabled subscriptions of active quotas: up to `perSubscription` of each subscription (its oldest due), the
   * oldest due first over all of them, so that one subscription's backlog never crowds out the others. It reads the
   * deliveries of those subscriptions only (a disabled subscription's backlog costs nothing). Another instance
   * claiming at the same time gets other ones.
   */
  claimWebhookDeliveries (request: ClaimRequest): Promise<ClaimedDelivery[]>
  /** Gives back leases this owner holds on deliveries it has not attempted (a stop). */
  releaseWebhookLeases (owner: string, deliveryIds: readonly bigint[]): Promise<void>
  /**
   * Records attempts in the log, in one transaction (a group commit: many attempts, one durable write), each moving its
   * delivery to its new state, ending its lease and updating its subscription's failure run (a success ends it);
   * returns each run as it is after that attempt, in the order given.
   */
  recordWebhookAttempts (outcomes: readonly AttemptOutcome[]): Promise<FailureRun[]>
  /**
   * Makes a delivery due again at `at` (also one delivered or failed: a redelivery), retried until `giveUpAt`. Null
   * when the subscription has no such delivery.
   */
  retryWebhookDelivery (webhookId: string, deliveryId: bigint, at: Date, giveUpAt: Date): Promise<WebhookDelivery | null>
  /**
   * Deletes at most `limit` deliveries created before `before` that are not going to be attempted, with their log:
   * delivered or failed ones, then pending ones of subscriptions that are disabled or whose quota had no active key at
   * `before` (kept until then, so that enabling the subscription again delivers them). Returns how many.
   */
  purgeWebhookDeliveries (before: Date, limit: number): Promise<number>
}

export type WebhookStore = WebhookReads & WebhookWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const WEBHOOK_WRITES = {
  createWebhook: 'refuse',
  updateWebhook: 'refuse',
  deleteWebhook: 'refuse',
  rotateWebhookSecret: 'refuse',
  enqueueWebhookDeliveries: 'refuse',
  claimWebhookDeliveries: 'refuse',
  releaseWebhookLeases: 'refuse',
  recordWebhookAttempts: 'refuse',
  retryWebhookDelivery: 'refuse',
  purgeWebhookDeliveries: 'refuse'
} as const satisfies Record<keyof WebhookWrites, 'refuse' | 'skip'>
