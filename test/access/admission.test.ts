/**
 * The admission rules, without HTTP: a gatekeeper over an in-memory key table and the in-process limiter, on a
 * clock the tests move.
 */
import assert from 'node:assert/strict'
import { beforeEach, describe, test } from 'node:test'
import { Gatekeeper, KEY_OPTIONAL, KEY_REQUIRED, type Admission, type AdmissionRequest, type DecisionOutcome, type OperationNeeds } from '../../src/access/admission.js'
import { clientSubject } from '../../src/access/clients.js'
import { hashKey, KEY_PATTERN, newKey } from '../../src/access/keys.js'
import { loadConfig } from '../../src/config.js'
import type { ApiKeyRecord, Ban } from '../../src/model.js'
import { StoreUnavailableError } from '../../src/errors.js'
import { MemoryLimiter } from '../../src/ratelimit/memory.js'
import type { RateLimiter } from '../../src/ratelimit/types.js'

// 12:00:00 UTC: the start of a minute, 12 hours into the day.
const T0 = Date.parse('2026-11-22T12:00:00Z')

function record (id: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    id,
    name: null,
    plan: 'free',
    perMinute: null,
    perDay: null,
    createdAt: new Date(T0),
    revokedAt: null,
    ban: null,
    scope: 'write',
    expiresAt: null,
    quotaId: id,
    replacedBy: null,
    lastUsedAt: null,
    lastDeprecatedUseAt: null,
    ...overrides
  }
}

/**
 * How the limiter answers: 'in process' decides synchronously (the in-process limiter's consumeNow, the path
 * without promises); 'asynchronous' offers only the promise methods, as the Redis limiter does. Every rule
 * below holds on both.
 */
type LimiterMode = 'in process' | 'asynchronous'
let limiterMode: LimiterMode = 'in process'

/** The in-process limiter seen only through its promise methods. */
function asynchronous (limiter: MemoryLimiter): RateLimiter {
  return {
    kind: 'asynchronous',
    consume: async (subject, limits, options) => await limiter.consume(subject, limits, options),
    peek: async (subject, limits) => await limiter.peek(subject, limits),
    reset: async (subject) => { await limiter.reset(subject) },
    close: async () => { await limiter.close() }
  }
}

/** A gatekeeper on a key table; `keys` maps a key text to its record. */
function gatekeeper (env: Record<string, string> = {}, keys: Record<string, ApiKeyRecord> = {}) {
  const clock = { now: T0 }
  const config = loadConfig({ AUTH_CACHE_TTL_MS: '0', ...env })
  const byHash = new Map(Object.entries(keys).map(([key, rec]) => [hashKey(key), rec]))
  const calls = { lookups: 0, bans: [] as Array<[string, Ban]>, uses: [] as Array<[string, number, number | null]> }
  const store = {
    failLookups: false,
    failBans: false,
    failUses: false,
    async recordKeyUse (id: string, usedAt: Date, deprecatedAt: Date | null) {
      if (store.failUses) throw new StoreUnavailableError('down')
      calls.uses.push([id, usedAt.getTime(), deprecatedAt?.getTime() ?? null])
    },
    async findApiKeyByHash (hash: string) {
      calls.lookups++
      if (store.failLookups) throw new StoreUnavailableError('down')
      return byHash.get(hash) ?? null
    },
    async banApiKey (id: string, ban: Ban) {
      if (store.failBans) throw new StoreUnavailableError('down')
      calls.bans.push([id, ban])
      // As the stores do: every key sharing the banned key's quota.
      const quota = [...byHash.values()].find((rec) => rec.id === id)?.quotaId
      for (const rec of byHash.values()) if (rec.quotaId === quota) rec.ban = ban
      return true
    }
  }
  const events: Array<[string, DecisionOutcome] | ['ban']> = []
  const limiter = new MemoryLimiter({ clock: () => clock.now })
  const gate = new Gatekeeper({
    store: { keys: store },
    limiter: limiterMode === 'in process' ? limiter : asynchronous(limiter),
    limits: config.rateLimits,
    environment: config.environment,
    authCacheTtlMs: 0,
    clock: () => clock.now,
    events: { decided: (subject, outcome) => events.push([subject, outcome]), banned: () => events.push(['ban']) }
  })
  const admit = async (request: Partial<AdmissionRequest> & { token?: string }): Promise<Admission> => await gate.admit({
    credentials: request.token === undefined ? { kind: 'none' } : { kind: 'bearer', token: request.token },
    client: '192.0.2.1',
    needs: KEY_REQUIRED,
    ...request
  })
  return { gate, admit, clock, store, calls, events, limiter }
}

