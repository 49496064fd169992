/** Row codecs of api_keys, shared by both stores (../rows.ts: how the drivers differ). */
import type { ApiKeyRecord, KeyScope, Plan } from '../../model.js'
import { num, numOrNull, time, timeOrNull, type Int, type Time } from '../rows.js'

export interface KeyRow {
  id: string, name: string | null, plan: Plan, per_minute: Int | null, per_day: Int | null,
  created_at: Time, revoked_at: Time | null, banned_at: Time | null, banned_until: Time | null, ban_seconds: Int | null,
  scope: KeyScope, expires_at: Time | null, quota_id: string | null, replaced_by: string | null, last_used_at: Time | null,
  last_deprecated_use_at: Time | null
}

export const KEY_COLUMNS = 'id, name, plan, per_minute, per_day, created_at, revoked_at, banned_at, banned_until, ban_seconds, scope, expires_at, ' +
  'quota_id, replaced_by, last_used_at, last_deprecated_use_at'

export const toKey = (row: KeyRow): ApiKeyRecord => ({
  id: row.id,
  name: row.name,
  plan: row.plan,
  perMinute: numOrNull(row.per_minute),
  perDay: numOrNull(row.per_day),
  createdAt: time(row.created_at),
  revokedAt: timeOrNull(row.revoked_at),
  ban: row.banned_at === null || row.banned_until === null || row.ban_seconds === null
    ? null
    : { since: time(row.banned_at), until: time(row.banned_until), seconds: num(row.ban_seconds) },
  scope: row.scope,
  expiresAt: timeOrNull(row.expires_at),
  quotaId: row.quota_id ?? row.id,
  replacedBy: row.replaced_by,
  lastUsedAt: timeOrNull(row.last_used_at),
  lastDeprecatedUseAt: timeOrNull(row.last_deprecated_use_at)
})
