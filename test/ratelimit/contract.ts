/**
 * The RateLimiter contract: one suite every backend must pass. Each implementation's test file calls
 * limiterContract() with a function that opens a fresh limiter for one test (registering its cleanup on that
 * test's context) and a way to move the limiter's time. Tests first move to the start of a fresh UTC minute
 * (or day), so no window rolls over mid-test even where real time also runs (Redis TIME).
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { Decision, RateLimiter, WindowLimits } from '../../src/ratelimit/types.js'

export interface OpenedLimiter {
  limiter: RateLimiter
  /** Moves the limiter's time forward by this many seconds (fractions allowed, millisecond precision). */
  advance: (seconds: number) => void
}

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000

/** The limiter's current time in ms, read through a subject no test uses. */
async function limiterNow (limiter: RateLimiter): Promise<number> {
  return (await limiter.peek('__clock__', { perMinute: 1, perDay: 1 })).now
}

/** Advances to the start of the next window of `ms` (the next UTC minute or day) and returns that time (ms). */
async function toNextBoundary (opened: OpenedLimiter, ms: number): Promise<number> {
  const now = await limiterNow(opened.limiter)
  const next = (Math.floor(now / ms) + 1) * ms
  opened.advance((next - now) / 1000)
  return next
}

const allowedCount = (decisions: Decision[]) => decisions.filter((d) => d.allowed).length
const minuteOf = (d: Decision) => d.windows[0]
const dayOf = (d: Decision) => d.windows[1]

async function consumeTimes (limiter: RateLimiter, subject: string, limits: WindowLimits, times: number): Promise<Decision[]> {
  const decisions: Decision[] = []
  for (let i = 0; i < times; i++) decisions.push(await limiter.consume(subject, limits))
  return decisions
}