const LIVE = 'psk_live_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG'

for (const mode of ['in process', 'asynchronous'] as const) {
  describe(`admission (${mode} limiter): who may call`, () => {
    beforeEach(() => { limiterMode = mode })

    test('when no credentials are presented to an operation that needs a key, then it is unauthenticated and counted against the client address', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_ANONYMOUS: '5/50' })
      const first = await admit({})
      assert.equal(first.outcome, 'unauthenticated')
      assert.equal(first.outcome === 'unauthenticated' && first.problem, 'missing')
      assert.deepEqual(first.quota.shown, { limit: 5, remaining: 4, resetAt: T0 / 1000 + 60 })
      assert.equal((await admit({})).quota.shown.remaining, 3)
    })

    test('when another scheme or a malformed token is presented, then the problem says so', async () => {
      const { gate } = gatekeeper()
      for (const [kind, problem] of [['unsupported', 'unsupported'], ['malformed', 'malformed']] as const) {
        const admission = await gate.admit({ credentials: { kind }, client: '192.0.2.1', needs: KEY_REQUIRED })
        assert.equal(admission.outcome === 'unauthenticated' && admission.problem, problem)
      }
    })

    test('when a key of the other environment is presented, then it is refused without a store lookup', async () => {
      const staging = 'psk_test_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG'
      const { admit, calls } = gatekeeper({}, { [staging]: record('key_staging') })
      const admission = await admit({ token: staging })
      assert.equal(admission.outcome === 'unauthenticated' && admission.problem, 'wrong_environment')
      assert.equal(calls.lookups, 0)
    })

    test('when a staging server is presented a production key, then it is refused the same way', async () => {
      const { admit } = gatekeeper({ PETSTORE_ENV: 'staging' }, { [LIVE]: record('key_live') })
      const admission = await admit({ token: LIVE })
      assert.equal(admission.outcome === 'unauthenticated' && admission.problem, 'wrong_environment')
    })

    test('when an unknown, revoked or prefix-less token is presented, then it is invalid', async () => {
      const revoked = newKey('production')
      const { admit, calls } = gatekeeper({}, { [revoked]: record('key_revoked', { revokedAt: new Date(T0) }) })
      for (const token of [newKey('production'), revoked, 'not-a-key-at-all']) {
        const admission = await admit({ token })
        assert.equal(admission.outcome === 'unauthenticated' && admission.problem, 'invalid', token)
      }
      assert.equal(calls.lookups, 2, 'a token without this environment\'s prefix is not looked up')
    })

    test('when a checksummed key is mistyped or truncated, then it is invalid without a store lookup', async () => {
      const key = newKey('production')
      assert.match(key, KEY_PATTERN, 'the pattern documented for secret scanners')
      assert.match(newKey('staging'), KEY_PATTERN)
      const { admit, calls } = gatekeeper({}, { [key]: record('key_a') })
      const body = key.slice('psk_live_'.length)
      const typo = `psk_live_${body[0] === 'a' ? 'b' : 'a'}${body.slice(1)}`
      const swapped = `psk_live_${body.slice(0, 10)}${body[11] as string}${body[10] as string}${body.slice(12)}`
      for (const token of [typo, swapped, key.slice(0, -1), key.slice(0, -6), `${key}0`, key.slice(0, 30)]) {
        if (token === key) continue
        const admission = await admit({ token })
        assert.equal(admission.outcome === 'unauthenticated' && admission.problem, 'invalid', token)
      }
      // Only the 43-character cut (the length of keys issued before checksums) is looked up; 43 characters outside the
      // old keys' alphabet are not.
      assert.equal(calls.lookups, 1)
      const outside = await admit({ token: `psk_live_${'a'.repeat(42)}.` })
      assert.equal(outside.outcome === 'unauthenticated' && outside.problem, 'invalid')
      assert.equal(calls.lookups, 1)
      assert.equal((await admit({ token: key })).outcome, 'admitted')
      assert.equal(calls.lookups, 2)
    })

    test('when a valid key is presented, then it is admitted and counted against the key, not the client address', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '3/10', RATE_LIMIT_ANONYMOUS: '1/1' }, { [LIVE]: record('key_a') })
      for (let i = 0; i < 3; i++) {
        const admission = await admit({ token: LIVE })
        assert.equal(admission.outcome, 'admitted')
        assert.equal(admission.outcome === 'admitted' && admission.key?.id, 'key_a')
        assert.equal(admission.quota.shown.remaining, 2 - i)
      }
      assert.equal((await admit({})).outcome, 'unauthenticated', 'the client address still has its own quota')
    })

    test('when the key is optional, then a valid key is charged and anyone else is charged by address', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '3/10', RATE_LIMIT_ANONYMOUS: '2/10' }, { [LIVE]: record('key_a') })
      const keyed = await admit({ token: LIVE, needs: KEY_OPTIONAL })
      assert.equal(keyed.outcome === 'admitted' && keyed.key?.id, 'key_a')
      assert.equal(keyed.quota.shown.limit, 3)
      const anonymous = await admit({ token: `${LIVE}X`, needs: KEY_OPTIONAL })
      assert.equal(anonymous.outcome === 'admitted' && anonymous.key, null)
      assert.equal(anonymous.quota.shown.remaining, 1)
      await admit({ needs: KEY_OPTIONAL })
      assert.equal((await admit({ needs: KEY_OPTIONAL })).outcome, 'limited')
    })

    test('when the store cannot be asked who the key is, then nobody is charged and the client address\'s quota is shown', async () => {
      const { admit, store } = gatekeeper({ RATE_LIMIT_ANONYMOUS: '5/50' })
      store.failLookups = true
      const admission = await admit({ token: LIVE })
      assert.equal(admission.outcome, 'unavailable')
      assert.equal(admission.quota.shown.remaining, 5)
    })
  })

  describe(`admission (${mode} limiter): how often`, () => {
    beforeEach(() => { limiterMode = mode })

    test('when a key\'s minute is spent, then it is limited with the window and a Retry-After that lands on the window\'s end', async () => {
      const { admit, clock } = gatekeeper({ RATE_LIMIT_FREE: '2/10' }, { [LIVE]: record('key_a') })
      await admit({ token: LIVE })
      await admit({ token: LIVE })
      clock.now += 19_500
      const admission = await admit({ token: LIVE })
      assert.equal(admission.outcome, 'limited')
      if (admission.outcome !== 'limited') return
      assert.equal(admission.window.name, 'minute')
      assert.equal(admission.retryAfterSeconds, 41)
      assert.equal(Math.floor(clock.now / 1000) + admission.retryAfterSeconds, admission.quota.shown.resetAt)
      assert.equal(admission.quota.shown.remaining, 0)
    })

    test('when an admitted operation is worth several requests, then the rest is charged all at once or refused whole, naming what is left', async () => {
      const key = record('key_a')
      const { admit, gate, clock } = gatekeeper({ RATE_LIMIT_FREE: '10/100' }, { [LIVE]: key })
      assert.equal((await admit({ token: LIVE })).outcome, 'admitted')
      const charged = await gate.chargeMore(key, 5, 'This batch of 6 changes')
      assert.deepEqual([charged.outcome, charged.quota.shown.remaining], ['admitted', 4])
      assert.equal((await admit({ token: LIVE })).outcome, 'admitted')
      clock.now += 20_000
      const refused = await gate.chargeMore(key, 5, 'This batch of 6 changes')
      assert.equal(refused.outcome, 'limited')
      if (refused.outcome !== 'limited') return
      assert.deepEqual([refused.window.name, refused.quota.shown.remaining, refused.retryAfterSeconds], ['minute', 3, 40], 'what is left, not 0')
      assert.equal((await gate.chargeMore(key, 3, 'This batch of 4 changes')).outcome, 'admitted', 'the refusal took nothing')
      await assert.rejects(gate.chargeMore(key, 10, 'This batch of 11 changes'), /counts as 11 requests, more than this key's limit of 10 per minute/)
    })

    test('when an enterprise key has its own limits, then they apply', async () => {
      const { admit } = gatekeeper({}, { [LIVE]: record('key_e', { plan: 'enterprise', perMinute: 7, perDay: 70 }) })
      assert.deepEqual((await admit({ token: LIVE })).quota.windows.map((w) => w.limit), [7, 70])
    })

    test('when a key keeps sending before its Retry-After has passed, then the Nth strike bans it and records the ban', async () => {
      const { admit, calls, events } = gatekeeper({ RATE_LIMIT_FREE: '2/100' }, { [LIVE]: record('key_a') })
      const outcomes = []
      for (let i = 0; i < 6; i++) outcomes.push((await admit({ token: LIVE })).outcome)
      // Two admitted, the first refusal (no strike), two strikes (N = 2 per minute) of which the second bans, then banned.
      assert.deepEqual(outcomes, ['admitted', 'admitted', 'limited', 'limited', 'banned', 'banned'])
      assert.equal(calls.bans.length, 1)
      assert.equal(calls.bans[0]?.[1].seconds, 900)
      assert.deepEqual(events.filter((e) => e[0] === 'ban'), [['ban']])
      assert.deepEqual(events.filter((e) => e[0] === 'key').map((e) => e[1]), ['allowed', 'allowed', 'limited', 'limited', 'banned', 'banned'])
    })

    test('when a key is banned, then every field of its quota names the ban\'s end and nothing is counted', async () => {
      const { admit, clock, limiter } = gatekeeper({ RATE_LIMIT_FREE: '1/100' }, { [LIVE]: record('key_a') })
      for (let i = 0; i < 3; i++) await admit({ token: LIVE })
      clock.now += 120_400
      const admission = await admit({ token: LIVE })
      assert.equal(admission.outcome, 'banned')
      if (admission.outcome !== 'banned') return
      const end = T0 / 1000 + 900
      assert.equal(admission.until.getTime(), end * 1000)
      assert.deepEqual(admission.quota.shown, { limit: 1, remaining: 0, resetAt: end })
      assert.deepEqual(admission.quota.windows.map((w) => [w.remaining, w.resetAt]), [[0, end], [0, end]])
      assert.equal(Math.floor(clock.now / 1000) + admission.retryAfterSeconds, end)
      assert.equal((await limiter.peek({ kind: 'key', id: 'key_a' }, { perMinute: 1, perDay: 100 })).windows[1].remaining, 99)
    })

    test('when a client always waits as long as it was told, then it is never banned, even with a threshold of one strike', async () => {
      const { admit, clock, calls } = gatekeeper({ BAN_STRIKES: '1' }, { [LIVE]: record('key_e', { plan: 'enterprise', perMinute: 1, perDay: 2 }) })
      for (let i = 0; i < 20; i++) {
        const admission = await admit({ token: LIVE })
        assert.notEqual(admission.outcome, 'banned')
        if (admission.outcome === 'limited') clock.now += admission.retryAfterSeconds * 1000
      }
      assert.equal(calls.bans.length, 0)
    })

    test('when the ban cannot be recorded, then the answer is limited, and says why', async () => {
      const { admit, store } = gatekeeper({ RATE_LIMIT_FREE: '1/100' }, { [LIVE]: record('key_a') })
      store.failBans = true
      const outcomes = []
      for (let i = 0; i < 3; i++) outcomes.push(await admit({ token: LIVE }))
      const last = outcomes[2]
      assert.equal(last?.outcome, 'limited')
      assert.equal(last?.outcome === 'limited' && last.banNotRecorded?.keyId, 'key_a')
    })

    test('when bans are switched off, then strikes never ban', async () => {
      const { admit, calls } = gatekeeper({ RATE_LIMIT_FREE: '1/100', BAN_SECONDS: '0' }, { [LIVE]: record('key_a') })
      for (let i = 0; i < 10; i++) await admit({ token: LIVE })
      assert.equal(calls.bans.length, 0)
    })
  })

  describe(`admission (${mode} limiter): conditional reads`, () => {
    beforeEach(() => { limiterMode = mode })

    test('when the client holds the current representation and the key has quota, then it is not modified and nothing is counted', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '2/10' }, { [LIVE]: record('key_a') })
      for (let i = 0; i < 5; i++) {
        const admission = await admit({ token: LIVE, holdsCurrent: async () => true })
        assert.equal(admission.outcome, 'not_modified')
        assert.equal(admission.quota.shown.remaining, 2)
      }
    })

    test('when the key has spent its quota, then holding the current representation is no free pass', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '1/10' }, { [LIVE]: record('key_a') })
      await admit({ token: LIVE })
      let asked = 0
      const admission = await admit({ token: LIVE, holdsCurrent: async () => { asked++; return true } })
      assert.equal(admission.outcome, 'limited')
      assert.equal(asked, 0)
    })

    test('when the client does not hold it, or asking fails, then the request is counted like any other', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '5/10' }, { [LIVE]: record('key_a') })
      assert.equal((await admit({ token: LIVE, holdsCurrent: async () => false })).quota.shown.remaining, 4)
      const failing = await admit({ token: LIVE, holdsCurrent: async () => { throw new Error('store down') } })
      assert.equal(failing.outcome, 'admitted')
      assert.equal(failing.quota.shown.remaining, 3)
    })
  })

  describe(`admission (${mode} limiter): scopes, expiry, rotation, last use, status`, () => {
    beforeEach(() => { limiterMode = mode })
    const WRITE: AdmissionRequest['needs'] = { credential: 'required', scope: 'write' }
    const READ: AdmissionRequest['needs'] = { credential: 'required', scope: 'read' }

    test('when a read-only key calls a write operation, then it is counted and refused as insufficient_scope; reads pass', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '5/50' }, { [LIVE]: record('key_r', { scope: 'read' }) })
      const write = await admit({ token: LIVE, needs: WRITE })
      assert.equal(write.outcome, 'insufficient_scope')
      assert.equal(write.outcome === 'insufficient_scope' && write.needed, 'write')
      assert.equal(write.quota.shown.remaining, 4, 'the refused write was counted')
      const read = await admit({ token: LIVE, needs: READ })
      assert.equal(read.outcome, 'admitted')
      assert.equal(read.quota.shown.remaining, 3)
    })

    test('when a write key calls a read or a write operation, then both pass', async () => {
      const { admit } = gatekeeper({}, { [LIVE]: record('key_w', { scope: 'write' }) })
      assert.equal((await admit({ token: LIVE, needs: WRITE })).outcome, 'admitted')
      assert.equal((await admit({ token: LIVE, needs: READ })).outcome, 'admitted')
    })

    test('when a read-only key is over its limit, then a write answers limited, not insufficient_scope', async () => {
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '1/50' }, { [LIVE]: record('key_r', { scope: 'read' }) })
      await admit({ token: LIVE, needs: READ })
      assert.equal((await admit({ token: LIVE, needs: WRITE })).outcome, 'limited')
    })

    test('when a key has expired, then it is unauthenticated as expired and counted against the client address, not the key', async () => {
      const { admit, clock } = gatekeeper({ RATE_LIMIT_ANONYMOUS: '5/50', RATE_LIMIT_FREE: '7/70' },
        { [LIVE]: record('key_e', { expiresAt: new Date(T0 + 1000) }) })
      assert.equal((await admit({ token: LIVE })).outcome, 'admitted')
      clock.now = T0 + 1000
      const expired = await admit({ token: LIVE })
      assert.equal(expired.outcome === 'unauthenticated' && expired.problem, 'expired')
      assert.equal(expired.quota.shown.limit, 5, 'the client address\'s window')
      assert.equal(expired.quota.shown.remaining, 4)
    })

    test('when two keys share a quota (a rotation), then they count in one set of windows', async () => {
      const next = newKey('production')
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '3/50' }, {
        [LIVE]: record('key_old', { replacedBy: 'key_new', expiresAt: new Date(T0 + 86_400_000) }),
        [next]: record('key_new', { quotaId: 'key_old' })
      })
      assert.equal((await admit({ token: LIVE })).quota.shown.remaining, 2)
      assert.equal((await admit({ token: next })).quota.shown.remaining, 1)
      assert.equal((await admit({ token: LIVE })).quota.shown.remaining, 0)
      assert.equal((await admit({ token: next })).outcome, 'limited')
    })

    test('when one key of a shared quota is banned, then the other is banned too', async () => {
      const next = newKey('production')
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '2/50', BAN_STRIKES: '2' }, {
        [LIVE]: record('key_old', { replacedBy: 'key_new', expiresAt: new Date(T0 + 86_400_000) }),
        [next]: record('key_new', { quotaId: 'key_old' })
      })
      const outcomes = []
      for (let i = 0; i < 5; i++) outcomes.push((await admit({ token: LIVE })).outcome)
      // The first refusal told the key when to retry; the two that ignored it are strikes.
      assert.deepEqual(outcomes, ['admitted', 'admitted', 'limited', 'limited', 'banned'])
      assert.equal((await admit({ token: next })).outcome, 'banned')
    })

    test('when a key is used, then its use is recorded at most once a minute, and a deprecated call once a minute apart', async () => {
      const { admit, clock, calls } = gatekeeper({}, { [LIVE]: record('key_u') })
      await admit({ token: LIVE })
      await admit({ token: LIVE })
      clock.now = T0 + 30_000
      await admit({ token: LIVE, needs: { credential: 'required', scope: 'read', deprecated: true } })
      await admit({ token: LIVE, needs: { credential: 'required', scope: 'read', deprecated: true } })
      clock.now = T0 + 60_000
      await admit({ token: LIVE })
      await Promise.resolve()
      assert.deepEqual(calls.uses, [['key_u', T0, null], ['key_u', T0 + 30_000, T0 + 30_000], ['key_u', T0 + 60_000, null]])
    })

    test('when recording a use fails, then the request is still admitted', async () => {
      const { admit, store } = gatekeeper({}, { [LIVE]: record('key_u') })
      store.failUses = true
      assert.equal((await admit({ token: LIVE })).outcome, 'admitted')
    })

    test('when a key asks for its status, then its quota is shown and not spent, and the status budget bounds the asking', async () => {
      const STATUS: AdmissionRequest['needs'] = { credential: 'required', scope: 'read', charge: 'status' }
      const { admit } = gatekeeper({ RATE_LIMIT_FREE: '5/50', RATE_LIMIT_STATUS: '2/10' }, { [LIVE]: record('key_s', { scope: 'read' }) })
      await admit({ token: LIVE })
      for (let i = 0; i < 2; i++) {
        const status = await admit({ token: LIVE, needs: STATUS })
        assert.equal(status.outcome, 'admitted')
        assert.deepEqual(status.quota.windows.map((w) => w.remaining), [4, 49])
      }
      const over = await admit({ token: LIVE, needs: STATUS })
      assert.equal(over.outcome, 'limited')
      assert.equal(over.outcome === 'limited' && over.budget, 'status')
      assert.equal(over.outcome === 'limited' && over.retryAfterSeconds, 60)
      assert.deepEqual(over.quota.shown, { limit: 2, remaining: 0, resetAt: T0 / 1000 + 60 }, 'as every 429: the window that refused, the budget\'s')
      assert.equal((await admit({ token: LIVE })).quota.shown.remaining, 3, 'status calls spent none of the key\'s quota')
    })

    test('when a banned key asks for its status, then it is answered with the ban', async () => {
      const ban = { since: new Date(T0 - 1000), until: new Date(T0 + 600_000), seconds: 900 }
      const { admit } = gatekeeper({}, { [LIVE]: record('key_b', { ban }) })
      assert.equal((await admit({ token: LIVE })).outcome, 'banned')
      const status = await admit({ token: LIVE, needs: { credential: 'required', scope: 'read', charge: 'status' } })
      assert.equal(status.outcome, 'admitted')
      assert.equal(status.quota.shown.remaining, 0)
      assert.equal(status.quota.shown.resetAt, (T0 + 600_000) / 1000)
      assert.deepEqual(status.outcome === 'admitted' && status.usage?.map((w) => w.remaining), [60, 1000], 'the windows as counted: nothing spent')
    })
  })
}

