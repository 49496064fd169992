/**
 * Authentication and rate limiting of every /v1 request, in one onRequest hook so that each answer (2xx,
 * 401, 404, 405, 429, 5xx) carries the rate-limit headers:
 * - a request with a valid key counts against the key's two windows (minute and day);
 * - a request without a valid key is never charged to a key: it counts against its client IP, then gets 401;
 * - a banned key gets 429 key_banned without counting;
 * - a key refused N times within the strike window is banned (docs/decisions.md, "Rate limits").
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { RateLimitConfig } from '../../config.js'
import { isBanned, nextBan, strikeThreshold } from '../../domain/bans.js'
import { limitsOf, type ApiKeyRecord } from '../../domain/model.js'
import type { Authenticator } from '../../domain/keys.js'
import { AppError } from '../../errors.js'
import type { Decision, RateLimiter, WindowLimits, WindowState } from '../../ratelimit/types.js'
import type { Metrics } from '../../metrics/index.js'
import type { Store } from '../../store/types.js'
import { noneMatch } from '../preconditions.js'
import { authenticate } from './auth.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * For a conditional GET: the resource's current ETag (null when there is none, e.g. an unknown or malformed
     * id: the handler answers). When If-None-Match matches it, the hook answers 304 and counts nothing (as
     * GitHub does for conditional requests).
     */
    currentETag?: (request: FastifyRequest) => Promise<string | null>
  }
}

export interface RateLimitDeps {
  limiter: RateLimiter
  authenticator: Authenticator
  store: Store
  config: RateLimitConfig
  clock: () => number
  /** Counts decisions and bans (petstore_ratelimit_*); never with key ids or IPs. */
  metrics?: Pick<Metrics, 'recordDecision' | 'recordBan'>
}

const NO_METRICS: Pick<Metrics, 'recordDecision' | 'recordBan'> = { recordDecision: () => {}, recordBan: () => {} }

/** The window the X-RateLimit-* headers describe: the lowest remaining; on a tie the one that resets later. */
export function bindingWindow (windows: readonly WindowState[]): WindowState {
  return windows.reduce((a, b) => b.remaining < a.remaining || (b.remaining === a.remaining && b.resetAt > a.resetAt) ? b : a)
}

/** The window a refusal is reported against: an exhausted one; the later-resetting one if both are. */
export function violatedWindow (windows: readonly WindowState[]): WindowState {
  const exhausted = windows.filter((w) => w.remaining === 0)
  return exhausted.length === 0 ? bindingWindow(windows) : exhausted.reduce((a, b) => b.resetAt > a.resetAt ? b : a)
}

/** Sets the X-RateLimit-* fields (one window) and the IETF RateLimit-Policy / RateLimit fields (both windows). */
export function setRateLimitHeaders (reply: FastifyReply, decision: Decision, shown: WindowState): void {
  const nowSeconds = Math.floor(decision.now / 1000)
  const [minute, day] = decision.windows
  reply.header('X-RateLimit-Limit', shown.limit)
  reply.header('X-RateLimit-Remaining', shown.remaining)
  reply.header('X-RateLimit-Reset', shown.resetAt)
  reply.header('RateLimit-Policy', `"minute";q=${minute.limit};w=${minute.windowSeconds}, "day";q=${day.limit};w=${day.windowSeconds}`)
  reply.header('RateLimit', `"minute";r=${minute.remaining};t=${minute.resetAt - nowSeconds}, "day";r=${day.remaining};t=${day.resetAt - nowSeconds}`)
}

function secondsUntil (instantSeconds: number, nowMs: number): number {
  return Math.max(1, Math.ceil(instantSeconds - nowMs / 1000))
}

function rateLimited (reply: FastifyReply, decision: Decision): AppError {
  const violated = violatedWindow(decision.windows)
  setRateLimitHeaders(reply, decision, { ...violated, remaining: 0 })
  const retryAfter = secondsUntil(violated.resetAt, decision.now)
  return new AppError('rate_limited', `Rate limit of ${violated.limit} requests per ${violated.name} exceeded; retry in ${retryAfter} s.`,
    { 'Retry-After': String(retryAfter) })
}

function banned (reply: FastifyReply, decision: Decision, until: Date): AppError {
  setRateLimitHeaders(reply, decision, bindingWindow(decision.windows))
  const retryAfter = secondsUntil(until.getTime() / 1000, decision.now)
  return new AppError('key_banned', `This API key is banned until ${until.toISOString()} for sending requests after 429; retry in ${retryAfter} s.`,
    { 'Retry-After': String(retryAfter) })
}

