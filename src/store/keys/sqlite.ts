/** API keys on SQLite. */
import type { ApiKeyRecord, Ban } from '../../model.js'
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { KEY_COLUMNS, toKey, type KeyRow } from './rows.js'
import type { KeyStore, NewApiKey, RotationOutcome } from './types.js'

/**
 * The keys sharing the quota of the key whose id is bound (twice): the quota's first key and those rotation made. Two
 * indexed lookups (the primary key, api_keys_quota), not a scan of every key.
 */
const SAME_QUOTA_AS = `id = (SELECT coalesce(quota_id, id) FROM api_keys WHERE id = ?)
  OR quota_id = (SELECT coalesce(quota_id, id) FROM api_keys WHERE id = ?)`

export class SqliteKeys implements KeyStore {
  readonly #db: SqliteDatabase

  constructor (db: SqliteDatabase) {
    this.#db = db
  }

  async createApiKey (key: NewApiKey): Promise<void> {
    return guard(() => {
      this.#insertKey(key)
    })
  }

  #insertKey (key: NewApiKey): void {
    this.#db.prepare(
      `INSERT INTO api_keys (id, key_hash, name, plan, per_minute, per_day, created_at, scope, expires_at, quota_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
    ).run(key.id, key.keyHash, key.name, key.plan, key.perMinute, key.perDay, key.createdAt.toISOString(), key.scope ?? 'write',
      key.expiresAt?.toISOString() ?? null, key.quotaId === undefined || key.quotaId === key.id ? null : key.quotaId)
  }

  async rotateApiKey (id: string, replacement: NewApiKey & { quotaId: string }, endsAt: Date): Promise<RotationOutcome> {
    const at = replacement.createdAt.toISOString()
    const rotate = this.#db.connection.transaction((): RotationOutcome => {
      const old = this.#db.prepare('SELECT revoked_at, expires_at, replaced_by FROM api_keys WHERE id = ?').get(id) as
        { revoked_at: string | null, expires_at: string | null, replaced_by: string | null } | undefined
      if (old === undefined) return 'not_found'
      if (old.replaced_by !== null) return 'replaced'
      if (old.revoked_at !== null || (old.expires_at !== null && old.expires_at <= at)) return 'inactive'
      this.#insertKey(replacement)
      // The ban as it stands now, inside the write lock (one recorded since the caller read the key is not lost).
      this.#db.prepare(`UPDATE api_keys SET (banned_at, banned_until, ban_seconds) =
        (SELECT banned_at, banned_until, ban_seconds FROM api_keys WHERE id = ?) WHERE id = ?`).run(id, replacement.id)
      // ISO-8601 UTC strings of one format compare in time order: the sooner of the two ends.
      this.#db.prepare('UPDATE api_keys SET expires_at = min(coalesce(expires_at, ?), ?), replaced_by = ? WHERE id = ?')
        .run(endsAt.toISOString(), endsAt.toISOString(), replacement.id, id)
      return 'rotated'
    })
    return guard(() => rotate.immediate())
  }

  async recordKeyUse (id: string, usedAt: Date, deprecatedAt: Date | null): Promise<void> {
    guard(() => this.#db.prepare(`UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, ''), ?),
      last_deprecated_use_at = CASE WHEN ? IS NULL THEN last_deprecated_use_at ELSE max(coalesce(last_deprecated_use_at, ''), ?) END WHERE id = ?`)
      .run(usedAt.toISOString(), deprecatedAt?.toISOString() ?? null, deprecatedAt?.toISOString() ?? null, id))
  }

  async findApiKeyByHash (keyHash: string): Promise<ApiKeyRecord | null> {
    return guard(() => {
      const row = this.#db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = ?`).get(keyHash) as KeyRow | undefined
      return row === undefined ? null : toKey(row)
    })
  }

  async listApiKeys (): Promise<ApiKeyRecord[]> {
    return guard(() => (this.#db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`).all() as KeyRow[]).map(toKey))
  }

  async revokeApiKey (id: string, at: Date): Promise<boolean> {
    return guard(() => this.#db.prepare('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?').run(at.toISOString(), id).changes > 0)
  }

  async banApiKey (id: string, ban: Ban): Promise<boolean> {
    return guard(() => this.#db.prepare(`UPDATE api_keys SET banned_at = ?, banned_until = ?, ban_seconds = ? WHERE ${SAME_QUOTA_AS}`)
      .run(ban.since.toISOString(), ban.until.toISOString(), ban.seconds, id, id).changes > 0)
  }

  async unbanApiKey (id: string, at: Date): Promise<boolean> {
    return guard(() => {
      const found = this.#db.prepare('SELECT 1 FROM api_keys WHERE id = ?').get(id) !== undefined
      // ISO-8601 UTC strings of one format compare in time order.
      this.#db.prepare(`UPDATE api_keys SET banned_until = ? WHERE banned_until > ? AND (${SAME_QUOTA_AS})`)
        .run(at.toISOString(), at.toISOString(), id, id)
      return found
    })
  }
}
