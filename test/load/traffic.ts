/**
 * The load run's HTTP side: every request goes through one Traffic, which counts the answers by status, keeps each
 * 5xx or failed request, and records every admitted request in the rate-limit window the server named for it (its
 * `RateLimit` field), so that the run can check afterwards that no quota got more than its limit in any window.
 */
import { setTimeout as sleep } from 'node:timers/promises'

/** An answer, read whole. */
export interface Answer {
  status: number
  headers: Headers
  body: string
}

/** What a request may carry, besides its URL. */
export interface Call {
  method?: string
  headers?: Record<string, string>
  body?: string
}

/** The windows of a `RateLimit` field: `"minute";r=R;t=T, "day";r=R;t=T`. */
export interface Quota {
  minute: { remaining: number, reset: number }
  day: { remaining: number, reset: number }
}

export function parseRateLimit (field: string | null): Quota | null {
  const match = /"minute";r=(\d+);t=(\d+), "day";r=(\d+);t=(\d+)/.exec(field ?? '')
  if (match === null) return null
  return { minute: { remaining: Number(match[1]), reset: Number(match[2]) }, day: { remaining: Number(match[3]), reset: Number(match[4]) } }
}

export class Traffic {
  readonly statuses = new Map<number, number>()
  /** 5xx answers and requests that got no answer at all. */
  readonly failures: string[] = []
  /** Answers a client did not expect (a polite writer's 4xx, a replay that was not one), with what it expected. */
  readonly surprises: string[] = []
  /** Admitted requests per `quota|window|end of window`. */
  readonly windows = new Map<string, number>()

  /** Sends one request; null when no answer came (recorded as a failure). */
  async send (url: string, init: Call = {}): Promise<Answer | null> {
    try {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) })
      const answer = { status: res.status, headers: res.headers, body: await res.text() }
      this.statuses.set(answer.status, (this.statuses.get(answer.status) ?? 0) + 1)
      if (answer.status >= 500) this.failures.push(`${init.method ?? 'GET'} ${url} -> ${answer.status} ${answer.body.slice(0, 200)}`)
      return answer
    } catch (error) {
      this.failures.push(`${init.method ?? 'GET'} ${url} -> ${(error as Error).message}`)
      return null
    }
  }

  /**
   * Counts an admitted request of `quota` in both windows the server named. The window's end is rounded to 5 s:
   * a request and its answer may straddle a second, and two instances' clocks read the same window a little apart.
   */
  admitted (quota: string, answer: Answer): void {
    const fields = parseRateLimit(answer.headers.get('ratelimit'))
    if (fields === null) return
    const now = Math.floor(Date.now() / 1000)
    for (const window of ['minute', 'day'] as const) {
      const id = `${quota}|${window}|${Math.round((now + fields[window].reset) / 5) * 5}`
      this.windows.set(id, (this.windows.get(id) ?? 0) + 1)
    }
  }

  surprise (what: string): void {
    this.surprises.push(what)
  }

  total (): number {
    let total = 0
    for (const n of this.statuses.values()) total += n
    return total
  }

  /** The share of answers in 200-299. */
  successShare (): number {
    let ok = 0
    for (const [status, n] of this.statuses) if (status >= 200 && status < 300) ok += n
    return ok / Math.max(1, this.total())
  }
}

/**
 * Paces a client to `perSecond` requests: each call waits for its slot. A client that fell behind (a slow answer)
 * does not burst to catch up beyond one second's worth.
 */
export class Pace {
  #next = Date.now()
  readonly #interval: number

  constructor (perSecond: number) {
    this.#interval = 1000 / perSecond
  }

  async slot (): Promise<void> {
    const now = Date.now()
    this.#next = Math.max(this.#next + this.#interval, now - 1000)
    if (this.#next > now) await sleep(this.#next - now)
  }
}

/**
 * What a client that respects its limits does after an answer: after a 429 it waits Retry-After; when the answer
 * says the minute's quota is spent, it waits for the window to reset. Returns the milliseconds waited.
 */
export async function respectLimits (answer: Answer, until: number): Promise<number> {
  let seconds = 0
  if (answer.status === 429) seconds = Number(answer.headers.get('retry-after') ?? 1)
  else {
    const quota = parseRateLimit(answer.headers.get('ratelimit'))
    if (quota !== null && (quota.minute.remaining === 0 || quota.day.remaining === 0)) {
      seconds = quota.minute.remaining === 0 ? quota.minute.reset : quota.day.reset
    }
  }
  const ms = Math.min(seconds * 1000, Math.max(0, until - Date.now()))
  if (ms > 0) await sleep(ms)
  return ms
}
