/**
 * API keys: issuing, revoking, and lifting bans. The operator CLI goes through these functions, the server
 * through the gatekeeper (./admission.ts), which reads the same records.
 */
import { hash, randomBytes } from 'node:crypto'
import type { Environment } from '../config.js'
import { MAX_NAME_LENGTH, type ApiKeyRecord, type Plan } from '../domain/model.js'
import { isSafeText, SAFE_TEXT_RULE } from '../domain/text.js'
import type { Store } from '../store/types.js'

/** Key prefixes tell production keys from staging keys at a glance (and to secret scanners). */
export const KEY_PREFIXES: Record<Environment, string> = { production: 'psk_live_', staging: 'psk_test_' }

/** Keys are looked up by their SHA-256; the key itself is never stored. */
export function hashKey (key: string): string {
  return hash('sha256', key)
}

export interface CreateKeyInput {
  plan: Plan
  name: string | null
  perMinute: number | null
  perDay: number | null
}

/** The fields of a key a creator chooses, as KeyInputError names them: the CLI shows them as its flags. */
export type KeyField = 'perMinute' | 'perDay' | 'name'

/** Why key input is refused; the message names fields as `{perMinute}`, filled in by whoever shows it. */
export class KeyInputError extends Error {
  constructor (readonly problem: string) {
    super(problem.replace(/\{(\w+)\}/g, '$1'))
  }

  /** The message with each field named as the caller names it (the CLI: by its flags). */
  describe (names: Readonly<Record<KeyField, string>>): string {
    return this.problem.replace(/\{(\w+)\}/g, (_, field: string) => names[field as KeyField] ?? field)
  }
}

/**
 * Checks the plan/limit combination (enterprise keys need both limits, the others take theirs from the plan)
 * and the name, which `keys list` prints on a terminal.
 */
export function checkKeyInput (input: CreateKeyInput): void {
  const hasLimits = input.perMinute !== null || input.perDay !== null
  if (input.plan === 'enterprise') {
    if (input.perMinute === null || input.perDay === null) {
      throw new KeyInputError('enterprise keys need both {perMinute} and {perDay}')
    }
    if (input.perMinute > input.perDay) throw new KeyInputError('{perMinute} must not exceed {perDay}')
  } else if (hasLimits) {
    throw new KeyInputError(`{perMinute} and {perDay} apply to enterprise keys only; the ${input.plan} plan sets its own limits`)
  }
  if (input.name !== null) {
    if (input.name.length > MAX_NAME_LENGTH) throw new KeyInputError(`{name} must be at most ${MAX_NAME_LENGTH} characters`)
    if (!isSafeText(input.name)) throw new KeyInputError(`{name} must hold ${SAFE_TEXT_RULE}`)
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

/** A key prefix as text may carry it: its underscores as they are or percent-encoded (%5F), letters in any case. */
const PREFIX_TEXT = Object.values(KEY_PREFIXES).map((prefix) => prefix.replace(/_/g, '(?:_|%5[Ff])')).join('|')
const KEY_TEXT = new RegExp(`(${PREFIX_TEXT})[A-Za-z0-9_%-]+`, 'gi')
const MENTION = new RegExp(PREFIX_TEXT, 'i')

/** True when the text holds something that looks like an API key (any environment's prefix, plain or encoded). */
export function mentionsKey (text: string): boolean {
  return MENTION.test(text)
}

/** The text with every key-shaped run (a key prefix and what follows it) replaced by the prefix and [redacted]. */
export function redactKeys (text: string): string {
  return mentionsKey(text) ? text.replace(KEY_TEXT, '$1[redacted]') : text
}
