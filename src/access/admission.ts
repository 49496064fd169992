/**
 * Admission: who may call, and how often. Given the credentials a request presents, the client's address, what
 * the operation it reached needs, and the time, the gatekeeper answers with an Admission (admitted, not
 * modified, unauthenticated, limited, banned, or unavailable) and the quota to show with it. It owns the key
 * lookup cache, the limits per plan and key, strikes, bans and their recording, and the decision events.
 * Nothing here knows HTTP: the API maps an Admission to headers and errors (src/http/plugins/access.ts).
 *
 * The rules (docs/security.md, "Admission"):
 * - an operation that needs a key admits only a valid, active key of this server's environment; anything
 *   else is unauthenticated, and such requests are counted per client address (never against a key);
 * - an operation whose key is optional (error answers outside an operation: unknown paths, malformed URLs)
 *   charges a valid key, or else the client address;
 * - a request passes only while both of its subject's windows (minute, day) have room, and then counts in both;
 * - a conditional read naming the representation the client already holds is free while the key has quota
 *   (as on GitHub); `If-None-Match: *` holds nothing and counts like any request;
 * - store lookups that find no key are counted per client address; an address that has spent that budget (the
 *   keyless limits) gets no more lookups, and a token the key cache does not hold is refused as the client's,
 *   until the window has room again;
 * - a refusal sent before the retry time of the previous refusal is a strike; a key reaching the strike
 *   threshold within the strike window is banned (15 minutes, doubling on repeats); a key that always waits as
 *   told is never banned; a banned key is refused without counting until the ban ends.
 */
import type { RateLimitConfig } from '../config.js'
import { isExpired, limitsOf, scopeCovers } from '../domain/rules.js'
import type { ApiKeyRecord, Ban, Environment, KeyScope } from '../model.js'
import { AppError, StoreUnavailableError } from '../errors.js'
import { bindingWindow, violatedWindow } from '../ratelimit/decision.js'
import type { ConsumeOptions, Decision, RateLimiter, Subject, WindowLimits, WindowState } from '../ratelimit/types.js'
import type { KeyStore, KeyWrites } from '../store/keys/types.js'
import { Authenticator, type CredentialProblem, type Credentials, type Identity } from './authenticator.js'
import { isBanned, nextBan, strikeThreshold } from './bans.js'
import { clientSubject } from './clients.js'
import { quotaSubject } from './usage.js'

/** What the operation a request reached needs from its caller. */
export interface OperationNeeds {
  /** `required`: only a valid key passes. `optional`: a valid key is charged; anyone else by client address. */
  credential: 'required' | 'optional'
  /** The scope a key needs (none: any key); a key without it is charged and refused as `insufficient_scope`. */
  scope?: KeyScope
  /** The operation is deprecated: a key's call is recorded as its last deprecated use. */
  deprecated?: boolean
  /**
   * `status`: the call reports the key's quota and spends none of it (a banned key may ask too); it is counted in the
   * status budget of the key's quota instead (RateLimitConfig.status).
   */
  charge?: 'status'
}

export const KEY_REQUIRED: OperationNeeds = Object.freeze({ credential: 'required' })
export const KEY_OPTIONAL: OperationNeeds = Object.freeze({ credential: 'optional' })

export interface AdmissionRequest {
  credentials: Credentials
  /** The client's address, as resolved from the connection and trusted proxies. */
  client: string
  needs: OperationNeeds
  /**
   * For a conditional read: resolves true when the client names, as a tag it holds, the current representation.
   * Asked only while the key has quota; a failure counts as false.
   */
  holdsCurrent?: () => Promise<boolean>
}

/** What the rate-limit fields of the answer show. */
export interface QuotaView {
  /** The window the X-RateLimit-* fields describe (during a ban: the ban, with nothing remaining). */
  shown: { limit: number, remaining: number, resetAt: number }
  /** Both windows, for RateLimit-Policy and RateLimit. */
  windows: readonly [WindowState, WindowState]
  /** The decision's time (ms). */
  now: number
}

