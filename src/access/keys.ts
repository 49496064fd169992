/**
 * API keys: issuing, revoking, and lifting bans. The operator CLI goes through these functions, the server
 * through the gatekeeper (./admission.ts), which reads the same records.
 */
import { createHash, randomBytes } from 'node:crypto'
import type { Environment } from '../config.js'
import type { ApiKeyRecord, Plan } from '../domain/model.js'
import { isSafeText, SAFE_TEXT_RULE } from '../domain/text.js'
import type { Store } from '../store/types.js'

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

const MAX_NAME_LENGTH = 200

/**
 * Checks the plan/limit combination (enterprise keys need both limits, the others take theirs from the plan)
 * and the name, which `keys list` prints on a terminal.
 */
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
  if (input.name !== null) {
    if (input.name.length > MAX_NAME_LENGTH) throw new KeyInputError(`--name must be at most ${MAX_NAME_LENGTH} characters`)
    if (!isSafeText(input.name)) throw new KeyInputError(`--name must hold ${SAFE_TEXT_RULE}`)
  }
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

/**
 * Revokes a key; false when no key has this id. Servers refuse it once their cached lookup expires (the
 * gatekeeper's authCacheTtlMs).
 */
export function revokeKey (store: Store, id: string, now: Date = new Date()): Promise<boolean> {
  return store.revokeApiKey(id, now)
}

/**
 * Lifts a key's ban (a ban already over stays as it is, for the doubling of repeat bans); false when no key has
 * this id. Servers admit the key again once their cached lookup expires.
 */
export function unbanKey (store: Store, id: string, now: Date = new Date()): Promise<boolean> {
  return store.unbanApiKey(id, now)
}

const KEY_TEXT = new RegExp(`(${Object.values(KEY_PREFIXES).join('|')})[A-Za-z0-9_-]+`, 'g')

/** True when the text holds something that looks like an API key (any environment's prefix). */
export function mentionsKey (text: string): boolean {
  return Object.values(KEY_PREFIXES).some((prefix) => text.includes(prefix))
}

/** The text with every key-shaped run (a key prefix and what follows it) replaced by the prefix and [redacted]. */
export function redactKeys (text: string): string {
  return mentionsKey(text) ? text.replace(KEY_TEXT, '$1[redacted]') : text
}
