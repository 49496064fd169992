/**
 * The webhook tables of the embedded store (migration 10). One connection, synchronous: each method is one
 * transaction that nothing else interleaves with in this process; other processes on the file (the CLI, --workers)
 * wait for the write lock (busy_timeout).
 */
import { STOCK_CHANGED } from '../../model.js'
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { feedHead } from '../sqlite/sql.js'
import {
  ATTEMPT_COLUMNS, CLAIM_COLUMNS, DELIVERY_COLUMNS, QUOTA_ACTIVE, toClaimed, toDeliveries, toWebhook, WEBHOOK_COLUMNS,
  type AttemptRow, type ClaimRow, type DeliveryRow, type WebhookRow
} from './rows.js'
import type {
  AttemptOutcome, ClaimedDelivery, ClaimRequest, EnqueueResult, FailureRun, NewWebhook, WebhookBacklog, WebhookDelivery, WebhookRecord, WebhookStore, WebhookUpdate
} from './types.js'

const iso = (at: Date): string => at.toISOString()
/** Ids as a JSON array for json_each, exact for every int64 (a JSON number SQLite reads as an integer). */
const idList = (ids: readonly bigint[]): string => `[${ids.join(',')}]`

export class SqliteWebhooks implements WebhookStore {
  readonly #db: SqliteDatabase

  constructor (db: SqliteDatabase) {
    this.#db = db
  }

