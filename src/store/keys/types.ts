/**
 * API keys as the store keeps them: hashed (never the key itself), with their plan, scope, expiry, bans and the
 * quota that rotation carries over. Implemented by both stores; one contract suite (test/store/keys.contract.ts).
 */
import type { ApiKeyRecord, Ban, KeyScope } from '../../model.js'

export interface NewApiKey {
  id: string
  keyHash: string
  name: string | null
  plan: ApiKeyRecord['plan']
  perMinute: number | null
  perDay: number | null
  createdAt: Date
  /** Default: write (full access). */
  scope?: KeyScope
  /** Default: null (never expires). */
  expiresAt?: Date | null
  /** The quota id of the key a rotation replaces (windows, strikes and bans shared); default: the key's own. */
  quotaId?: string
}

/** How a rotation ended: done, or refused because the key is unknown, revoked or expired, or already replaced. */
export type RotationOutcome = 'rotated' | 'not_found' | 'inactive' | 'replaced'

export interface KeyReads {
  findApiKeyByHash (keyHash: string): Promise<ApiKeyRecord | null>
  listApiKeys (): Promise<ApiKeyRecord[]>
}

export interface KeyWrites {
  createApiKey (key: NewApiKey): Promise<void>
  /** Marks a key revoked; false when no key has this id. Revoking twice keeps the first time. */
  revokeApiKey (id: string, at: Date): Promise<boolean>
  /**
   * In one transaction: creates `replacement`, carrying over the ban the key `id` has then, and ends the key `id` at
   * `endsAt` (or at its own expiry, if sooner), recording which key replaced it. Refused, changing nothing, when no
   * key has this id, when it is revoked or expired at `replacement.createdAt`, or when it was already replaced.
   */
  rotateApiKey (id: string, replacement: NewApiKey & { quotaId: string }, endsAt: Date): Promise<RotationOutcome>
  /** Records a ban of a key and of every key sharing its quota; false when no key has this id. */
  banApiKey (id: string, ban: Ban): Promise<boolean>
  /** Ends the ban of a key and of every key sharing its quota at `at`, if in force then; false when no key has this id. */
  unbanApiKey (id: string, at: Date): Promise<boolean>
  /**
   * Moves a key's last-use time to `usedAt`, and its last deprecated use to `deprecatedAt` when given, never
   * backwards (instances record in any order).
   */
  recordKeyUse (id: string, usedAt: Date, deprecatedAt: Date | null): Promise<void>
}

export type KeyStore = KeyReads & KeyWrites

/**
 * What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it, except the
 * record of a key's last use, which is skipped: it is a record of traffic, not a change anyone asked for, and failing
 * it would only log a warning per key each minute. A read-only instance records no last use.
 */
export const KEY_WRITES = {
  createApiKey: 'refuse',
  revokeApiKey: 'refuse',
  rotateApiKey: 'refuse',
  banApiKey: 'refuse',
  unbanApiKey: 'refuse',
  recordKeyUse: 'skip'
} as const satisfies Record<keyof KeyWrites, 'refuse' | 'skip'>
