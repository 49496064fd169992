/**
 * The limiter contract: two fixed windows per subject (a key or a client IP), aligned to the UTC minute and
 * the UTC day. A request passes only if both windows have room, and then counts in both, atomically.
 * Refused requests consume nothing from the windows; they count as "strikes" (for bans) when asked to.
 */

export type WindowName = 'minute' | 'day'

export const WINDOW_SECONDS: Record<WindowName, number> = { minute: 60, day: 86_400 }

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
   * Refusals of this subject within the strike window, this one included; 0 when allowed or when strikes
   * were not asked for.
   */
  strikes: number
}

export interface ConsumeOptions {
  /** Count a refusal as a strike, within a window of this many seconds (for bans). Omit to not count. */
  strikeWindowSeconds?: number
}

export interface RateLimiter {
  /** A short name for logs: "memory" or "redis". */
  readonly kind: string
  /**
   * Checks both windows for `subject` and, only if both have room, counts the request in both. Exactly
   * `limit` requests pass per window, also under concurrency (and, for shared backends, across instances).
   */
  consume (subject: string, limits: WindowLimits, options?: ConsumeOptions): Promise<Decision>
  /** The windows as they stand, without counting anything (for answers that must not consume quota). */
  peek (subject: string, limits: WindowLimits): Promise<Decision>
  /** Clears all state of a subject (windows and strikes). */
  reset (subject: string): Promise<void>
  close (): Promise<void>
}
