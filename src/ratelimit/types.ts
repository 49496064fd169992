/**
 * The limiter contract: two fixed windows per subject (a key or a client address), aligned to the UTC minute
 * and the UTC day. A request passes only if both windows have room, and then counts in both, atomically.
 * Refused requests consume nothing from the windows; they count as "strikes" (for bans) when asked to, and
 * only when they were sent before the time the subject's previous refusal told it to wait for.
 */

export type WindowName = 'minute' | 'day'

export const WINDOW_SECONDS: Record<WindowName, number> = { minute: 60, day: 86_400 }

/**
 * Whose windows: an API key (by its public id) or a client without a valid key (by its address, or its IPv6
 * prefix). The two kinds never share state, and a backend that has to evict keeps them apart (a flood of
 * addresses cannot push out a key's counters).
 */
export interface Subject {
  kind: 'key' | 'ip'
  id: string
}

export interface WindowLimits {
  perMinute: number
  perDay: number
}

export interface WindowState {
  name: WindowName
  /** The window's quota. */
  limit: number
  /** Requests still allowed in this window after this decision (never negative). */
  remaining: number
  /** Window length in seconds (60 or 86400). */
  windowSeconds: number
  /** Unix time in whole seconds at which this window ends and the next begins. */
  resetAt: number
}

export interface Decision {
  allowed: boolean
  /** Both windows: [minute, day], as they stand after this decision. */
  windows: [WindowState, WindowState]
  /** The limiter's current time in milliseconds since the epoch (Redis TIME for the Redis backend). */
  now: number
  /**
   * Strikes of this subject within the strike window, this refusal included when it was one; 0 when allowed,
   * when strikes were not asked for, or when this refusal was no strike. Reaching the policy's threshold
   * restarts the count, so each run of `threshold` strikes is reported exactly once.
   */
  strikes: number
}

/**
 * Which refusals count towards a ban. A refusal is a strike only when it arrives before the retry time named
 * by the subject's previous refusal (the end of the window that refused it, which is what Retry-After told the
 * client): a client that always waits as told never collects a strike, whatever its limits.
 */
export interface StrikePolicy {
  /** Strikes are counted in fixed windows of this many seconds, opened by the first strike. */
  windowSeconds: number
  /** The count at which `strikes` reports a ban and starts over. */
  threshold: number
}

export interface ConsumeOptions {
  /** Count strikes (for bans) under this policy. Omit to count none. */
  strikes?: StrikePolicy
  /**
   * How many requests this one counts as (1 by default): it passes only if both windows have room for all of
   * them, and then counts all of them; otherwise nothing (an operation worth several requests, such as a batch).
   */
  cost?: number
}

export interface RateLimiter {
  /** A short name for logs: "memory" or "redis". */
  readonly kind: string
  /**
   * Checks both windows for `subject` and, only if both have room, counts the request in both (`cost` times).
   * Exactly `limit` requests pass per window, also under concurrency (and, for shared backends, across instances).
   */
  consume (subject: Subject, limits: WindowLimits, options?: ConsumeOptions): Promise<Decision>
  /**
   * The same decision as consume, made synchronously: offered only by a backend that decides without I/O (the
   * in-process limiter), so the common request needs no promise at all. Callers use it when present and fall
   * back to consume.
   */
  consumeNow?(subject: Subject, limits: WindowLimits, options?: ConsumeOptions): Decision
  /** The windows as they stand, without counting anything (for answers that must not consume quota). */
  peek (subject: Subject, limits: WindowLimits): Promise<Decision>
  /** Clears all state of a subject (windows, strikes and its pending retry time). */
  reset (subject: Subject): Promise<void>
  close (): Promise<void>
}

/**
 * A limiter that cannot decide and must not guess: the shared backend is away and the deployment chose to fail
 * closed (RATE_LIMIT_ON_REDIS_DOWN=deny). The request is refused as temporarily unavailable.
 */
export class LimiterUnavailableError extends Error {
  constructor () {
    super('The rate limiter\'s shared store is unavailable.')
    this.name = 'LimiterUnavailableError'
  }
}

/** The text form of a subject, unique per subject: what shared backends key their state by. */
export function subjectKey (subject: Subject): string {
  return `${subject.kind}:${subject.id}`
}
