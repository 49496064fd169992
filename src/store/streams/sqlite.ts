/** The change streams open now, on SQLite (migration 10's event_streams). */
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import type { StreamStore } from './types.js'

const iso = (at: Date): string => at.toISOString()

export class SqliteStreams implements StreamStore {
  readonly #db: SqliteDatabase

  constructor (db: SqliteDatabase) {
    this.#db = db
  }

  async openEventStream (id: string, quotaId: string, keyId: string, expiresAt: Date, at: Date, max: number): Promise<boolean> {
    return guard(() => this.#db.connection.transaction((): boolean => {
      this.#db.prepare('DELETE FROM event_streams WHERE quota_id = ? AND expires_at <= ?').run(quotaId, iso(at))
      const { n } = this.#db.prepare('SELECT count(*) AS n FROM event_streams WHERE quota_id = ?').get(quotaId) as { n: bigint }
      if (Number(n) >= max) return false
      this.#db.prepare('INSERT INTO event_streams (id, quota_id, key_id, expires_at) VALUES (?, ?, ?, ?)').run(id, quotaId, keyId, iso(expiresAt))
      return true
    }).immediate())
  }

  async renewEventStreams (ids: readonly string[], expiresAt: Date): Promise<void> {
    if (ids.length === 0) return
    guard(() => this.#db.prepare('UPDATE event_streams SET expires_at = ? WHERE id IN (SELECT value FROM json_each(?))').run(iso(expiresAt), JSON.stringify(ids)))
  }

  async closeEventStream (id: string): Promise<void> {
    guard(() => this.#db.prepare('DELETE FROM event_streams WHERE id = ?').run(id))
  }
}