export function limiterContract (name: string, open: (t: TestContext) => Promise<OpenedLimiter>): void {
  describe(`RateLimiter contract: ${name}`, () => {
    test('exactly N of 3N concurrent requests pass, and the next one is refused with remaining 0', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 5, perDay: 1000 }
      const decisions = await Promise.all(Array.from({ length: 15 }, () => opened.limiter.consume('burst', limits)))
      assert.equal(allowedCount(decisions), 5)
      // Each admitted request saw a distinct count: remaining 4, 3, 2, 1, 0 once each.
      assert.deepEqual(decisions.filter((d) => d.allowed).map((d) => minuteOf(d).remaining).sort(), [0, 1, 2, 3, 4])
      const next = await opened.limiter.consume('burst', limits)
      assert.equal(next.allowed, false)
      assert.equal(minuteOf(next).remaining, 0)
      assert.equal(dayOf(next).remaining, 995)
    })

    test('refused requests consume nothing', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 2, perDay: 10 }
      assert.equal(allowedCount(await consumeTimes(opened.limiter, 'refused', limits, 2)), 2)
      const refusals = await consumeTimes(opened.limiter, 'refused', limits, 5)
      for (const refusal of refusals) {
        assert.equal(refusal.allowed, false)
        assert.equal(minuteOf(refusal).remaining, 0)
        assert.equal(dayOf(refusal).remaining, 8)
      }
      assert.equal(dayOf(await opened.limiter.peek('refused', limits)).remaining, 8)
      // The next minute admits a full minute's worth: the refusals did not count in the minute either.
      opened.advance(60)
      assert.equal(allowedCount(await consumeTimes(opened.limiter, 'refused', limits, 3)), 2)
      assert.equal(dayOf(await opened.limiter.peek('refused', limits)).remaining, 6)
    })

    test('the minute window rolls over at the UTC minute while the day keeps counting', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 3, perDay: 100 }
      assert.equal(allowedCount(await consumeTimes(opened.limiter, 'roll', limits, 4)), 3)
      opened.advance(59)
      assert.equal((await opened.limiter.consume('roll', limits)).allowed, false, 'still the same minute')
      opened.advance(1)
      const admitted = await opened.limiter.consume('roll', limits)
      assert.equal(admitted.allowed, true)
      assert.equal(minuteOf(admitted).remaining, 2)
      assert.equal(dayOf(admitted).remaining, 96)
    })

    test('the day window binds across minutes until the next UTC day', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, DAY_MS)
      const limits = { perMinute: 5, perDay: 7 }
      const first = await consumeTimes(opened.limiter, 'daily', limits, 6)
      assert.equal(allowedCount(first), 5)
      assert.equal(dayOf(first[5]!).remaining, 2)

      opened.advance(60)
      const second = await consumeTimes(opened.limiter, 'daily', limits, 3)
      assert.deepEqual(second.map((d) => d.allowed), [true, true, false])
      const refused = second[2]!
      assert.equal(dayOf(refused).remaining, 0)
      assert.equal(minuteOf(refused).remaining, 3, 'the minute still has room: the day is what refuses')

      opened.advance(3600)
      assert.equal((await opened.limiter.consume('daily', limits)).allowed, false, 'later the same day')

      await toNextBoundary(opened, DAY_MS)
      const nextDay = await opened.limiter.consume('daily', limits)
      assert.equal(nextDay.allowed, true)
      assert.equal(dayOf(nextDay).remaining, 6)
      assert.equal(minuteOf(nextDay).remaining, 4)
    })

    test('windows report name, limit, remaining, windowSeconds and resetAt on UTC boundaries in unix seconds', async (t) => {
      const opened = await open(t)
      const start = await toNextBoundary(opened, MINUTE_MS)
      opened.advance(12.5)
      const limits = { perMinute: 4, perDay: 9 }
      await opened.limiter.consume('shape', limits)
      const decision = await opened.limiter.consume('shape', limits)
      assert.equal(decision.allowed, true)
      assert.equal(decision.strikes, 0)
      // The limiter's clock is where we put it (plus whatever real time passed, for Redis).
      assert.ok(decision.now >= start + 12_500 && decision.now < start + 30_000, `now ${decision.now} vs start ${start}`)
      const nowSec = Math.floor(decision.now / 1000)
      const [minute, day] = decision.windows
      assert.deepEqual(minute, { name: 'minute', limit: 4, remaining: 2, windowSeconds: 60, resetAt: start / 1000 + 60 })
      assert.deepEqual(day, {
        name: 'day', limit: 9, remaining: 7, windowSeconds: 86_400, resetAt: (Math.floor(nowSec / 86_400) + 1) * 86_400
      })
      assert.equal(day.resetAt % 86_400, 0)
      assert.ok(day.resetAt > nowSec && day.resetAt - nowSec <= 86_400)

      const peeked = await opened.limiter.peek('shape', limits)
      assert.deepEqual(peeked.windows, decision.windows)
    })

    test('strikes count refusals only when a strike window is asked for, and restart after it passes', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 1, perDay: 100 }
      const strikes = { strikeWindowSeconds: 30 }
      const admitted = await opened.limiter.consume('striker', limits, strikes)
      assert.equal(admitted.allowed, true)
      assert.equal(admitted.strikes, 0, 'an admitted request is no strike')

      const uncounted = await opened.limiter.consume('striker', limits)
      assert.equal(uncounted.allowed, false)
      assert.equal(uncounted.strikes, 0, 'no strike window, no strikes')

      assert.deepEqual(
        [
          (await opened.limiter.consume('striker', limits, strikes)).strikes,
          (await opened.limiter.consume('striker', limits, strikes)).strikes,
          (await opened.limiter.consume('striker', limits, strikes)).strikes
        ],
        [1, 2, 3],
        'the refusal without a strike window did not count'
      )
      assert.equal((await opened.limiter.consume('striker', limits)).strikes, 0)

      opened.advance(29)
      assert.equal((await opened.limiter.consume('striker', limits, strikes)).strikes, 4, 'still within the strike window')
      opened.advance(1.5)
      const restarted = await opened.limiter.consume('striker', limits, strikes)
      assert.equal(restarted.allowed, false, 'still the same minute')
      assert.equal(restarted.strikes, 1, 'the strike window passed: counting starts over')
    })

    test('peek counts nothing', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 2, perDay: 5 }
      const fresh = await opened.limiter.peek('peeked', limits)
      assert.equal(fresh.allowed, true)
      assert.equal(minuteOf(fresh).remaining, 2)
      assert.equal(dayOf(fresh).remaining, 5)
      for (let i = 0; i < 5; i++) await opened.limiter.peek('peeked', limits)
      assert.equal(allowedCount(await consumeTimes(opened.limiter, 'peeked', limits, 3)), 2)
      const exhausted = await opened.limiter.peek('peeked', limits)
      assert.equal(exhausted.allowed, false, 'peek tells whether a consume would pass')
      assert.equal(exhausted.strikes, 0)
      assert.equal(minuteOf(exhausted).remaining, 0)
      assert.equal(dayOf(exhausted).remaining, 3)
    })

    test('reset clears the windows and strikes of a subject, and only of that subject', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 1, perDay: 10 }
      const strikes = { strikeWindowSeconds: 60 }
      await consumeTimes(opened.limiter, 'other', limits, 1)
      await opened.limiter.consume('cleared', limits, strikes)
      await opened.limiter.consume('cleared', limits, strikes)
      assert.equal((await opened.limiter.consume('cleared', limits, strikes)).strikes, 2)

      await opened.limiter.reset('cleared')
      const after = await opened.limiter.consume('cleared', limits, strikes)
      assert.equal(after.allowed, true)
      assert.equal(dayOf(after).remaining, 9)
      assert.equal((await opened.limiter.consume('cleared', limits, strikes)).strikes, 1)
      assert.equal((await opened.limiter.peek('other', limits)).allowed, false, 'other subjects keep their counts')
      await opened.limiter.reset('never-seen')
    })

    test('subjects are independent', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 2, perDay: 10 }
      assert.equal(allowedCount(await consumeTimes(opened.limiter, 'alpha', limits, 3)), 2)
      const beta = await opened.limiter.consume('beta', limits)
      assert.equal(beta.allowed, true)
      assert.equal(minuteOf(beta).remaining, 1)
      assert.equal(dayOf(beta).remaining, 9)
    })

    test('subjects with colons, braces, percent signs and IPv6 addresses are distinct and work', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const subjects = [
        'a', 'a:b', 'a:b:m', '{a}', 'a}', '{a', '}', '{', '{}', '', '%', '%7B', '%7Ba%7D', 'x}{y',
        '2001:db8::1', '::1', '::ffff:192.0.2.1', 'fe80::1%eth0', '[2001:db8::1]:443', 'ip:{2001:db8::1}'
      ]
      const limits = { perMinute: 3, perDay: 10 }
      // Subject i consumes i % 3 + 1 times; any collision between two subjects would show in the counts.
      for (const [i, subject] of subjects.entries()) await consumeTimes(opened.limiter, subject, limits, (i % 3) + 1)
      for (const [i, subject] of subjects.entries()) {
        const peeked = await opened.limiter.peek(subject, limits)
        assert.equal(minuteOf(peeked).remaining, 3 - ((i % 3) + 1), `subject ${JSON.stringify(subject)}`)
        assert.equal(dayOf(peeked).remaining, 10 - ((i % 3) + 1), `subject ${JSON.stringify(subject)}`)
      }
      await opened.limiter.reset('{a}')
      assert.equal(minuteOf(await opened.limiter.peek('{a}', limits)).remaining, 3)
      assert.equal(minuteOf(await opened.limiter.peek('a', limits)).remaining, 2)
    })
  })
}
