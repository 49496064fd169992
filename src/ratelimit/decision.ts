/**
 * What the backends share: window arithmetic and the shape of a Decision. Both backends only know "counts and
 * a time"; keeping the rest here makes their answers identical by construction.
 */
import { WINDOW_SECONDS, type Decision, type WindowLimits, type WindowName, type WindowState } from './types.js'

/** The index of the fixed window containing `nowSec` (unix seconds); windows are aligned to the UTC epoch. */
export function windowIndex (name: WindowName, nowSec: number): number {
  return Math.floor(nowSec / WINDOW_SECONDS[name])
}

function windowState (name: WindowName, limit: number, count: number, nowSec: number): WindowState {
  const windowSeconds = WINDOW_SECONDS[name]
  return {
    name,
    limit,
    remaining: Math.max(0, limit - count),
    windowSeconds,
    resetAt: (windowIndex(name, nowSec) + 1) * windowSeconds
  }
}

/** Builds the Decision from the counts as they stand after the decision. */
export function buildDecision (
  allowed: boolean, limits: WindowLimits, minuteCount: number, dayCount: number, nowMs: number, strikes: number
): Decision {
  const nowSec = Math.floor(nowMs / 1000)
  return {
    allowed,
    windows: [
      windowState('minute', limits.perMinute, minuteCount, nowSec),
      windowState('day', limits.perDay, dayCount, nowSec)
    ],
    now: nowMs,
    strikes
  }
}

/** The window a client should watch: the lowest remaining; on a tie the one that resets later. */
export function bindingWindow (windows: readonly WindowState[]): WindowState {
  return windows.reduce((a, b) => b.remaining < a.remaining || (b.remaining === a.remaining && b.resetAt > a.resetAt) ? b : a)
}

/**
 * The window a refusal is reported against: one without room for the request's cost (an exhausted one, for a
 * single request); the later-resetting one if both lack room. Its resetAt is the retry time the refusal names
 * (Retry-After), and the time before which a new request is a strike.
 */
export function violatedWindow (windows: readonly WindowState[], cost = 1): WindowState {
  const exhausted = windows.filter((w) => w.remaining < cost)
  return exhausted.length === 0 ? bindingWindow(windows) : exhausted.reduce((a, b) => b.resetAt > a.resetAt ? b : a)
}