export type Admission =
  | {
    outcome: 'admitted', key: ApiKeyRecord | null, quota: QuotaView,
    /** For a status call: the key's windows as counted (during a ban the quota shown is the ban's). */
    usage?: readonly [WindowState, WindowState]
  }
  /** A conditional read of what the client holds: answered as not modified, nothing counted. */
  | { outcome: 'not_modified', key: ApiKeyRecord, quota: QuotaView }
  /** `keyId`: the key the request named, when it is known (revoked or expired). */
  | { outcome: 'unauthenticated', problem: CredentialProblem, quota: QuotaView, keyId?: string }
  /** A valid key without the scope the operation needs: charged like any request, then refused. */
  | { outcome: 'insufficient_scope', key: ApiKeyRecord, needed: KeyScope, quota: QuotaView }
  | {
    outcome: 'limited', subject: Subject['kind'], window: WindowState, retryAfterSeconds: number, quota: QuotaView,
    /** The key the request named, when known (subject `key`; a revoked or expired one for subject `ip`). */
    keyId?: string,
    banNotRecorded?: { keyId: string, error: unknown },
    /** Set when the status budget refused (the quota shown is the budget's; the key's own is untouched). */
    budget?: 'status'
  }
  | { outcome: 'banned', key: ApiKeyRecord, until: Date, retryAfterSeconds: number, quota: QuotaView, imposed?: { ban: Ban, strikes: number } }
  /** The store could not be asked who the key is: nobody is charged; the quota shown is the client address's. */
  | { outcome: 'unavailable', error: unknown, quota: QuotaView }

export type DecisionOutcome = 'allowed' | 'limited' | 'banned' | 'not_modified'

/**
 * Whether credentials admitted earlier would still be admitted: for an answer that outlives its admission (a change
 * stream). Refused as a new request with them would be (rate limits aside: nothing is counted), or `unavailable` when
 * the store could not be asked.
 */
export type Standing =
  | {
    outcome: 'admitted', key: ApiKeyRecord,
    /** Milliseconds until the answer may change: the key's lookup goes stale in the cache, or the key expires. */
    recheckInMs: number
  }
  | { outcome: 'unauthenticated', problem: CredentialProblem, keyId?: string }
  | { outcome: 'insufficient_scope', key: ApiKeyRecord, needed: KeyScope }
  | { outcome: 'banned', key: ApiKeyRecord, until: Date }
  | { outcome: 'unavailable', error: unknown }

/**
 * The id of the key a request named, when known: the admitted key, or the one refused (out of scope, limited,
 * banned, revoked or expired). Null for a request without a key, with a key nobody issued, or when the store could
 * not be asked. For the logs and traces; never the key itself.
 */
export function keyIdOf (admission: Admission): string | null {
  switch (admission.outcome) {
    case 'admitted':
      return admission.key?.id ?? null
    case 'not_modified':
    case 'insufficient_scope':
    case 'banned':
      return admission.key.id
    case 'unauthenticated':
    case 'limited':
      return admission.keyId ?? null
    case 'unavailable':
      return null
  }
}

/** Where admission decisions are reported (metrics); never with key ids or addresses. */
export interface AdmissionEvents {
  decided (subject: Subject['kind'], outcome: DecisionOutcome): void
  banned (): void
}

export interface GatekeeperOptions {
  store: { readonly keys: Pick<KeyStore, 'findApiKeyByHash' | 'banApiKey' | 'recordKeyUse'> }
  limiter: RateLimiter
  limits: RateLimitConfig
  /** Keys of the other environment are refused. */
  environment: Environment
  /** How long a key lookup is trusted: the bound on how fast a revocation, ban or unban reaches this instance. */
  authCacheTtlMs: number
  /** Milliseconds since the epoch. */
  clock?: () => number
  events?: AdmissionEvents
  /** Where a failure to record a key's last use goes (it never fails a request). */
  onUseNotRecorded?: (keyId: string, error: unknown) => void
}

const NO_EVENTS: AdmissionEvents = { decided: () => {}, banned: () => {} }

