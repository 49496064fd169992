/**
 * The webhook tables of the shared store (migration 10). Instances work on them at once: the fan-out locks each
 * subscription it advances and the claim each delivery it leases, both with SKIP LOCKED, so two instances never take
 * the same one and neither waits for the other.
 */
import type pg from 'pg'
import { STOCK_CHANGED } from '../../model.js'
import type { PostgresDatabase } from '../postgres/database.js'
import { feedHead, HEAD_SQL } from '../postgres/sql.js'
import {
  ATTEMPT_COLUMNS, CLAIM_COLUMNS, DELIVERY_COLUMNS, QUOTA_ACTIVE, toClaimed, toDeliveries, toWebhook, WEBHOOK_COLUMNS,
  type AttemptRow, type ClaimRow, type DeliveryRow, type WebhookRow
} from './rows.js'
import type {
  AttemptOutcome, ClaimedDelivery, ClaimRequest, EnqueueResult, FailureRun, NewWebhook, WebhookBacklog, WebhookDelivery, WebhookRecord, WebhookStore, WebhookUpdate
} from './types.js'

/**
 * Serializes the creations of one quota's subscriptions (the count and the insert): an advisory lock of two int4 keys,
 * this one and the quota's hash. (726_501 is the change streams' own: ../streams/postgres.ts.)
 */
const WEBHOOK_QUOTA_LOCK = 726_500

