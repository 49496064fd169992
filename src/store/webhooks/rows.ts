/** Row codecs of the webhook tables, shared by both stores (../rows.ts: how the drivers differ). */
import { EPOCH_OF, num, time, timeOrNull, type Int, type Time } from '../rows.js'
import { LEDGER_COLUMNS, toLedgerEntry, type LedgerRow } from '../stock/rows.js'
import type { ClaimedDelivery, DeliveryState, WebhookAttempt, WebhookDelivery, WebhookRecord } from './types.js'

export interface WebhookRow {
  id: string, quota_id: string, url: string, events: string, description: string | null, enabled: boolean | Int,
  disabled_reason: string | null, secret: string, previous_secret: string | null, previous_secret_until: Time | null,
  failures: Int, failing_since: Time | null, created_at: Time, updated_at: Time
}
export const WEBHOOK_COLUMNS = 'id, quota_id, url, events, description, enabled, disabled_reason, secret, previous_secret, ' +
  'previous_secret_until, failures, failing_since, created_at, updated_at'

export const toWebhook = (row: WebhookRow): WebhookRecord => ({
  id: row.id,
  quotaId: row.quota_id,
  url: row.url,
  events: JSON.parse(row.events) as string[],
  description: row.description,
  enabled: row.enabled === true || Number(row.enabled) === 1,
  disabledReason: row.disabled_reason,
  secret: row.secret,
  previousSecret: row.previous_secret,
  previousSecretUntil: timeOrNull(row.previous_secret_until),
  failures: num(row.failures),
  failingSince: timeOrNull(row.failing_since),
  createdAt: time(row.created_at),
  updatedAt: time(row.updated_at)
})

export interface DeliveryRow {
  id: bigint, webhook_id: string, change_id: bigint, feed_order: bigint, epoch: string | null, state: DeliveryState, next_attempt_at: Time | null,
  give_up_at: Time, created_at: Time
}
export const DELIVERY_COLUMNS = 'd.id, d.webhook_id, d.change_id, d.feed_order, d.state, d.next_attempt_at, d.give_up_at, d.created_at, ' +
  `${EPOCH_OF('d.feed_order', 'd.change_id')} AS epoch`

export interface AttemptRow {
  delivery_id: bigint, attempt: Int, at: Time, status: Int | null, error: string | null, response: string | null, duration_ms: Int
}
export const ATTEMPT_COLUMNS = 'a.delivery_id, a.attempt, a.at, a.status, a.error, a.response, a.duration_ms'

const toAttempt = (row: AttemptRow): WebhookAttempt => ({
  attempt: num(row.attempt),
  at: time(row.at),
  status: row.status === null ? null : num(row.status),
  error: row.error,
  response: row.response,
  durationMs: num(row.duration_ms)
})

/** Deliveries with their attempts (rows of any order; each delivery's attempts oldest first). */
export function toDeliveries (rows: readonly DeliveryRow[], attempts: readonly AttemptRow[]): WebhookDelivery[] {
  const byDelivery = new Map<bigint, WebhookAttempt[]>()
  for (const row of [...attempts].sort((a, b) => num(a.attempt) - num(b.attempt))) {
    let list = byDelivery.get(row.delivery_id)
    if (list === undefined) byDelivery.set(row.delivery_id, list = [])
    list.push(toAttempt(row))
  }
  return rows.map((row) => ({
    id: row.id,
    webhookId: row.webhook_id,
    changeId: row.change_id,
    position: { order: row.feed_order, id: row.change_id },
    epoch: row.epoch,
    state: row.state,
    attempts: byDelivery.get(row.id) ?? [],
    nextAttemptAt: timeOrNull(row.next_attempt_at),
    giveUpAt: time(row.give_up_at),
    createdAt: time(row.created_at)
  }))
}

/** A claimed delivery's row: the delivery, its subscription's address and secrets, and its change (the ledger's columns). */
export interface ClaimRow extends LedgerRow {
  delivery_id: bigint, webhook_id: string, quota_id: string, failures: Int, url: string, secret: string, previous_secret: string | null,
  previous_secret_until: Time | null, attempts: Int, give_up_at: Time, feed_order: bigint, own: boolean | Int, epoch: string | null
}
/** The columns of a claim, from deliveries d, webhooks w and the ledger l; `own` tells a change made by a key of w's quota. */
export const CLAIM_COLUMNS = `d.id AS delivery_id, d.webhook_id, w.quota_id, w.failures, w.url, w.secret, w.previous_secret, w.previous_secret_until, d.attempts,
  d.give_up_at, d.feed_order, ${LEDGER_COLUMNS}, ${EPOCH_OF('d.feed_order', 'l.id')} AS epoch,
  EXISTS (SELECT 1 FROM api_keys k WHERE k.id = l.key_id AND coalesce(k.quota_id, k.id) = w.quota_id) AS own`

export const toClaimed = (row: ClaimRow, at: Date): ClaimedDelivery => {
  const previousUntil = timeOrNull(row.previous_secret_until)
  return {
    deliveryId: row.delivery_id,
    webhookId: row.webhook_id,
    quotaId: row.quota_id,
    failing: num(row.failures) > 0,
    url: row.url,
    secrets: row.previous_secret !== null && previousUntil !== null && previousUntil > at ? [row.secret, row.previous_secret] : [row.secret],
    attempt: num(row.attempts) + 1,
    giveUpAt: time(row.give_up_at),
    change: { ...toLedgerEntry(row), position: { order: row.feed_order, id: row.id }, epoch: row.epoch },
    own: row.own === true || Number(row.own) === 1
  }
}

/**
 * Whether the quota of subscription `w` is active at the bound time: a key of it is neither revoked nor expired. A
 * rotated key's replacement shares its quota, so a rotation keeps the subscriptions.
 */
export const QUOTA_ACTIVE = (at: string): string => `EXISTS (SELECT 1 FROM api_keys k WHERE (k.id = w.quota_id OR k.quota_id = w.quota_id)
  AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ${at}))`