/** How often each instance records one key's last use (and, apart, its last deprecated use): once a minute. */
export const KEY_USE_INTERVAL_MS = 60_000

/**
 * Records when keys were last used without a store write per request: at most once per KEY_USE_INTERVAL_MS per key
 * (and once more for a deprecated call) in this process, so a recorded time is at most that late, per instance.
 */
class KeyUseRecorder {
  readonly #last = new Map<string, { used: number, deprecated: number }>()
  readonly #store: { readonly keys: Pick<KeyWrites, 'recordKeyUse'> }
  readonly #onError: (keyId: string, error: unknown) => void

  constructor (store: { readonly keys: Pick<KeyWrites, 'recordKeyUse'> }, onError: (keyId: string, error: unknown) => void) {
    this.#store = store
    this.#onError = onError
  }

  note (keyId: string, deprecated: boolean, now: number): void {
    let last = this.#last.get(keyId)
    if (last === undefined) {
      last = { used: Number.NEGATIVE_INFINITY, deprecated: Number.NEGATIVE_INFINITY }
      this.#last.set(keyId, last)
    }
    const used = now - last.used >= KEY_USE_INTERVAL_MS
    const deprecatedDue = deprecated && now - last.deprecated >= KEY_USE_INTERVAL_MS
    if (!used && !deprecatedDue) return
    if (used) last.used = now
    if (deprecatedDue) last.deprecated = now
    const at = new Date(now)
    this.#store.keys.recordKeyUse(keyId, at, deprecatedDue ? at : null).catch((error: unknown) => { this.#onError(keyId, error) })
  }
}

/** The subject that counts a client address's key lookups that found no key (beside its keyless requests). */
function lookupSubject (address: string, ipv6PrefixLength: number): Subject {
  return { kind: 'ip', id: `lookups:${clientSubject(address, ipv6PrefixLength).id}` }
}

/** Whole seconds from `nowMs` until `atSeconds`, at least 1: `floor(now) + this` is `atSeconds`. */
function secondsUntil (atSeconds: number, nowMs: number): number {
  return Math.max(1, Math.ceil(atSeconds - nowMs / 1000))
}

function quotaOf (decision: Decision, shown: WindowState = bindingWindow(decision.windows)): QuotaView {
  return { shown: { limit: shown.limit, remaining: shown.remaining, resetAt: shown.resetAt }, windows: decision.windows, now: decision.now }
}

/** During a ban both windows show nothing left until the ban's end, so every field names the same instant. */
function banQuota (limits: WindowLimits, until: Date, now: number): QuotaView {
  const resetAt = Math.ceil(until.getTime() / 1000)
  const window = (name: 'minute' | 'day', limit: number, windowSeconds: number): WindowState => ({ name, limit, remaining: 0, windowSeconds, resetAt })
  return {
    shown: { limit: limits.perMinute, remaining: 0, resetAt },
    windows: [window('minute', limits.perMinute, 60), window('day', limits.perDay, 86_400)],
    now
  }
}

export class Gatekeeper {
  readonly #authenticator: Authenticator
  readonly #store: GatekeeperOptions['store']
  readonly #limiter: RateLimiter
  readonly #limits: RateLimitConfig
  readonly #clock: () => number
  readonly #events: AdmissionEvents
  readonly #uses: KeyUseRecorder

  constructor (options: GatekeeperOptions) {
    this.#authenticator = new Authenticator(options.store, options.environment, options.authCacheTtlMs)
    this.#store = options.store
    this.#limiter = options.limiter
    this.#limits = options.limits
    this.#clock = options.clock ?? Date.now
    this.#events = options.events ?? NO_EVENTS
    this.#uses = new KeyUseRecorder(options.store, options.onUseNotRecorded ?? (() => {}))
  }

  /**
   * The admission of a request. Synchronous (no promise at all) when nothing needs I/O: a cached key or a
   * refusal that needs no lookup, no conditional read, and a limiter that decides in process; a promise otherwise.
   */
  admit (request: AdmissionRequest): Admission | Promise<Admission> {
    const identity = this.#authenticator.identifyNow(request.credentials)
    return identity === undefined ? this.#admitLookingUp(request) : this.#admitIdentified(identity, request)
  }

