/**
 * A key's usage as the rate limiter counts it: the current minute and day windows of its quota, read without
 * counting anything (the limiter's peek). Keys made from one another by rotation share one quota, and so one usage.
 */
import type { RateLimitConfig } from '../config.js'
import { limitsOf } from '../domain/rules.js'
import type { ApiKeyRecord } from '../model.js'
import type { RateLimiter, Subject, WindowState } from '../ratelimit/types.js'

export interface WindowUsage {
  /** Requests counted in the window so far (at most the limit: a refused request counts nothing). */
  used: number
  limit: number
  /** When the window ends and the next one begins. */
  resetAt: Date
}

export interface KeyUsage {
  minute: WindowUsage
  day: WindowUsage
}

/** Whose windows a key's requests count in: its quota's (the gate counts a key's requests under this subject). */
export function quotaSubject (key: Pick<ApiKeyRecord, 'quotaId'>): Subject {
  return { kind: 'key', id: key.quotaId }
}

function windowUsage (window: WindowState): WindowUsage {
  return { used: window.limit - window.remaining, limit: window.limit, resetAt: new Date(window.resetAt * 1000) }
}

/** The key's windows as they stand, under the limits the gate applies to it; nothing is counted. */
export async function keyUsage (limiter: RateLimiter, key: ApiKeyRecord, limits: Pick<RateLimitConfig, 'plans' | 'anonymous'>): Promise<KeyUsage> {
  const decision = await limiter.peek(quotaSubject(key), limitsOf(key, limits.plans) ?? limits.anonymous)
  return { minute: windowUsage(decision.windows[0]), day: windowUsage(decision.windows[1]) }
}