/** Paths under /v1 are authenticated and limited, except the API document. */
function isLimited (url: string): boolean {
  if (!url.startsWith('/v1')) return false
  const query = url.indexOf('?')
  const path = query === -1 ? url : url.slice(0, query)
  return (path === '/v1' || path.startsWith('/v1/')) && path !== '/v1/openapi.json'
}

export function registerRateLimit (app: FastifyInstance, deps: RateLimitDeps): void {
  const { limiter, authenticator, store, config, clock } = deps
  const bans = config.bans
  const metrics = deps.metrics ?? NO_METRICS

  /** Answers 304 to a matching conditional GET; true when it did. */
  async function notModified (request: FastifyRequest, reply: FastifyReply, subject: string, limits: WindowLimits): Promise<boolean> {
    const currentETag = request.routeOptions.config.currentETag
    const header = request.headers['if-none-match']
    if (currentETag === undefined || header === undefined || (request.method !== 'GET' && request.method !== 'HEAD')) return false
    const etag = await currentETag(request)
    if (etag === null || !noneMatch(header, etag)) return false
    const decision = await limiter.peek(subject, limits)
    setRateLimitHeaders(reply, decision, bindingWindow(decision.windows))
    await reply.code(304).header('ETag', etag).send()
    return true
  }

  /** Counts a request of an authenticated key; false when the request has been answered already (304). */
  async function limitKey (request: FastifyRequest, reply: FastifyReply, key: ApiKeyRecord, token: string): Promise<boolean> {
    const limits = limitsOf(key, config.plans) ?? config.anonymous
    const subject = `key:${key.id}`
    if (isBanned(key.ban, clock())) {
      metrics.recordDecision('key', 'banned')
      throw banned(reply, await limiter.peek(subject, limits), key.ban.until)
    }
    if (await notModified(request, reply, subject, limits)) {
      metrics.recordDecision('key', 'not_modified')
      return false
    }

    const decision = await limiter.consume(subject, limits, bans === null ? {} : { strikeWindowSeconds: bans.strikeWindowSeconds })
    if (decision.allowed) {
      metrics.recordDecision('key', 'allowed')
      setRateLimitHeaders(reply, decision, bindingWindow(decision.windows))
      return true
    }
    if (bans !== null && decision.strikes === strikeThreshold(bans, limits.perMinute)) {
      const ban = nextBan(key.ban, clock(), bans)
      let recorded = false
      try {
        recorded = await store.banApiKey(key.id, ban)
      } catch (error) {
        request.log.error({ err: error, keyId: key.id }, 'could not record a ban; answering 429 without it')
      }
      if (recorded) {
        authenticator.forget(token)
        request.log.warn({ keyId: key.id, bannedUntil: ban.until.toISOString(), banSeconds: ban.seconds, strikes: decision.strikes }, 'API key banned for ignoring 429')
        metrics.recordBan()
        metrics.recordDecision('key', 'banned')
        throw banned(reply, decision, ban.until)
      }
    }
    metrics.recordDecision('key', 'limited')
    throw rateLimited(reply, decision)
  }

  app.addHook('onRequest', async (request, reply) => {
    if (!isLimited(request.url)) return
    // Authenticated data is per key and changes: no cache may keep it (clients revalidate with If-None-Match).
    reply.header('Cache-Control', 'no-store')
    let key: ApiKeyRecord
    let token: string
    try {
      ({ key, token } = await authenticate(authenticator, request))
    } catch (error) {
      if (!(error instanceof AppError)) {
        // The store failed while looking the key up: its 503 still carries the headers (the client IP's
        // windows, uncounted, since nobody can be charged for the outage).
        const decision = await limiter.peek(`ip:${request.ip}`, config.anonymous)
        setRateLimitHeaders(reply, decision, bindingWindow(decision.windows))
        throw error
      }
      // No valid key: never charged to a key, limited per client IP instead.
      const decision = await limiter.consume(`ip:${request.ip}`, config.anonymous)
      metrics.recordDecision('ip', decision.allowed ? 'allowed' : 'limited')
      if (!decision.allowed) throw rateLimited(reply, decision)
      setRateLimitHeaders(reply, decision, bindingWindow(decision.windows))
      throw error
    }
    request.apiKey = key
    if (!await limitKey(request, reply, key, token)) return reply
  })
}