  #get (id: string): WebhookRecord | null {
    const row = this.#db.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = ?`).get(id) as WebhookRow | undefined
    return row === undefined ? null : toWebhook(row)
  }

  async createWebhook (webhook: NewWebhook, maxPerQuota: number): Promise<WebhookRecord | 'limit'> {
    return guard(() => {
      return this.#db.connection.transaction((): WebhookRecord | 'limit' => {
        const { n } = this.#db.prepare('SELECT count(*) AS n FROM webhooks WHERE quota_id = ?').get(webhook.quotaId) as { n: bigint }
        if (Number(n) >= maxPerQuota) return 'limit'
        const head = feedHead((sql) => this.#db.prepare(sql))
        this.#db.prepare(`INSERT INTO webhooks (id, quota_id, url, events, description, secret, feed_order, feed_id, created_at, updated_at)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(webhook.id, webhook.quotaId, webhook.url, JSON.stringify(webhook.events), webhook.description,
          webhook.secret, head?.order ?? 0n, head?.id ?? 0n, iso(webhook.createdAt), iso(webhook.createdAt))
        return this.#get(webhook.id) as WebhookRecord
      }).immediate()
    })
  }

  async listWebhooks (quotaId: string | null): Promise<WebhookRecord[]> {
    return guard(() => {
      const rows = (quotaId === null
        ? this.#db.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks ORDER BY created_at, id`).all()
        : this.#db.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE quota_id = ? ORDER BY created_at, id`).all(quotaId)) as WebhookRow[]
      return rows.map(toWebhook)
    })
  }

  async getWebhook (id: string): Promise<WebhookRecord | null> {
    return guard(() => {
      return this.#get(id)
    })
  }

  async updateWebhook (id: string, update: WebhookUpdate, at: Date): Promise<WebhookRecord | null> {
    return guard(() => {
      return this.#db.connection.transaction((): WebhookRecord | null => {
        const current = this.#get(id)
        if (current === null) return null
        const enabled = update.enabled ?? current.enabled
        const enabling = enabled && !current.enabled
        this.#db.prepare(`UPDATE webhooks SET url = ?, events = ?, description = ?, enabled = ?, disabled_reason = ?, updated_at = ?,
          failures = CASE WHEN ? THEN 0 ELSE failures END, failing_since = CASE WHEN ? THEN NULL ELSE failing_since END WHERE id = ?`)
          .run(update.url ?? current.url, JSON.stringify(update.events ?? current.events),
            update.description === undefined ? current.description : update.description, enabled ? 1 : 0,
            enabled ? null : (update.enabled === false ? update.disabledReason ?? null : current.disabledReason), iso(at),
            enabling ? 1 : 0, enabling ? 1 : 0, id)
        return this.#get(id)
      }).immediate()
    })
  }

  async deleteWebhook (id: string): Promise<boolean> {
    return guard(() => {
      return this.#db.connection.transaction((): boolean => {
        this.#db.prepare('DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE webhook_id = ?)').run(id)
        this.#db.prepare('DELETE FROM webhook_deliveries WHERE webhook_id = ?').run(id)
        return this.#db.prepare('DELETE FROM webhooks WHERE id = ?').run(id).changes > 0
      }).immediate()
    })
  }

  async rotateWebhookSecret (id: string, secret: string, previousUntil: Date, at: Date): Promise<WebhookRecord | null> {
    return guard(() => {
      return this.#db.connection.transaction((): WebhookRecord | null => {
        const changed = this.#db.prepare(`UPDATE webhooks SET previous_secret = secret, previous_secret_until = ?, secret = ?, updated_at = ? WHERE id = ?`)
          .run(iso(previousUntil), secret, iso(at), id).changes
        return changed === 0 ? null : this.#get(id)
      }).immediate()
    })
  }

  async enqueueWebhookDeliveries (at: Date, giveUpAt: Date, limit: number): Promise<EnqueueResult> {
    return guard(() => {
      // A read first: an idle instance polls this often, and must not take the write lock each time.
      const active = this.#db.prepare(`SELECT w.feed_id < coalesce((SELECT max(id) FROM stock_ledger), 0) AS behind FROM webhooks w
        WHERE w.enabled = 1 AND ${QUOTA_ACTIVE('?')}`).all(iso(at)) as Array<{ behind: bigint }>
      if (!active.some((row) => Number(row.behind) === 1)) return { subscriptions: active.length, created: 0 }
      const created = this.#db.connection.transaction((): number => {
        const webhooks = this.#db.prepare(`SELECT w.id, w.feed_id, w.events FROM webhooks w WHERE w.enabled = 1 AND ${QUOTA_ACTIVE('?')}`)
          .all(iso(at)) as Array<{ id: string, feed_id: bigint, events: string }>
        // Under the write lock: no row commits meanwhile, so the head is where a subscription stands once it took all.
        const head = (this.#db.prepare('SELECT coalesce(max(id), 0) AS id FROM stock_ledger').get() as { id: bigint }).id
        let count = 0
        for (const webhook of webhooks) {
          // Only the rows of the subscription's types (a stock change's is inventory.changed: event null).
          const changes = this.#db.prepare(`SELECT id FROM stock_ledger WHERE id > ? AND coalesce(event, '${STOCK_CHANGED}') IN (SELECT value FROM json_each(?))
            ORDER BY id LIMIT ?`).all(webhook.feed_id, webhook.events, limit) as Array<{ id: bigint }>
          const insert = this.#db.prepare(`INSERT INTO webhook_deliveries (webhook_id, change_id, feed_order, state, next_attempt_at, give_up_at, created_at)
            VALUES (?, ?, 0, 'pending', ?, ?, ?) ON CONFLICT (webhook_id, change_id) DO NOTHING`)
          for (const change of changes) count += insert.run(webhook.id, change.id, iso(at), iso(giveUpAt), iso(at)).changes
          // Past the last delivery made, or, when fewer than `limit` were due, past every row there is: rows of other
          // types are never looked at again, and a subscription that took all is no longer behind.
          const moved = changes.length === limit ? (changes.at(-1) as { id: bigint }).id : head
          if (moved > webhook.feed_id) this.#db.prepare('UPDATE webhooks SET feed_id = ? WHERE id = ?').run(moved, webhook.id)
        }
        return count
      }).immediate()
      return { subscriptions: active.length, created }
    })
  }

  async claimWebhookDeliveries ({ owner, at, leaseUntil, limit, perSubscription, exclude }: ClaimRequest): Promise<ClaimedDelivery[]> {
    return guard(() => {
      const now = iso(at)
      // Reads first, subscription by subscription (each its oldest due, through the index of its pending deliveries): an
      // idle poll takes no write lock, and a disabled subscription's backlog is never read.
      const subscriptions = this.#db.prepare(`SELECT w.id FROM webhooks w WHERE w.enabled = 1 AND ${QUOTA_ACTIVE('?')}
        AND w.id NOT IN (SELECT value FROM json_each(?))`).all(now, JSON.stringify(exclude)) as Array<{ id: string }>
      if (subscriptions.length === 0) return []
      const due = this.#db.prepare(`SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.webhook_id = ? AND d.state = 'pending' AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?)
        ORDER BY d.next_attempt_at, d.id LIMIT ?`)
      const candidates = subscriptions.flatMap(({ id }) => due.all(id, now, now, perSubscription) as Array<{ id: bigint, next_attempt_at: string }>)
      if (candidates.length === 0) return []
      candidates.sort((a, b) => a.next_attempt_at < b.next_attempt_at ? -1 : a.next_attempt_at > b.next_attempt_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
      const chosen = candidates.slice(0, limit).map((row) => row.id)
      return this.#db.connection.transaction((): ClaimedDelivery[] => {
        // Under the write lock, each lease only where the delivery is still free (another process may have taken it).
        const lease = this.#db.prepare(`UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ?
          WHERE id = ? AND state = 'pending' AND (lease_until IS NULL OR lease_until <= ?)`)
        const leased = chosen.filter((id) => lease.run(owner, iso(leaseUntil), id, now).changes > 0)
        if (leased.length === 0) return []
        const rows = this.#db.prepare(`SELECT ${CLAIM_COLUMNS}
          FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN stock_ledger l ON l.id = d.change_id
          WHERE d.id IN (SELECT value FROM json_each(?)) ORDER BY d.next_attempt_at, d.id`).all(idList(leased)) as ClaimRow[]
        return rows.map((row) => toClaimed(row, at))
      }).immediate()
    })
  }

  async releaseWebhookLeases (owner: string, deliveryIds: readonly bigint[]): Promise<void> {
    return guard(() => {
      this.#db.connection.transaction(() => {
        const release = this.#db.prepare('UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?')
        for (const id of deliveryIds) release.run(id, owner)
      }).immediate()
    })
  }

  async recordWebhookAttempts (outcomes: readonly AttemptOutcome[]): Promise<FailureRun[]> {
    return guard(() => {
      if (outcomes.length === 0) return []
      return this.#db.connection.transaction((): FailureRun[] => outcomes.map((outcome) => this.#record(outcome))).immediate()
    })
  }

  #record (outcome: AttemptOutcome): FailureRun {
    const row = this.#db.prepare(`UPDATE webhook_deliveries SET attempts = attempts + 1,
        state = CASE WHEN state = 'delivered' OR lease_owner IS NOT ? THEN state ELSE ? END,
        next_attempt_at = CASE WHEN state = 'delivered' OR lease_owner IS NOT ? THEN next_attempt_at ELSE ? END,
        lease_owner = CASE WHEN lease_owner = ? THEN NULL ELSE lease_owner END,
        lease_until = CASE WHEN lease_owner = ? THEN NULL ELSE lease_until END
      WHERE id = ? AND webhook_id = ? RETURNING attempts`).get(outcome.owner, outcome.state, outcome.owner,
      outcome.nextAttemptAt === null ? null : iso(outcome.nextAttemptAt), outcome.owner, outcome.owner, outcome.deliveryId, outcome.webhookId) as { attempts: bigint } | undefined
    // Deleted meanwhile (with its subscription; its id may since have been taken by another subscription's delivery):
    // nothing to record.
    if (row === undefined) return { failures: 0, failingSince: null }
    this.#db.prepare(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error, response, duration_ms) VALUES (?, ?, ?, ?, ?, ?, ?)`)
      .run(outcome.deliveryId, row.attempts, iso(outcome.at), outcome.status, outcome.error, outcome.response, Math.round(outcome.durationMs))
    const run = (outcome.state === 'delivered'
      ? this.#db.prepare('UPDATE webhooks SET failures = 0, failing_since = NULL WHERE id = ? RETURNING failures, failing_since').get(outcome.webhookId)
      : this.#db.prepare('UPDATE webhooks SET failures = failures + 1, failing_since = coalesce(failing_since, ?) WHERE id = ? RETURNING failures, failing_since')
        .get(iso(outcome.at), outcome.webhookId)) as { failures: bigint, failing_since: string | null } | undefined
    return run === undefined ? { failures: 0, failingSince: null } : { failures: Number(run.failures), failingSince: run.failing_since === null ? null : new Date(run.failing_since) }
  }

  #deliveries (rows: DeliveryRow[]): WebhookDelivery[] {
    if (rows.length === 0) return []
    const attempts = this.#db.prepare(`SELECT ${ATTEMPT_COLUMNS} FROM webhook_attempts a WHERE a.delivery_id IN (SELECT value FROM json_each(?))`)
      .all(idList(rows.map((row) => row.id))) as AttemptRow[]
    return toDeliveries(rows, attempts)
  }

  async listWebhookDeliveries (webhookId: string, beforeId: bigint | null, limit: number): Promise<WebhookDelivery[]> {
    return guard(() => {
      const rows = this.#db.prepare(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.webhook_id = ? AND (? IS NULL OR d.id < ?)
        ORDER BY d.id DESC LIMIT ?`).all(webhookId, beforeId, beforeId, limit) as DeliveryRow[]
      return this.#deliveries(rows)
    })
  }

  async getWebhookDelivery (webhookId: string, deliveryId: bigint): Promise<WebhookDelivery | null> {
    return guard(() => {
      return this.#delivery(webhookId, deliveryId)
    })
  }

  #delivery (webhookId: string, deliveryId: bigint): WebhookDelivery | null {
    const rows = this.#db.prepare(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.webhook_id = ? AND d.id = ?`).all(webhookId, deliveryId) as DeliveryRow[]
    return this.#deliveries(rows)[0] ?? null
  }

  async retryWebhookDelivery (webhookId: string, deliveryId: bigint, at: Date, giveUpAt: Date): Promise<WebhookDelivery | null> {
    return guard(() => {
      const changed = this.#db.prepare(`UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = ?, give_up_at = ?, lease_owner = NULL, lease_until = NULL
        WHERE webhook_id = ? AND id = ?`).run(iso(at), iso(giveUpAt), webhookId, deliveryId).changes
      return changed === 0 ? null : this.#delivery(webhookId, deliveryId)
    })
  }

  async webhookBacklog (): Promise<WebhookBacklog[]> {
    return guard(() => {
      const rows = this.#db.prepare(`SELECT w.id, count(d.id) AS pending, min(d.created_at) AS oldest
        FROM webhooks w LEFT JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.state = 'pending' GROUP BY w.id ORDER BY w.id`)
        .all() as Array<{ id: string, pending: bigint, oldest: string | null }>
      return rows.map((row) => ({ webhookId: row.id, pending: Number(row.pending), oldest: row.oldest === null ? null : new Date(row.oldest) }))
    })
  }

  async purgeWebhookDeliveries (before: Date, limit: number): Promise<number> {
    return guard(() => {
      return this.#db.connection.transaction((): number => {
        const ids = (this.#db.prepare(`SELECT id FROM webhook_deliveries WHERE state <> 'pending' AND created_at < ? ORDER BY created_at LIMIT ?`)
          .all(iso(before), limit) as Array<{ id: bigint }>).map((row) => row.id)
        // Then the backlogs parked by subscriptions that take no events (through the index of each one's pending deliveries).
        if (ids.length < limit) {
          ids.push(...(this.#db.prepare(`SELECT d.id FROM webhooks w JOIN webhook_deliveries d ON d.webhook_id = w.id AND d.state = 'pending'
            WHERE NOT (w.enabled = 1 AND ${QUOTA_ACTIVE('?')}) AND d.created_at < ? ORDER BY d.created_at LIMIT ?`)
            .all(iso(before), iso(before), limit - ids.length) as Array<{ id: bigint }>).map((row) => row.id))
        }
        if (ids.length === 0) return 0
        this.#db.prepare('DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT value FROM json_each(?))').run(idList(ids))
        return this.#db.prepare('DELETE FROM webhook_deliveries WHERE id IN (SELECT value FROM json_each(?))').run(idList(ids)).changes
      }).immediate()
    })
  }
}
