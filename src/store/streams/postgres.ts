/** The change streams open now, on PostgreSQL (migration 10's event_streams). */
import type { PostgresDatabase } from '../postgres/database.js'
import type { StreamStore } from './types.js'

/**
 * Serializes the openings of one quota's streams (the count and the insert): an advisory lock of two int4 keys, this
 * one and the quota's hash. (726_500 is the webhook subscriptions' own: ../webhooks/postgres.ts.)
 */
const STREAM_QUOTA_LOCK = 726_501

export class PostgresStreams implements StreamStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  async openEventStream (id: string, quotaId: string, keyId: string, expiresAt: Date, at: Date, max: number): Promise<boolean> {
    return await this.#db.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [STREAM_QUOTA_LOCK, quotaId])
      await client.query('DELETE FROM event_streams WHERE quota_id = $1 AND expires_at <= $2', [quotaId, at])
      const { rows: [count] } = await client.query<{ n: bigint }>('SELECT count(*) AS n FROM event_streams WHERE quota_id = $1', [quotaId])
      if (Number(count?.n ?? 0n) >= max) return false
      await client.query('INSERT INTO event_streams (id, quota_id, key_id, expires_at) VALUES ($1, $2, $3, $4)', [id, quotaId, keyId, expiresAt])
      return true
    })
  }

  async renewEventStreams (ids: readonly string[], expiresAt: Date): Promise<void> {
    if (ids.length === 0) return
    await this.#db.query('UPDATE event_streams SET expires_at = $2 WHERE id = ANY ($1::text[])', [ids, expiresAt])
  }

  async closeEventStream (id: string): Promise<void> {
    await this.#db.query('DELETE FROM event_streams WHERE id = $1', [id])
  }
}
