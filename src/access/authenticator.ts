/**
 * Who is calling: from the credentials a request presents to an active key of this environment, or the
 * reason there is none. Key lookups are cached, so a warm key costs no store round trip.
 */
import { LRUCache } from 'lru-cache'
import { KEY_PREFIXES, type ApiKeyRecord, type Environment } from '../model.js'
import type { KeyReads } from '../store/keys/types.js'
import { hashKey, keyShape } from './keys.js'

/**
 * The credentials of a request, as read from its Authorization header (RFC 6750): none, a scheme other than
 * Bearer, a Bearer token that breaks the token syntax, or a token.
 */
export type Credentials =
  | { kind: 'none' }
  | { kind: 'unsupported' }
  | { kind: 'malformed' }
  | { kind: 'bearer', token: string }

/**
 * Why a request has no key: it sent none, another scheme, a malformed token, a key of the other environment
 * (a staging key on a production server or the reverse), a key that is unknown or revoked, or one that expired.
 */
export type CredentialProblem = 'missing' | 'unsupported' | 'malformed' | 'wrong_environment' | 'invalid' | 'expired'

/** Who is calling, or why nobody is: a revoked key's problem names the key (for the logs: never the token). */
export type Identity = { key: ApiKeyRecord, token: string } | { problem: CredentialProblem, keyId?: string }

const PROBLEM_OF_KIND = { none: 'missing', unsupported: 'unsupported', malformed: 'malformed' } as const

/** A lookup's answer as an identity: unknown and revoked keys are invalid. */
function identityOf (record: ApiKeyRecord | false | undefined, token: string): Identity {
  if (record === undefined || record === false) return { problem: 'invalid' }
  return record.revokedAt !== null ? { problem: 'invalid', keyId: record.id } : { key: record, token }
}

/**
 * Resolves credentials to active keys. Lookups (found, unknown or revoked) are cached for `ttlMs`, so a request
 * costs no store round trip while its key is warm, and a revocation takes effect within `ttlMs`. The cache is
 * bounded and keyed by the token itself, so a warm key costs no hashing either (the SHA-256 the store looks keys
 * up by is computed on a miss): a token stays in this process's memory for at most `ttlMs` after its last use,
 * as it was in the request that carried it; the store and the logs never hold it. Concurrent misses for one
 * token share one store query. Throws what the store throws when it cannot be reached.
 */
export class Authenticator {
  readonly #cache: LRUCache<string, ApiKeyRecord | false>
  readonly #prefix: string
  readonly #otherPrefixes: string[]

  constructor (store: { readonly keys: Pick<KeyReads, 'findApiKeyByHash'> }, environment: Environment, ttlMs: number, maxEntries = 100_000) {
    this.#prefix = KEY_PREFIXES[environment]
    this.#otherPrefixes = Object.values(KEY_PREFIXES).filter((prefix) => prefix !== this.#prefix)
    // Bounded by maxSize at one unit an entry rather than by `max`: `max` makes lru-cache allocate all maxEntries
    // slots up front (about 25 ms and megabytes for every app built), maxSize grows with use to the same bound.
    this.#cache = new LRUCache<string, ApiKeyRecord | false>({
      maxSize: maxEntries,
      sizeCalculation: () => 1,
      ttl: Math.max(ttlMs, 1),
      fetchMethod: async (token) => (await store.keys.findApiKeyByHash(hashKey(token))) ?? false
    })
  }

  /**
   * The identity, when it is known without asking the store: every problem, and a token whose lookup is cached.
   * Undefined when identifying would ask the store: a well-formed token of this environment not in the cache.
   */
  identifyNow (credentials: Credentials): Identity | undefined {
    if (credentials.kind !== 'bearer') return { problem: PROBLEM_OF_KIND[credentials.kind] }
    const token = credentials.token
    // Every key this service issues carries its environment's prefix: anything else needs no lookup.
    if (!token.startsWith(this.#prefix)) {
      return { problem: this.#otherPrefixes.some((prefix) => token.startsWith(prefix)) ? 'wrong_environment' : 'invalid' }
    }
    // Only tokens of a key's shape are ever looked up, so a cached token needs no second look at its shape (its
    // checksum is a CRC-32 and a pattern test on every request otherwise).
    const record = this.#cache.get(token)
    if (record !== undefined) return identityOf(record, token)
    // A mistyped or truncated key fails its checksum (or has no key's length): refused without a lookup.
    return keyShape(token.slice(this.#prefix.length)) === 'malformed' ? { problem: 'invalid' } : undefined
  }

  async identify (credentials: Credentials): Promise<Identity> {
    const known = this.identifyNow(credentials)
    if (known !== undefined) return known
    // A miss: fetch() shares concurrent misses of one token.
    const token = (credentials as { token: string }).token
    return identityOf(await this.#cache.fetch(token), token)
  }

  /** How long the cached lookup of `token` is trusted still, in ms: 0 when it is not cached (or no longer trusted). */
  trustedForMs (token: string): number {
    return Math.max(0, this.#cache.getRemainingTTL(token))
  }

  /** Drops a token's cached lookup, so the next request reads the key afresh (after a ban, say). */
  forget (token: string): void {
    this.#cache.delete(token)
  }
}
