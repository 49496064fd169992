import { LIMITER_DEFAULTS } from '../config.js'
import { buildDecision, violatedWindow, windowIndex } from './decision.js'
import type { ConsumeOptions, Decision, RateLimiter, Subject, WindowLimits } from './types.js'

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
  /** The retry time (ms) the latest refusal named; a refusal before it is a strike. 0: none. */
  retryAt: number
}

/** An entry where its room keeps it: its subject, and its neighbours in the order subjects were last seen. */
interface Held extends Entry {
  readonly id: string
  older: Held | null
  newer: Held | null
}

export interface MemoryLimiterOptions {
  /** Milliseconds since the epoch; Date.now by default. Tests inject their own to move time. */
  clock?: () => number
  /**
   * The most subjects of each kind held at once (default 200,000 keys and as many client addresses, about
   * 40 MB each at worst). Keys and addresses have rooms of their own, so a flood of new addresses (keyless
   * requests from many IPv6 addresses, forged X-Forwarded-For behind a trusting proxy) evicts only other
   * addresses, least recently seen first, and never a key's windows or strikes. An evicted subject starts over
   * with fresh windows.
   */
  maxSubjects?: number
}

/**
 * The subjects of one kind, least recently seen first. The order is a list through the entries themselves: a read
 * moves its entry to the newest end by relinking it, which allocates nothing. Moving it in the Map (a delete and a
 * set) made V8 rebuild the Map's table in the old generation on every request
 * (docs/adr/0047-no-per-request-garbage-in-the-old-generation.md).
 */
class Room {
  readonly #entries = new Map<string, Held>()
  #oldest: Held | null = null
  #newest: Held | null = null

  constructor (readonly max: number) {}

  get size (): number {
    return this.#entries.size
  }

  /** The entry of a subject, marked as just seen. */
  get (id: string): Entry | undefined {
    const entry = this.#entries.get(id)
    if (entry !== undefined && entry !== this.#newest) {
      this.#unlink(entry)
      this.#append(entry)
    }
    return entry
  }

  /** Adds a new subject; when the room is full, first drops what has expired, then the least recently seen. */
  add (id: string, fields: Entry, now: number): Entry {
    if (this.#entries.size >= this.max) {
      this.sweep(now)
      while (this.#entries.size >= this.max && this.#oldest !== null) this.delete(this.#oldest.id)
    }
    const entry: Held = { ...fields, id, older: null, newer: null }
    this.#entries.set(id, entry)
    this.#append(entry)
    return entry
  }

  delete (id: string): void {
    const entry = this.#entries.get(id)
    if (entry === undefined) return
    this.#unlink(entry)
    this.#entries.delete(id)
  }

  clear (): void {
    this.#entries.clear()
    this.#oldest = null
    this.#newest = null
  }

  /** Deletes entries whose day window and strike window have both passed. */
  sweep (now: number): void {
    const day = windowIndex('day', Math.floor(now / 1000))
    // Deleting the current key while iterating a Map is safe: iteration continues with the next one.
    for (const entry of this.#entries.values()) {
      if (entry.dayWindow === day) continue
      if (entry.strikes > 0 && now < entry.strikeEnd) continue
      this.delete(entry.id)
    }
  }

  #unlink (entry: Held): void {
    if (entry.older === null) this.#oldest = entry.newer
    else entry.older.newer = entry.newer
    if (entry.newer === null) this.#newest = entry.older
    else entry.newer.older = entry.older
    entry.older = null
    entry.newer = null
  }

  #append (entry: Held): void {
    entry.older = this.#newest
    if (this.#newest === null) this.#oldest = entry
    else this.#newest.newer = entry
    this.#newest = entry
  }
}

/**
 * The in-process limiter: one Map entry per subject holding both fixed windows, the strike counter and the
 * pending retry time. Every method is synchronous inside (no await between read and write), so it is exact
 * within one process under any concurrency, but each process counts on its own.
 *
 * Memory stays bounded: there are no timers per key; an amortized sweep, at most once per minute of limiter
 * time, deletes entries whose day window and strikes have passed, and a hard cap per kind of subject
 * (maxSubjects) holds under a flood of new subjects.
 */
export class MemoryLimiter implements RateLimiter {
  readonly kind = 'memory'
  readonly #clock: () => number
  readonly #rooms: Record<Subject['kind'], Room>
  #lastSweep = Number.NEGATIVE_INFINITY

