import { createHash, randomBytes } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import type { Environment } from '../config.js'
import type { Store } from '../store/types.js'
import type { ApiKeyRecord, Plan } from './model.js'

/** Key prefixes tell production keys from staging keys at a glance (and to secret scanners). */
export const KEY_PREFIXES: Record<Environment, string> = { production: 'psk_live_', staging: 'psk_test_' }

/** Keys are looked up by their SHA-256; the key itself is never stored. */
export function hashKey (key: string): string {
  return createHash('sha256').update(key).digest('hex')
}

export interface CreateKeyInput {
  plan: Plan
  name: string | null
  perMinute: number | null
  perDay: number | null
}

export class KeyInputError extends Error {}

/** Checks the plan/limit combination: enterprise keys need both limits, the others take theirs from the plan. */
export function checkKeyInput (input: CreateKeyInput): void {
  const hasLimits = input.perMinute !== null || input.perDay !== null
  if (input.plan === 'enterprise') {
    if (input.perMinute === null || input.perDay === null) {
      throw new KeyInputError('enterprise keys need both --per-minute and --per-day')
    }
    if (input.perMinute > input.perDay) throw new KeyInputError('--per-minute must not exceed --per-day')
  } else if (hasLimits) {
    throw new KeyInputError(`--per-minute and --per-day apply to enterprise keys only; the ${input.plan} plan sets its own limits`)
  }
  if (input.name !== null && input.name.length > 200) throw new KeyInputError('--name must be at most 200 characters')
}

/** Creates a key: 256 random bits, base64url, behind the environment's prefix. Returns the key once. */
export async function createKey (
  store: Store, environment: Environment, input: CreateKeyInput, now: Date = new Date()
): Promise<{ record: ApiKeyRecord, key: string }> {
  checkKeyInput(input)
  const key = KEY_PREFIXES[environment] + randomBytes(32).toString('base64url')
  const record: ApiKeyRecord = {
    id: 'key_' + randomBytes(8).toString('hex'),
    name: input.name,
    plan: input.plan,
    perMinute: input.perMinute,
    perDay: input.perDay,
    createdAt: now,
    revokedAt: null,
    ban: null
  }
  await store.createApiKey({ ...record, keyHash: hashKey(key) })
  return { record, key }
}

// A bearer token is at most this long; longer ones are rejected without hashing.
const MAX_TOKEN_LENGTH = 256

/**
 * Resolves bearer tokens to active keys. Answers (found, unknown or revoked) are cached for `ttlMs`, so a
 * request costs no store round trip while its key is warm, and a revocation takes effect within `ttlMs`.
 * The cache is bounded; concurrent misses for one token share one store query.
 */
export class Authenticator {
  readonly #cache: LRUCache<string, ApiKeyRecord | false>

  constructor (store: Store, ttlMs: number, maxEntries = 100_000) {
    this.#cache = new LRUCache<string, ApiKeyRecord | false>({
      max: maxEntries,
      ttl: Math.max(ttlMs, 1),
      // Keys on the cache are hashes, so a memory dump of the cache does not reveal keys either.
      fetchMethod: async (keyHash) => (await store.findApiKeyByHash(keyHash)) ?? false
    })
  }

  /** The active key for a token, or null when the token is unknown or revoked. */
  async authenticate (token: string): Promise<ApiKeyRecord | null> {
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) return null
    const hash = hashKey(token)
    // get() first: a hit costs no promise machinery; fetch() only on a miss (and shares concurrent misses).
    const record = this.#cache.get(hash) ?? await this.#cache.fetch(hash)
    return record === undefined || record === false || record.revokedAt !== null ? null : record
  }

  /** Drops a token's cached answer, so the next request reads the key afresh (after a ban, say). */
  forget (token: string): void {
    this.#cache.delete(hashKey(token))
  }
}