describe('admission without promises', () => {
  test('when a warm key is admitted by the in-process limiter, then the answer comes without a promise and counts once', async () => {
    limiterMode = 'in process'
    const config = loadConfig({ AUTH_CACHE_TTL_MS: '60000', RATE_LIMIT_FREE: '5/50' })
    const key = record('key_a')
    const gate = new Gatekeeper({
      store: { keys: { findApiKeyByHash: async (hash) => hash === hashKey(LIVE) ? key : null, banApiKey: async () => true, recordKeyUse: async () => {} } },
      limiter: new MemoryLimiter({ clock: () => T0 }),
      limits: config.rateLimits,
      environment: config.environment,
      authCacheTtlMs: config.authCacheTtlMs,
      clock: () => T0
    })
    const request: AdmissionRequest = { credentials: { kind: 'bearer', token: LIVE }, client: '192.0.2.1', needs: KEY_REQUIRED }
    const cold = gate.admit(request)
    assert.ok(cold instanceof Promise, 'the first request looks the key up in the store')
    assert.equal((await cold).quota.shown.remaining, 4)
    const warm = gate.admit(request)
    assert.ok(!(warm instanceof Promise))
    assert.equal(warm.outcome, 'admitted')
    assert.equal(warm.quota.shown.remaining, 3)
    const keyless = gate.admit({ ...request, credentials: { kind: 'none' } })
    assert.ok(!(keyless instanceof Promise))
    assert.equal(keyless.outcome, 'unauthenticated')
  })
})

