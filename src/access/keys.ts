/**
 * API keys: issuing, revoking, and lifting bans. The operator CLI goes through these functions, the server
 * through the gatekeeper (./admission.ts), which reads the same records.
 */
import { hash, randomBytes } from 'node:crypto'
import { crc32 } from 'node:zlib'
import { isExpired, MAX_NAME_LENGTH } from '../domain/rules.js'
import { KEY_PREFIXES, type ApiKeyRecord, type Environment, type KeyScope, type Plan } from '../model.js'
import { isSafeText, SAFE_TEXT_RULE } from '../domain/text.js'
import type { KeyStore, KeyWrites, RotationOutcome } from '../store/keys/types.js'

/** Keys are looked up by their SHA-256; the key itself is never stored. */
export function hashKey (key: string): string {
  return hash('sha256', key)
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
/** The random part of a key: 43 base62 characters, 256 bits. */
const SECRET_LENGTH = 43
/** The checksum: the CRC32 of the random part, 6 base62 characters (as GitHub's tokens end in one). */
const CHECKSUM_LENGTH = 6
/** Keys issued before checksums (until migration 8's release): 32 random bytes in base64url, 43 characters. */
const LEGACY_LENGTH = 43

function base62 (value: number, width: number): string {
  let text = ''
  for (let rest = value; text.length < width; rest = Math.floor(rest / 62)) text = (BASE62[rest % 62] as string) + text
  return text
}

/** `count` uniformly random base62 characters (bytes from 248 up are drawn again, so none is favoured). */
function randomBase62 (count: number): string {
  let text = ''
  while (text.length < count) {
    for (const byte of randomBytes(count * 2)) {
      if (byte < 248 && text.length < count) text += BASE62[byte % 62] as string
    }
  }
  return text
}

function checksumOf (secret: string): string {
  return base62(crc32(secret), CHECKSUM_LENGTH)
}

/**
 * What the text after a key's prefix says about it before any lookup: `checked` (a current key whose checksum
 * holds), `legacy` (the length of a key issued before checksums: only the store can tell), or `malformed` (any
 * other length, a character outside the key's alphabet, or a checksum that does not match: a mistyped or truncated
 * key, refused without a lookup).
 */
export function keyShape (body: string): 'checked' | 'legacy' | 'malformed' {
  if (body.length === LEGACY_LENGTH) return /^[A-Za-z0-9_-]+$/.test(body) ? 'legacy' : 'malformed'
  if (body.length !== SECRET_LENGTH + CHECKSUM_LENGTH || !/^[0-9A-Za-z]+$/.test(body)) return 'malformed'
  return checksumOf(body.slice(0, SECRET_LENGTH)) === body.slice(SECRET_LENGTH) ? 'checked' : 'malformed'
}

/** A new key: the prefix, 43 random base62 characters and their checksum. The pattern secret scanners match is KEY_PATTERN. */
export function newKey (environment: Environment): string {
  const secret = randomBase62(SECRET_LENGTH)
  return KEY_PREFIXES[environment] + secret + checksumOf(secret)
}

/** Keys issued since checksums, in any environment (documented for secret scanners in docs/security.md). */
export const KEY_PATTERN = /\bpsk_(?:live|test)_[0-9A-Za-z]{49}\b/

export interface CreateKeyInput {
  plan: Plan
  name: string | null
  perMinute: number | null
  perDay: number | null
  /** Default: write. */
  scope?: KeyScope
  /** Default: never. */
  expiresAt?: Date | null
}

/** The fields of a key a creator chooses, as KeyInputError names them: the CLI shows them as its flags. */
export type KeyField = 'perMinute' | 'perDay' | 'name' | 'expiresAt' | 'overlap'

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

/** The furthest a key's expiry may lie: ten years (keys that should live longer should not expire). */
export const MAX_KEY_LIFETIME_MS = 3650 * 86_400_000

/** An expiry must lie ahead of the key's creation, and at most MAX_KEY_LIFETIME_MS ahead. */
function checkExpiry (expiresAt: Date | null | undefined, now: Date): void {
  if (expiresAt === undefined || expiresAt === null) return
  if (Number.isNaN(expiresAt.getTime())) throw new KeyInputError('{expiresAt} must be a valid time')
  if (expiresAt.getTime() <= now.getTime()) throw new KeyInputError('{expiresAt} must lie in the future')
  if (expiresAt.getTime() - now.getTime() > MAX_KEY_LIFETIME_MS) throw new KeyInputError('{expiresAt} must lie at most 3650 days ahead')
}

function newRecord (input: CreateKeyInput, now: Date): ApiKeyRecord {
  const id = 'key_' + randomBytes(8).toString('hex')
  return {
    id,
    name: input.name,
    plan: input.plan,
    perMinute: input.perMinute,
    perDay: input.perDay,
    createdAt: now,
    revokedAt: null,
    ban: null,
    scope: input.scope ?? 'write',
    expiresAt: input.expiresAt ?? null,
    quotaId: id,
    replacedBy: null,
    lastUsedAt: null,
    lastDeprecatedUseAt: null
  }
}

/** Creates a key: 256 random bits in base62 and a checksum, behind the environment's prefix. Returns the key once. */
export async function createKey (
  store: { readonly keys: Pick<KeyWrites, 'createApiKey'> }, environment: Environment, input: CreateKeyInput, now: Date = new Date()
): Promise<{ record: ApiKeyRecord, key: string }> {
  checkKeyInput(input)
  checkExpiry(input.expiresAt, now)
  const key = newKey(environment)
  const record = newRecord(input, now)
  await store.keys.createApiKey({ ...record, keyHash: hashKey(key) })
  return { record, key }
}

/** Why a rotation was refused, as an operator reads it. */
const ROTATION_REFUSALS: Record<Exclude<RotationOutcome, 'rotated'>, string> = {
  not_found: 'no key has this id',
  inactive: 'the key is revoked or expired: create a new key instead',
  replaced: 'the key was already rotated: rotate the key that replaced it'
}

export class RotationError extends Error {}

/**
 * Replaces a key without downtime: a new key with the same name, plan, limits and scope, and the same quota (windows,
 * strikes and a ban in force carry over: rotating never resets or doubles it); the old key keeps working until
 * `overlapMs` from now (or its own expiry, if sooner), then only the new one does. The new key gets `expiresAt` (default:
 * none). Returns the new key once.
 */
export async function rotateKey (
  store: { readonly keys: Pick<KeyStore, 'listApiKeys' | 'rotateApiKey'> }, environment: Environment, id: string, options: { overlapMs: number, expiresAt?: Date | null }, now: Date = new Date()
): Promise<{ record: ApiKeyRecord, key: string, previous: ApiKeyRecord, previousEndsAt: Date }> {
  checkExpiry(options.expiresAt, now)
  if (!Number.isSafeInteger(options.overlapMs) || options.overlapMs < 0 || options.overlapMs > MAX_KEY_LIFETIME_MS) {
    throw new KeyInputError('{overlap} must be from 0 to 3650 days')
  }
  const previous = (await store.keys.listApiKeys()).find((key) => key.id === id)
  if (previous === undefined) throw new RotationError(ROTATION_REFUSALS.not_found)
  if (previous.replacedBy !== null) throw new RotationError(ROTATION_REFUSALS.replaced)
  if (previous.revokedAt !== null || isExpired(previous, now.getTime())) throw new RotationError(ROTATION_REFUSALS.inactive)
  const key = newKey(environment)
  // The store carries over the ban the old key has when it rotates; the record shows the one read here.
  const record = { ...newRecord({ ...previous, expiresAt: options.expiresAt ?? null }, now), quotaId: previous.quotaId, ban: previous.ban }
  const endsAt = new Date(now.getTime() + options.overlapMs)
  if (options.expiresAt !== undefined && options.expiresAt !== null && options.expiresAt <= endsAt) throw new KeyInputError('{expiresAt} must lie after the overlap ends (the new key would die first)')
  const outcome = await store.keys.rotateApiKey(id, { ...record, keyHash: hashKey(key) }, endsAt)
  if (outcome !== 'rotated') throw new RotationError(ROTATION_REFUSALS[outcome])
  const previousEndsAt = previous.expiresAt !== null && previous.expiresAt < endsAt ? previous.expiresAt : endsAt
  return { record, key, previous, previousEndsAt }
}

/**
 * Revokes a key; false when no key has this id. Servers refuse it once their cached lookup expires (the
 * gatekeeper's authCacheTtlMs).
 */
export function revokeKey (store: { readonly keys: Pick<KeyWrites, 'revokeApiKey'> }, id: string, now: Date = new Date()): Promise<boolean> {
  return store.keys.revokeApiKey(id, now)
}

/**
 * Lifts a key's ban (a ban already over stays as it is, for the doubling of repeat bans); false when no key has
 * this id. Servers admit the key again once their cached lookup expires.
 */
export function unbanKey (store: { readonly keys: Pick<KeyWrites, 'unbanApiKey'> }, id: string, now: Date = new Date()): Promise<boolean> {
  return store.keys.unbanApiKey(id, now)
}