  constructor (options: MemoryLimiterOptions = {}) {
    this.#clock = options.clock ?? Date.now
    const max = options.maxSubjects ?? LIMITER_DEFAULTS.maxSubjects
    this.#rooms = { key: new Room(max), ip: new Room(max) }
  }

  /** Subjects currently held, of both kinds (for tests and metrics). */
  get size (): number {
    return this.#rooms.key.size + this.#rooms.ip.size
  }

  async consume (subject: Subject, limits: WindowLimits, options: ConsumeOptions = {}): Promise<Decision> {
    return this.consumeNow(subject, limits, options)
  }

  consumeNow (subject: Subject, limits: WindowLimits, options: ConsumeOptions = {}): Decision {
    const now = this.#now()
    const nowSec = Math.floor(now / 1000)
    const minute = windowIndex('minute', nowSec)
    const day = windowIndex('day', nowSec)
    const room = this.#rooms[subject.kind]
    let entry = room.get(subject.id)
    let minuteCount = entry?.minuteWindow === minute ? entry.minuteCount : 0
    let dayCount = entry?.dayWindow === day ? entry.dayCount : 0
    const cost = options.cost ?? 1
    const allowed = minuteCount + cost <= limits.perMinute && dayCount + cost <= limits.perDay
    const policy = options.strikes
    if (!allowed && policy === undefined) return buildDecision(false, limits, minuteCount, dayCount, now, 0)

    if (entry === undefined) {
      entry = room.add(subject.id, { minuteWindow: minute, minuteCount: 0, dayWindow: day, dayCount: 0, strikes: 0, strikeStart: 0, strikeEnd: 0, retryAt: 0 }, now)
    }
    if (allowed) {
      minuteCount += cost
      dayCount += cost
      entry.minuteWindow = minute
      entry.minuteCount = minuteCount
      entry.dayWindow = day
      entry.dayCount = dayCount
      return buildDecision(true, limits, minuteCount, dayCount, now, 0)
    }

    const decision = buildDecision(false, limits, minuteCount, dayCount, now, 0)
    if (policy === undefined) return decision
    if (now < entry.retryAt) decision.strikes = this.#strike(entry, now, policy.windowSeconds * 1000, policy.threshold)
    entry.retryAt = Math.max(entry.retryAt, violatedWindow(decision.windows).resetAt * 1000)
    return decision
  }

  async peek (subject: Subject, limits: WindowLimits): Promise<Decision> {
    const now = this.#now()
    const nowSec = Math.floor(now / 1000)
    const entry = this.#rooms[subject.kind].get(subject.id)
    const minuteCount = entry?.minuteWindow === windowIndex('minute', nowSec) ? entry.minuteCount : 0
    const dayCount = entry?.dayWindow === windowIndex('day', nowSec) ? entry.dayCount : 0
    const allowed = minuteCount < limits.perMinute && dayCount < limits.perDay
    return buildDecision(allowed, limits, minuteCount, dayCount, now, 0)
  }

  async reset (subject: Subject): Promise<void> {
    this.#rooms[subject.kind].delete(subject.id)
  }

  async close (): Promise<void> {
    this.#rooms.key.clear()
    this.#rooms.ip.clear()
  }

  /**
   * Counts one strike in a fixed strike window opened by the first strike (bans look at bursts of impatient
   * requests, not at a sliding log); returns the count, and starts over once it reaches the threshold.
   */
  #strike (entry: Entry, now: number, windowMs: number, threshold: number): number {
    if (entry.strikes === 0 || now - entry.strikeStart >= windowMs) {
      entry.strikes = 0
      entry.strikeStart = now
    }
    const strikes = ++entry.strikes
    entry.strikeEnd = entry.strikeStart + windowMs
    if (strikes >= threshold) entry.strikes = 0
    return strikes
  }

  /** The current time, running the sweep first when it is due. */
  #now (): number {
    const now = this.#clock()
    // A clock that went backwards (tests, NTP steps) would otherwise postpone the sweep indefinitely.
    if (now - this.#lastSweep >= SWEEP_INTERVAL_MS || now < this.#lastSweep) {
      this.#lastSweep = now
      this.#rooms.key.sweep(now)
      this.#rooms.ip.sweep(now)
    }
    return now
  }
}