describe('standing: whether a key admitted earlier would still be', () => {
  const bearer = { kind: 'bearer', token: LIVE } as const
  const READ: OperationNeeds = Object.freeze({ credential: 'required', scope: 'read' })

  test('when nothing changed, then the key stands, nothing is counted, and the answer says when to ask again: once its lookup is stale, or at its expiry if sooner', async () => {
    limiterMode = 'in process'
    const config = loadConfig({ AUTH_CACHE_TTL_MS: '60000' })
    const key = record('key_a')
    let lookups = 0
    const limiter = new MemoryLimiter({ clock: () => T0 })
    const gate = new Gatekeeper({
      store: { keys: { findApiKeyByHash: async (hash) => { lookups++; return hash === hashKey(LIVE) ? key : null }, banApiKey: async () => true, recordKeyUse: async () => {} } },
      limiter,
      limits: config.rateLimits,
      environment: config.environment,
      authCacheTtlMs: config.authCacheTtlMs,
      clock: () => T0
    })
    const cold = gate.standing(bearer, READ)
    assert.ok(cold instanceof Promise, 'a key not in the cache is looked up')
    const first = await cold
    assert.equal(first.outcome, 'admitted')
    assert.ok(first.outcome === 'admitted' && first.recheckInMs > 55_000 && first.recheckInMs <= 60_000, JSON.stringify(first))
    const warm = gate.standing(bearer, READ)
    assert.ok(!(warm instanceof Promise), 'a cached key is answered at once')
    assert.equal(lookups, 1)
    assert.equal((await limiter.peek({ kind: 'key', id: 'key_a' }, config.rateLimits.plans.free)).windows[0].remaining, 60, 'nothing counted')
    key.expiresAt = new Date(T0 + 10_000)
    const expiring = gate.standing(bearer, READ)
    assert.ok(!(expiring instanceof Promise) && expiring.outcome === 'admitted' && expiring.recheckInMs === 10_000)
  })

  test('when the key was revoked, expired, banned, or no longer has the scope, then it stands refused as a new request would be, without counting', async () => {
    const { gate, events, store } = gatekeeper({}, { [LIVE]: record('key_a', { scope: 'read' }) })
    const key = await store.findApiKeyByHash(hashKey(LIVE)) as ApiKeyRecord
    const WRITE: OperationNeeds = Object.freeze({ credential: 'required', scope: 'write' })
    const outcome = async (needs = READ) => { const standing = await gate.standing(bearer, needs); return standing.outcome === 'unauthenticated' ? `unauthenticated ${standing.problem}` : standing.outcome }
    assert.equal(await outcome(), 'admitted')
    assert.equal(await outcome(WRITE), 'insufficient_scope')
    key.ban = { since: new Date(T0), until: new Date(T0 + 60_000), seconds: 60 }
    assert.equal(await outcome(), 'banned')
    assert.equal(await outcome({ ...READ, charge: 'status' }), 'admitted', 'a banned key may still ask for its status')
    key.ban = null
    key.expiresAt = new Date(T0)
    assert.equal(await outcome(), 'unauthenticated expired')
    key.expiresAt = null
    key.revokedAt = new Date(T0)
    assert.equal(await outcome(), 'unauthenticated invalid')
    assert.deepEqual(events, [], 'no decision counted')
  })

  test('when the store cannot be asked, then the standing is unavailable', async () => {
    const { gate, store } = gatekeeper({}, { [LIVE]: record('key_a') })
    store.failLookups = true
    assert.equal((await gate.standing(bearer, READ)).outcome, 'unavailable')
  })
})

