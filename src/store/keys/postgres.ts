/** API keys on PostgreSQL. */
import type { ApiKeyRecord, Ban } from '../../model.js'
import type { PostgresDatabase } from '../postgres/database.js'
import { KEY_COLUMNS, toKey, type KeyRow } from './rows.js'
import type { KeyStore, NewApiKey, RotationOutcome } from './types.js'

const KEY_INSERT_SQL = `INSERT INTO api_keys (id, key_hash, name, plan, per_minute, per_day, created_at, scope, expires_at, quota_id)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

/**
 * The keys sharing the quota of the key with id `param`: the quota's first key (its id is the quota id) and those
 * rotation made (quota_id). Two indexed lookups (the primary key, api_keys_quota), not a scan of every key.
 */
const SAME_QUOTA_AS = (param: string): string => {
  const quota = `(SELECT coalesce(quota_id, id) FROM api_keys WHERE id = ${param})`
  return `id = ${quota} OR quota_id = ${quota}`
}

/** The values of KEY_INSERT_SQL: a key of its own quota stores none (its id is its quota id). */
function keyValues (key: NewApiKey): unknown[] {
  return [key.id, key.keyHash, key.name, key.plan, key.perMinute, key.perDay, key.createdAt, key.scope ?? 'write', key.expiresAt ?? null,
    key.quotaId === undefined || key.quotaId === key.id ? null : key.quotaId]
}

export class PostgresKeys implements KeyStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  async createApiKey (key: NewApiKey): Promise<void> {
    await this.#db.query(KEY_INSERT_SQL, keyValues(key))
  }

  async rotateApiKey (id: string, replacement: NewApiKey & { quotaId: string }, endsAt: Date): Promise<RotationOutcome> {
    return await this.#db.transaction(async (client): Promise<RotationOutcome> => {
      // The row lock makes two rotations of one key take turns: the second sees replaced_by set.
      const { rows } = await client.query<{ inactive: boolean, replaced: boolean }>(
        `SELECT revoked_at IS NOT NULL OR coalesce(expires_at <= $2, false) AS inactive, replaced_by IS NOT NULL AS replaced
         FROM api_keys WHERE id = $1 FOR UPDATE`, [id, replacement.createdAt])
      const old = rows[0]
      if (old === undefined) return 'not_found'
      if (old.replaced) return 'replaced'
      if (old.inactive) return 'inactive'
      await client.query(KEY_INSERT_SQL, keyValues(replacement))
      // The ban as it stands now, under the row lock (one recorded since the caller read the key is not lost).
      await client.query(`UPDATE api_keys SET (banned_at, banned_until, ban_seconds) =
        (SELECT banned_at, banned_until, ban_seconds FROM api_keys WHERE id = $1) WHERE id = $2`, [id, replacement.id])
      await client.query('UPDATE api_keys SET expires_at = least(expires_at, $1), replaced_by = $2 WHERE id = $3', [endsAt, replacement.id, id])
      return 'rotated'
    })
  }

  async recordKeyUse (id: string, usedAt: Date, deprecatedAt: Date | null): Promise<void> {
    await this.#db.query(`UPDATE api_keys SET last_used_at = greatest(last_used_at, $1),
      last_deprecated_use_at = greatest(last_deprecated_use_at, $2) WHERE id = $3`, [usedAt, deprecatedAt, id])
  }

  async findApiKeyByHash (keyHash: string): Promise<ApiKeyRecord | null> {
    const { rows } = await this.#db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = $1`, [keyHash])
    return rows[0] === undefined ? null : toKey(rows[0])
  }

  async listApiKeys (): Promise<ApiKeyRecord[]> {
    const { rows } = await this.#db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`)
    return rows.map(toKey)
  }

  async revokeApiKey (id: string, at: Date): Promise<boolean> {
    const { rowCount } = await this.#db.query('UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2', [at, id])
    return (rowCount ?? 0) > 0
  }

  async banApiKey (id: string, ban: Ban): Promise<boolean> {
    const { rowCount } = await this.#db.query(
      `UPDATE api_keys SET banned_at = $1, banned_until = $2, ban_seconds = $3 WHERE ${SAME_QUOTA_AS('$4')}`, [ban.since, ban.until, ban.seconds, id])
    return (rowCount ?? 0) > 0
  }

  async unbanApiKey (id: string, at: Date): Promise<boolean> {
    const { rows } = await this.#db.query<{ found: boolean }>(
      `WITH lifted AS (UPDATE api_keys SET banned_until = $1 WHERE banned_until > $1 AND (${SAME_QUOTA_AS('$2')}) RETURNING id)
       SELECT EXISTS (SELECT 1 FROM api_keys WHERE id = $2) AS found`, [at, id])
    return rows[0]?.found === true
  }
}
