import { buildDecision, windowIndex } from './decision.js'
import type { ConsumeOptions, Decision, RateLimiter, WindowLimits } from './types.js'

/** How often (in limiter time) the sweep looks for entries whose windows and strikes have all passed. */
const SWEEP_INTERVAL_MS = 60_000

interface Entry {
  minuteWindow: number
  minuteCount: number
  dayWindow: number
  dayCount: number
  /** Strikes in the current strike window; 0 when none. */
  strikes: number
  /** When the current strike window started (ms). */
  strikeStart: number
  /** When it ends, from the latest strike window length (ms); only used by the sweep. */
  strikeEnd: number
}

export interface MemoryLimiterOptions {
  /** Milliseconds since the epoch; Date.now by default. Tests inject their own to move time. */
  clock?: () => number
  /**
   * The most subjects held at once (default 200,000, about 40 MB). A flood of new subjects (say, unauthenticated
   * requests from many IPv6 addresses) then evicts the subjects first seen longest ago instead of growing
   * memory without bound; an evicted subject starts over with fresh windows.
   */
  maxSubjects?: number
}

export const DEFAULT_MAX_SUBJECTS = 200_000

/**
 * The in-process limiter: one Map entry per subject holding both fixed windows and the strike counter. Every
 * method is synchronous inside (no await between read and write), so it is exact within one process under any
 * concurrency, but each process counts on its own.
 *
 * Memory stays bounded: there are no timers per key; an amortized sweep, at most once per minute of limiter
 * time, deletes entries whose day window and strikes have passed, and a hard cap (maxSubjects) holds under a
 * flood of new subjects.
 */
export class MemoryLimiter implements RateLimiter {
  readonly kind = 'memory'
  readonly #clock: () => number
  readonly #entries = new Map<string, Entry>()
  readonly #maxSubjects: number
  #lastSweep = Number.NEGATIVE_INFINITY

  constructor (options: MemoryLimiterOptions = {}) {
    this.#clock = options.clock ?? Date.now
    this.#maxSubjects = options.maxSubjects ?? DEFAULT_MAX_SUBJECTS
  }

  /** Subjects currently held (for tests and metrics). */
  get size (): number {
    return this.#entries.size
  }

  async consume (subject: string, limits: WindowLimits, options: ConsumeOptions = {}): Promise<Decision> {
    const now = this.#now()
    const nowSec = Math.floor(now / 1000)
    const minute = windowIndex('minute', nowSec)
    const day = windowIndex('day', nowSec)
    let entry = this.#entries.get(subject)
    let minuteCount = entry?.minuteWindow === minute ? entry.minuteCount : 0
    let dayCount = entry?.dayWindow === day ? entry.dayCount : 0
    const allowed = minuteCount < limits.perMinute && dayCount < limits.perDay
    const strikeWindowSeconds = options.strikeWindowSeconds
    if (!allowed && (strikeWindowSeconds === undefined || strikeWindowSeconds <= 0)) {
      return buildDecision(false, limits, minuteCount, dayCount, now, 0)
    }

    if (entry === undefined) {
      this.#makeRoom(now)
      entry = { minuteWindow: minute, minuteCount: 0, dayWindow: day, dayCount: 0, strikes: 0, strikeStart: 0, strikeEnd: 0 }
      this.#entries.set(subject, entry)
    }
    if (allowed) {
      minuteCount++
      dayCount++
      entry.minuteWindow = minute
      entry.minuteCount = minuteCount
      entry.dayWindow = day
      entry.dayCount = dayCount
      return buildDecision(true, limits, minuteCount, dayCount, now, 0)
    }

    // A fixed strike window opened by the first strike: bans look at bursts of refusals, not at a sliding log.
    const windowMs = (strikeWindowSeconds ?? 0) * 1000
    if (entry.strikes === 0 || now - entry.strikeStart >= windowMs) {
      entry.strikes = 0
      entry.strikeStart = now
    }
    entry.strikes++
    entry.strikeEnd = entry.strikeStart + windowMs
    return buildDecision(false, limits, minuteCount, dayCount, now, entry.strikes)
  }

  async peek (subject: string, limits: WindowLimits): Promise<Decision> {
    const now = this.#now()
    const nowSec = Math.floor(now / 1000)
    const entry = this.#entries.get(subject)
    const minuteCount = entry?.minuteWindow === windowIndex('minute', nowSec) ? entry.minuteCount : 0
    const dayCount = entry?.dayWindow === windowIndex('day', nowSec) ? entry.dayCount : 0
    const allowed = minuteCount < limits.perMinute && dayCount < limits.perDay
    return buildDecision(allowed, limits, minuteCount, dayCount, now, 0)
  }

  async reset (subject: string): Promise<void> {
    this.#entries.delete(subject)
  }

  async close (): Promise<void> {
    this.#entries.clear()
  }

  /** The current time, running the sweep first when it is due. */
  #now (): number {
    const now = this.#clock()
    // A clock that went backwards (tests, NTP steps) would otherwise postpone the sweep indefinitely.
    if (now - this.#lastSweep >= SWEEP_INTERVAL_MS || now < this.#lastSweep) this.#sweep(now)
    return now
  }

  /** Before a new subject: drop what has expired, then, if still full, the subject first seen longest ago. */
  #makeRoom (now: number): void {
    if (this.#entries.size < this.#maxSubjects) return
    this.#sweep(now)
    // A Map iterates in insertion order: the first key is the oldest subject.
    for (const subject of this.#entries.keys()) {
      if (this.#entries.size < this.#maxSubjects) break
      this.#entries.delete(subject)
    }
  }

  #sweep (now: number): void {
    this.#lastSweep = now
    const day = windowIndex('day', Math.floor(now / 1000))
    // Deleting the current key while iterating a Map is safe: iteration continues with the next one.
    for (const [subject, entry] of this.#entries) {
      if (entry.dayWindow === day) continue
      if (entry.strikes > 0 && now < entry.strikeEnd) continue
      this.#entries.delete(subject)
    }
  }
}