describe('client addresses', () => {
  test('when IPv6 clients share a /56, then they share one subject; IPv4 and IPv4-mapped clients are one per address', () => {
    assert.deepEqual(clientSubject('2001:db8:aa:bb01::1'), { kind: 'ip', id: '2001:db8:aa:bb00::/56' })
    assert.deepEqual(clientSubject('2001:db8:aa:bbff:ffff::9'), { kind: 'ip', id: '2001:db8:aa:bb00::/56' })
    assert.notDeepEqual(clientSubject('2001:db8:aa:bc00::1'), clientSubject('2001:db8:aa:bb00::1'))
    assert.deepEqual(clientSubject('2001:db8::1', 64), { kind: 'ip', id: '2001:db8::/64' })
    assert.deepEqual(clientSubject('203.0.113.7'), { kind: 'ip', id: '203.0.113.7' })
    assert.deepEqual(clientSubject('::ffff:203.0.113.7'), { kind: 'ip', id: '203.0.113.7' })
    assert.deepEqual(clientSubject('fe80::1%eth0'), { kind: 'ip', id: 'fe80::/56' })
  })

  test('when keyless requests come from many addresses of one IPv6 network, then they share its limit', async () => {
    const { admit } = gatekeeper({ RATE_LIMIT_ANONYMOUS: '3/100' })
    const outcomes = []
    for (let i = 1; i <= 5; i++) outcomes.push((await admit({ client: `2001:db8:0:1${i}::${i}` })).outcome)
    assert.deepEqual(outcomes, ['unauthenticated', 'unauthenticated', 'unauthenticated', 'limited', 'limited'])
    assert.equal((await admit({ client: '2001:db8:0:100::1' })).outcome, 'unauthenticated', 'another /56')
  })
})