  /**
   * Whether credentials admitted earlier would still be, for an answer that lasts (a change stream): the rules of a new
   * request (revoked, expired or ended by a rotation, banned, scope no longer enough) from the same key cache, so that
   * a change to the key reaches the answer within `authCacheTtlMs`, as it reaches requests, on every instance. Nothing
   * is counted: the answer was paid for when it was admitted. Synchronous while the key's lookup is cached.
   */
  standing (credentials: Credentials, needs: OperationNeeds): Standing | Promise<Standing> {
    const identity = this.#authenticator.identifyNow(credentials)
    if (identity !== undefined) return this.#standingOf(identity, needs)
    return this.#authenticator.identify(credentials).then((found) => this.#standingOf(found, needs), (error: unknown) => {
      if (!(error instanceof StoreUnavailableError)) throw error
      return { outcome: 'unavailable', error }
    })
  }

  #standingOf (identity: Identity, needs: OperationNeeds): Standing {
    if ('problem' in identity) {
      return identity.keyId === undefined ? { outcome: 'unauthenticated', problem: identity.problem } : { outcome: 'unauthenticated', problem: identity.problem, keyId: identity.keyId }
    }
    const { key, token } = identity
    const now = this.#clock()
    // In the order #admitKey applies them.
    if (isExpired(key, now)) return { outcome: 'unauthenticated', problem: 'expired', keyId: key.id }
    if (needs.charge !== 'status' && isBanned(key.ban, now)) return { outcome: 'banned', key, until: key.ban.until }
    if (needs.scope !== undefined && !scopeCovers(key.scope, needs.scope)) return { outcome: 'insufficient_scope', key, needed: needs.scope }
    const untilExpiry = key.expiresAt === null ? Number.POSITIVE_INFINITY : key.expiresAt.getTime() - now
    return { outcome: 'admitted', key, recheckInMs: Math.min(this.#authenticator.trustedForMs(token), untilExpiry) }
  }

  /** A request whose caller is known: a valid key is charged as the key, anyone else by client address. */
  #admitIdentified (identity: Identity, request: AdmissionRequest): Admission | Promise<Admission> {
    if ('problem' in identity) return this.#admitClient(clientSubject(request.client, this.#limits.ipv6PrefixLength), request.needs, identity.problem, identity.keyId)
    return this.#admitKey(identity.key, identity.token, request)
  }

  /**
   * A token the key cache does not know costs a store lookup. Lookups that find no key are counted per client
   * address (the keyless limits, in a budget of their own); an address that has spent it gets no more lookups
   * until its window has room: it is refused as a client, without asking the store
   * (docs/adr/0007-admission-decided-on-the-matched-route.md). A valid key never spends the budget.
   */
  async #admitLookingUp (request: AdmissionRequest): Promise<Admission> {
    const lookup = lookupSubject(request.client, this.#limits.ipv6PrefixLength)
    const budget = await this.#limiter.peek(lookup, this.#limits.anonymous)
    if (!budget.allowed) {
      this.#events.decided('ip', 'limited')
      return this.#limited('ip', budget)
    }
    let identity
    try {
      identity = await this.#authenticator.identify(request.credentials)
      if ('problem' in identity) await this.#limiter.consume(lookup, this.#limits.anonymous)
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) throw error
      const client = clientSubject(request.client, this.#limits.ipv6PrefixLength)
      return { outcome: 'unavailable', error, quota: quotaOf(await this.#limiter.peek(client, this.#limits.anonymous)) }
    }
    return await this.#admitIdentified(identity, request)
  }

  /**
   * A request without a valid key: counted against its client address, never against a key. `keyId` names the key
   * it presented, when that is known (revoked or expired).
   */
  #admitClient (client: Subject, needs: OperationNeeds, problem: CredentialProblem, keyId?: string): Admission | Promise<Admission> {
    const settle = (decision: Decision): Admission => {
      this.#events.decided('ip', decision.allowed ? 'allowed' : 'limited')
      if (!decision.allowed) return this.#limited('ip', decision, 1, keyId)
      const quota = quotaOf(decision)
      if (needs.credential === 'optional') return { outcome: 'admitted', key: null, quota }
      return keyId === undefined ? { outcome: 'unauthenticated', problem, quota } : { outcome: 'unauthenticated', problem, quota, keyId }
    }
    return this.#consume(client, this.#limits.anonymous, {}, settle)
  }

  #admitKey (key: ApiKeyRecord, token: string, request: AdmissionRequest): Admission | Promise<Admission> {
    const now = this.#clock()
    // An expired key is no key: its requests count against the client address, as an unknown key's do.
    if (isExpired(key, now)) return this.#admitClient(clientSubject(request.client, this.#limits.ipv6PrefixLength), request.needs, 'expired', key.id)
    this.#uses.note(key.id, request.needs.deprecated === true, now)
    const limits = limitsOf(key, this.#limits.plans) ?? this.#limits.anonymous
    const subject = quotaSubject(key)
    if (request.needs.charge === 'status') return this.#admitStatus(key, subject, limits, now)
    if (isBanned(key.ban, now)) {
      this.#events.decided('key', 'banned')
      return this.#banned(key, key.ban.until, limits, now)
    }
    const needed = request.needs.scope
    const holdsCurrent = request.holdsCurrent
    return holdsCurrent === undefined || (needed !== undefined && !scopeCovers(key.scope, needed))
      ? this.#chargeKey(key, token, subject, limits, needed)
      : this.#admitConditional(key, token, subject, limits, holdsCurrent)
  }

  /**
   * A status call: the key's windows as they stand (peeked, nothing spent; during a ban, the ban), counted in the
   * status budget of the key's quota, which refuses with its own retry time once spent.
   */
  async #admitStatus (key: ApiKeyRecord, subject: Subject, limits: WindowLimits, now: number): Promise<Admission> {
    const budget = await this.#limiter.consume({ kind: 'key', id: `status:${subject.id}` }, this.#limits.status)
    if (!budget.allowed) {
      // As every 429: the rate-limit fields describe the window that refused, here the status budget's.
      this.#events.decided('key', 'limited')
      return { ...this.#limited('key', budget, 1, key.id), budget: 'status' }
    }
    const peeked = await this.#limiter.peek(subject, limits)
    const quota = isBanned(key.ban, now) ? banQuota(limits, key.ban.until, now) : quotaOf(peeked)
    this.#events.decided('key', 'allowed')
    return { outcome: 'admitted', key, quota, usage: peeked.windows }
  }

  /** A conditional read: free while the key has quota and the client holds the current representation. */
  async #admitConditional (key: ApiKeyRecord, token: string, subject: Subject, limits: WindowLimits, holdsCurrent: () => Promise<boolean>): Promise<Admission> {
    const peeked = await this.#limiter.peek(subject, limits)
    if (peeked.allowed && await holdsCurrent().catch(() => false)) {
      this.#events.decided('key', 'not_modified')
      return { outcome: 'not_modified', key, quota: quotaOf(peeked) }
    }
    return await this.#chargeKey(key, token, subject, limits, undefined)
  }

  /**
   * Counts a key's request: admitted, limited, or (at the strike threshold) banned; admitted without the scope the
   * operation needs: insufficient_scope (counted like any request).
   */
  #chargeKey (key: ApiKeyRecord, token: string, subject: Subject, limits: WindowLimits, needed: KeyScope | undefined): Admission | Promise<Admission> {
    const bans = this.#limits.bans
    const threshold = bans === null ? 0 : strikeThreshold(bans, limits.perMinute)
    const options: ConsumeOptions = bans === null ? {} : { strikes: { windowSeconds: bans.strikeWindowSeconds, threshold } }
    return this.#consume(subject, limits, options, (decision) => {
      if (decision.allowed) {
        this.#events.decided('key', 'allowed')
        if (needed !== undefined && !scopeCovers(key.scope, needed)) return { outcome: 'insufficient_scope', key, needed, quota: quotaOf(decision) }
        return { outcome: 'admitted', key, quota: quotaOf(decision) }
      }
      if (bans === null || decision.strikes < threshold) {
        this.#events.decided('key', 'limited')
        return this.#limited('key', decision, 1, key.id)
      }
      return this.#ban(key, token, limits, decision, nextBan(key.ban, this.#clock(), bans))
    })
  }

  /** Records a ban the strikes call for; answers the refusal without it when it cannot be recorded. */
  async #ban (key: ApiKeyRecord, token: string, limits: WindowLimits, decision: Decision, ban: Ban): Promise<Admission> {
    let recorded: boolean
    try {
      recorded = await this.#store.keys.banApiKey(key.id, ban)
    } catch (error) {
      this.#events.decided('key', 'limited')
      return { ...this.#limited('key', decision, 1, key.id), banNotRecorded: { keyId: key.id, error } }
    }
    if (!recorded) {
      // The key was deleted meanwhile: nothing to ban.
      this.#events.decided('key', 'limited')
      return this.#limited('key', decision, 1, key.id)
    }
    // The next request of this key reads the ban from the store instead of the cached record.
    this.#authenticator.forget(token)
    this.#events.banned()
    this.#events.decided('key', 'banned')
    return { ...this.#banned(key, ban.until, limits, ban.since.getTime()), imposed: { ban, strikes: decision.strikes } }
  }

  /**
   * Charges an admitted key for what an operation is worth beyond the one request the gate counted (a batch of N
   * changes costs N): all `extra` at once, or none, refused as `limited` with the window that lacks room. No strike
   * is counted: the request itself was admitted. An operation that needs more than a window's whole limit can never
   * pass: invalid_request, naming the limit, rather than a 429 that waiting would not cure.
   */
  async chargeMore (key: ApiKeyRecord, extra: number, what: string): Promise<Admission> {
    const limits = limitsOf(key, this.#limits.plans) ?? this.#limits.anonymous
    // perMinute <= perDay (config), so the minute's limit is the most any window holds.
    if (extra + 1 > limits.perMinute) {
      throw new AppError('invalid_request', `${what} counts as ${extra + 1} requests, more than this key's limit of ${limits.perMinute} per ` +
        `minute; send at most ${limits.perMinute} at a time.`)
    }
    const decision = await this.#limiter.consume({ kind: 'key', id: key.quotaId }, limits, { cost: extra })
    if (decision.allowed) return { outcome: 'admitted', key, quota: quotaOf(decision) }
    this.#events.decided('key', 'limited')
    return this.#limited('key', decision, extra, key.id)
  }

  /** One limiter decision, then `settle`: synchronously when the limiter decides in process. */
  #consume (subject: Subject, limits: WindowLimits, options: ConsumeOptions,
    settle: (decision: Decision) => Admission | Promise<Admission>): Admission | Promise<Admission> {
    if (this.#limiter.consumeNow !== undefined) return settle(this.#limiter.consumeNow(subject, limits, options))
    return this.#limiter.consume(subject, limits, options).then(settle)
  }

  /**
   * A refusal for want of room for `cost` requests; the quota shown is what remains (nothing, for one request).
   * `keyId`: the key the request named, when known.
   */
  #limited (subject: Subject['kind'], decision: Decision, cost = 1, keyId?: string): Admission & { outcome: 'limited' } {
    const window = violatedWindow(decision.windows, cost)
    const limited: Admission & { outcome: 'limited' } = {
      outcome: 'limited',
      subject,
      window,
      retryAfterSeconds: secondsUntil(window.resetAt, decision.now),
      quota: quotaOf(decision, cost === 1 ? { ...window, remaining: 0 } : window)
    }
    if (keyId !== undefined) limited.keyId = keyId
    return limited
  }

  #banned (key: ApiKeyRecord, until: Date, limits: WindowLimits, now: number): Admission & { outcome: 'banned' } {
    const quota = banQuota(limits, until, now)
    return { outcome: 'banned', key, until, retryAfterSeconds: secondsUntil(quota.shown.resetAt, now), quota }
  }
}