export class PostgresWebhooks implements WebhookStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  async createWebhook (webhook: NewWebhook, maxPerQuota: number): Promise<WebhookRecord | 'limit'> {
    return await this.#db.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [WEBHOOK_QUOTA_LOCK, webhook.quotaId])
      const { rows: [count] } = await client.query<{ n: bigint }>('SELECT count(*) AS n FROM webhooks WHERE quota_id = $1', [webhook.quotaId])
      if (Number(count?.n ?? 0n) >= maxPerQuota) return 'limit'
      const position = await feedHead((text, values) => client.query(text, values))
      const { rows } = await client.query<WebhookRow>(
        `INSERT INTO webhooks (id, quota_id, url, events, description, secret, feed_order, feed_id, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING ${WEBHOOK_COLUMNS}`,
        [webhook.id, webhook.quotaId, webhook.url, JSON.stringify(webhook.events), webhook.description, webhook.secret,
          position?.order ?? 0n, position?.id ?? 0n, webhook.createdAt])
      return toWebhook(rows[0] as WebhookRow)
    })
  }

  async listWebhooks (quotaId: string | null): Promise<WebhookRecord[]> {
    const { rows } = await this.#db.query<WebhookRow>(
      `SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE $1::text IS NULL OR quota_id = $1 ORDER BY created_at, id`, [quotaId])
    return rows.map(toWebhook)
  }

  async getWebhook (id: string): Promise<WebhookRecord | null> {
    const { rows } = await this.#db.query<WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1`, [id])
    return rows[0] === undefined ? null : toWebhook(rows[0])
  }

  async updateWebhook (id: string, update: WebhookUpdate, at: Date): Promise<WebhookRecord | null> {
    const enabled = update.enabled ?? null
    const { rows } = await this.#db.query<WebhookRow>(
      `UPDATE webhooks SET url = coalesce($2, url), events = coalesce($3, events),
         description = CASE WHEN $4 THEN $5 ELSE description END,
         enabled = coalesce($6, enabled),
         disabled_reason = CASE WHEN coalesce($6, enabled) THEN NULL WHEN $6 = false THEN $7 ELSE disabled_reason END,
         failures = CASE WHEN $6 AND NOT enabled THEN 0 ELSE failures END,
         failing_since = CASE WHEN $6 AND NOT enabled THEN NULL ELSE failing_since END,
         updated_at = $8
       WHERE id = $1 RETURNING ${WEBHOOK_COLUMNS}`,
      [id, update.url ?? null, update.events === undefined ? null : JSON.stringify(update.events), update.description !== undefined,
        update.description ?? null, enabled, update.disabledReason ?? null, at])
    return rows[0] === undefined ? null : toWebhook(rows[0])
  }

  async deleteWebhook (id: string): Promise<boolean> {
    // The deliveries and their log go with it (ON DELETE CASCADE).
    const { rowCount } = await this.#db.query('DELETE FROM webhooks WHERE id = $1', [id])
    return (rowCount ?? 0) > 0
  }

  async rotateWebhookSecret (id: string, secret: string, previousUntil: Date, at: Date): Promise<WebhookRecord | null> {
    const { rows } = await this.#db.query<WebhookRow>(
      `UPDATE webhooks SET previous_secret = secret, previous_secret_until = $2, secret = $3, updated_at = $4
       WHERE id = $1 RETURNING ${WEBHOOK_COLUMNS}`, [id, previousUntil, secret, at])
    return rows[0] === undefined ? null : toWebhook(rows[0])
  }

  async enqueueWebhookDeliveries (at: Date, giveUpAt: Date, limit: number): Promise<EnqueueResult> {
    // Which subscriptions are behind the feed's head, in one read: an idle instance polls this often.
    const { rows: webhooks } = await this.#db.query<{ id: string, behind: boolean | null }>(
      `SELECT w.id, (w.feed_order, w.feed_id) < (h.position, h.id) AS behind
       FROM webhooks w LEFT JOIN (${HEAD_SQL}) h ON true WHERE w.enabled AND ${QUOTA_ACTIVE('$1')} ORDER BY w.id`, [at])
    let created = 0
    // One transaction per subscription: it holds only that subscription's lock, which another instance skips.
    for (const { id, behind } of webhooks) {
      if (behind !== true) continue
      created += await this.#db.transaction(async (client) => {
        const { rows: [webhook] } = await client.query<{ feed_order: bigint, feed_id: bigint, events: string }>(
          `SELECT w.feed_order, w.feed_id, w.events FROM webhooks w WHERE w.id = $1 AND w.enabled AND ${QUOTA_ACTIVE('$2')} FOR UPDATE OF w SKIP LOCKED`, [id, at])
        if (webhook === undefined) return 0
        // The feed's rows of the subscription's types after its position (listChanges' order), their deliveries created
        // in that order, and the position moved past the last of them, or, when fewer than $4 were due, to the head the
        // same statement saw (it saw every row up to there: positions are taken in commit order), so that rows of
        // other types are never looked at again and a subscription that took all is no longer behind.
        const { rows: [row] } = await client.query<{ n: bigint }>(
          `WITH changes AS (
             SELECT f.position, l.id FROM feed_positions f JOIN stock_ledger l ON l.txid = f.txid
             WHERE (f.position, l.id) > ($2::bigint, $3::bigint) AND coalesce(l.event, '${STOCK_CHANGED}') = ANY ($7::text[])
             ORDER BY f.position, l.id LIMIT $4
           ), inserted AS (
             INSERT INTO webhook_deliveries (webhook_id, change_id, feed_order, state, next_attempt_at, give_up_at, created_at)
             SELECT $1, id, position, 'pending', $5, $6, $5 FROM changes ORDER BY position, id
             ON CONFLICT (webhook_id, change_id) DO NOTHING RETURNING 1
           ), target AS (
             SELECT position, id FROM changes WHERE (SELECT count(*) FROM changes) = $4 ORDER BY position DESC, id DESC LIMIT 1
           ), moved AS (
             UPDATE webhooks w SET feed_order = last.position, feed_id = last.id
             FROM (SELECT position, id FROM target UNION ALL SELECT h.position, h.id FROM (${HEAD_SQL}) h
                   WHERE NOT EXISTS (SELECT 1 FROM target) AND h.id IS NOT NULL) last
             WHERE w.id = $1 AND (last.position, last.id) > (w.feed_order, w.feed_id)
           )
           SELECT count(*) AS n FROM inserted`,
          [id, webhook.feed_order, webhook.feed_id, limit, at, giveUpAt, JSON.parse(webhook.events) as string[]])
        return Number(row?.n ?? 0n)
      })
    }
    return { subscriptions: webhooks.length, created }
  }

  async claimWebhookDeliveries ({ owner, at, leaseUntil, limit, perSubscription, exclude }: ClaimRequest): Promise<ClaimedDelivery[]> {
    // Subscription by subscription (LATERAL: each its oldest due, through the index of its pending deliveries), so
    // that one backlog never crowds out the others and a disabled subscription's backlog is never read; rows another
    // instance holds are skipped.
    const { rows } = await this.#db.query<ClaimRow>(
      `WITH due AS (
         SELECT d.id, d.next_attempt_at FROM webhooks w CROSS JOIN LATERAL (
           SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
           WHERE d.webhook_id = w.id AND d.state = 'pending' AND d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until <= $1)
           ORDER BY d.next_attempt_at, d.id LIMIT $6 FOR UPDATE OF d SKIP LOCKED
         ) d
         WHERE w.enabled AND ${QUOTA_ACTIVE('$1')} AND NOT (w.id = ANY ($5::text[]))
         ORDER BY d.next_attempt_at, d.id LIMIT $4
       ), leased AS (
         UPDATE webhook_deliveries d SET lease_owner = $2, lease_until = $3 FROM due WHERE d.id = due.id RETURNING d.*
       )
       SELECT ${CLAIM_COLUMNS} FROM leased d JOIN webhooks w ON w.id = d.webhook_id JOIN stock_ledger l ON l.id = d.change_id
       ORDER BY d.next_attempt_at, d.id`, [at, owner, leaseUntil, limit, exclude, perSubscription])
    return rows.map((row) => toClaimed(row, at))
  }

  async releaseWebhookLeases (owner: string, deliveryIds: readonly bigint[]): Promise<void> {
    if (deliveryIds.length === 0) return
    await this.#db.query('UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL WHERE id = ANY ($1::bigint[]) AND lease_owner = $2',
      [deliveryIds, owner])
  }

  async recordWebhookAttempts (outcomes: readonly AttemptOutcome[]): Promise<FailureRun[]> {
    if (outcomes.length === 0) return []
    return await this.#db.transaction(async (client) => {
      // The subscriptions' rows first, in one order, then their deliveries': the order deleteWebhook takes them in (the
      // row, then its deliveries by cascade), so that a delete, or another instance recording, waits instead of
      // deadlocking.
      const { rows } = await client.query<{ id: string }>('SELECT id FROM webhooks WHERE id = ANY ($1::text[]) ORDER BY id FOR NO KEY UPDATE',
        [[...new Set(outcomes.map((outcome) => outcome.webhookId))]])
      const present = new Set(rows.map((row) => row.id))
      const runs: FailureRun[] = []
      for (const outcome of outcomes) runs.push(present.has(outcome.webhookId) ? await this.#record(client, outcome) : { failures: 0, failingSince: null })
      return runs
    })
  }

  async #record (client: pg.PoolClient, outcome: AttemptOutcome): Promise<FailureRun> {
    const { rows: [delivery] } = await client.query<{ attempts: number }>(
      `UPDATE webhook_deliveries SET attempts = attempts + 1,
         state = CASE WHEN state = 'delivered' OR lease_owner IS DISTINCT FROM $4 THEN state ELSE $2 END,
         next_attempt_at = CASE WHEN state = 'delivered' OR lease_owner IS DISTINCT FROM $4 THEN next_attempt_at ELSE $3::timestamptz END,
         lease_owner = CASE WHEN lease_owner = $4 THEN NULL ELSE lease_owner END,
         lease_until = CASE WHEN lease_owner = $4 THEN NULL ELSE lease_until END
       WHERE id = $1 AND webhook_id = $5 RETURNING attempts`, [outcome.deliveryId, outcome.state, outcome.nextAttemptAt, outcome.owner, outcome.webhookId])
    // Deleted meanwhile (with its subscription): nothing to record.
    if (delivery === undefined) return { failures: 0, failingSince: null }
    await client.query(
      'INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error, response, duration_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [outcome.deliveryId, delivery.attempts, outcome.at, outcome.status, outcome.error, outcome.response, Math.round(outcome.durationMs)])
    const { rows: [run] } = await client.query<{ failures: number, failing_since: Date | null }>(
      outcome.state === 'delivered'
        ? 'UPDATE webhooks SET failures = 0, failing_since = NULL WHERE id = $1 RETURNING failures, failing_since'
        : 'UPDATE webhooks SET failures = failures + 1, failing_since = coalesce(failing_since, $2) WHERE id = $1 RETURNING failures, failing_since',
      outcome.state === 'delivered' ? [outcome.webhookId] : [outcome.webhookId, outcome.at])
    return run === undefined ? { failures: 0, failingSince: null } : { failures: run.failures, failingSince: run.failing_since }
  }

  async #deliveries (rows: DeliveryRow[]): Promise<WebhookDelivery[]> {
    if (rows.length === 0) return []
    const { rows: attempts } = await this.#db.query<AttemptRow>(
      `SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts a WHERE a.delivery_id = ANY ($1::bigint[])`, [rows.map((row) => row.id)])
    return toDeliveries(rows, attempts)
  }

  async listWebhookDeliveries (webhookId: string, beforeId: bigint | null, limit: number): Promise<WebhookDelivery[]> {
    const { rows } = await this.#db.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.webhook_id = $1 AND ($2::bigint IS NULL OR d.id < $2)
       ORDER BY d.id DESC LIMIT $3`, [webhookId, beforeId, limit])
    return await this.#deliveries(rows)
  }

  async getWebhookDelivery (webhookId: string, deliveryId: bigint): Promise<WebhookDelivery | null> {
    const { rows } = await this.#db.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.webhook_id = $1 AND d.id = $2`, [webhookId, deliveryId])
    return (await this.#deliveries(rows))[0] ?? null
  }

  async retryWebhookDelivery (webhookId: string, deliveryId: bigint, at: Date, giveUpAt: Date): Promise<WebhookDelivery | null> {
    const { rows } = await this.#db.query<DeliveryRow>(
      `UPDATE webhook_deliveries d SET state = 'pending', next_attempt_at = $3, give_up_at = $4, lease_owner = NULL, lease_until = NULL
       WHERE d.webhook_id = $1 AND d.id = $2 RETURNING ${DELIVERY_COLUMNS}`, [webhookId, deliveryId, at, giveUpAt])
    return (await this.#deliveries(rows))[0] ?? null
  }

  async webhookBacklog (): Promise<WebhookBacklog[]> {
    const { rows } = await this.#db.query<{ id: string, pending: bigint, oldest: Date | null }>(
      `SELECT w.id, count(d.id) AS pending, min(d.created_at) AS oldest
       FROM webhooks w LEFT JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.state = 'pending' GROUP BY w.id ORDER BY w.id`)
    return rows.map((row) => ({ webhookId: row.id, pending: Number(row.pending), oldest: row.oldest }))
  }

  async purgeWebhookDeliveries (before: Date, limit: number): Promise<number> {
    const { rowCount: done } = await this.#db.query(
      `DELETE FROM webhook_deliveries d USING (
         SELECT id FROM webhook_deliveries WHERE state <> 'pending' AND created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ) old WHERE d.id = old.id`, [before, limit])
    if ((done ?? 0) >= limit) return done ?? 0
    // Then the backlogs parked by subscriptions that take no events (through the index of each one's pending deliveries).
    const { rowCount: parked } = await this.#db.query(
      `DELETE FROM webhook_deliveries d USING (
         SELECT d.id FROM webhooks w JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.state = 'pending'
         WHERE NOT (w.enabled AND ${QUOTA_ACTIVE('$1')}) AND d.created_at < $1 ORDER BY d.created_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED
       ) old WHERE d.id = old.id`, [before, limit - (done ?? 0)])
    return (done ?? 0) + (parked ?? 0)
  }

}
