/**
 * The RateLimiter contract: one suite every backend must pass. Each implementation's test file calls
 * limiterContract() with a function that opens a fresh limiter for one test (registering its cleanup on that
 * test's context) and a way to move the limiter's time. Tests first move to the start of a fresh UTC minute
 * (or day), so no window rolls over mid-test even where real time also runs (Redis TIME).
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { Decision, RateLimiter, Subject, WindowLimits } from '../../src/ratelimit/types.js'

/** A key subject and a client-address subject, for tests. */
export const key = (id: string): Subject => ({ kind: 'key', id })
export const ip = (id: string): Subject => ({ kind: 'ip', id })

export interface OpenedLimiter {
  limiter: RateLimiter
  /** Moves the limiter's time forward by this many seconds (fractions allowed, millisecond precision). */
  advance: (seconds: number) => void
}

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000

/** The limiter's current time in ms, read through a subject no test uses. */
async function limiterNow (limiter: RateLimiter): Promise<number> {
  return (await limiter.peek(key('__clock__'), { perMinute: 1, perDay: 1 })).now
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

async function consumeTimes (limiter: RateLimiter, subject: Subject, limits: WindowLimits, times: number): Promise<Decision[]> {
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
      const decisions = await Promise.all(Array.from({ length: 15 }, () => opened.limiter.consume(key('burst'), limits)))
      assert.equal(allowedCount(decisions), 5)
      // Each admitted request saw a distinct count: remaining 4, 3, 2, 1, 0 once each.
      assert.deepEqual(decisions.filter((d) => d.allowed).map((d) => minuteOf(d).remaining).sort(), [0, 1, 2, 3, 4])
      const next = await opened.limiter.consume(key('burst'), limits)
      assert.equal(next.allowed, false)
      assert.equal(minuteOf(next).remaining, 0)
      assert.equal(dayOf(next).remaining, 995)
    })

    test('a request that counts as several passes only while both windows have room for all of them, and counts all or none', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 10, perDay: 12 }
      const first = await opened.limiter.consume(key('heavy'), limits, { cost: 6 })
      assert.deepEqual([first.allowed, minuteOf(first).remaining, dayOf(first).remaining], [true, 4, 6])
      const refused = await opened.limiter.consume(key('heavy'), limits, { cost: 5 })
      assert.deepEqual([refused.allowed, minuteOf(refused).remaining, dayOf(refused).remaining], [false, 4, 6], 'refused whole: nothing counted')
      assert.equal((await opened.limiter.consume(key('heavy'), limits, { cost: 4 })).allowed, true)
      opened.advance(60)
      // A new minute has room for 10, but the day has only 2 left.
      assert.equal((await opened.limiter.consume(key('heavy'), limits, { cost: 3 })).allowed, false)
      const last = await opened.limiter.consume(key('heavy'), limits, { cost: 2 })
      assert.deepEqual([last.allowed, dayOf(last).remaining], [true, 0])
      // Concurrent heavy requests never overspend a window.
      const other = await Promise.all(Array.from({ length: 8 }, () => opened.limiter.consume(key('heavy-2'), { perMinute: 10, perDay: 100 }, { cost: 3 })))
      assert.equal(allowedCount(other), 3)
    })

    test('refused requests consume nothing', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 2, perDay: 10 }
      assert.equal(allowedCount(await consumeTimes(opened.limiter, key('refused'), limits, 2)), 2)
      const refusals = await consumeTimes(opened.limiter, key('refused'), limits, 5)
      for (const refusal of refusals) {
        assert.equal(refusal.allowed, false)
        assert.equal(minuteOf(refusal).remaining, 0)
        assert.equal(dayOf(refusal).remaining, 8)
      }
      assert.equal(dayOf(await opened.limiter.peek(key('refused'), limits)).remaining, 8)
      // The next minute admits a full minute's worth: the refusals did not count in the minute either.
      opened.advance(60)
      assert.equal(allowedCount(await consumeTimes(opened.limiter, key('refused'), limits, 3)), 2)
      assert.equal(dayOf(await opened.limiter.peek(key('refused'), limits)).remaining, 6)
    })

    test('the minute window rolls over at the UTC minute while the day keeps counting', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 3, perDay: 100 }
      assert.equal(allowedCount(await consumeTimes(opened.limiter, key('roll'), limits, 4)), 3)
      opened.advance(59)
      assert.equal((await opened.limiter.consume(key('roll'), limits)).allowed, false, 'still the same minute')
      opened.advance(1)
      const admitted = await opened.limiter.consume(key('roll'), limits)
      assert.equal(admitted.allowed, true)
      assert.equal(minuteOf(admitted).remaining, 2)
      assert.equal(dayOf(admitted).remaining, 96)
    })

    test('the day window binds across minutes until the next UTC day', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, DAY_MS)
      const limits = { perMinute: 5, perDay: 7 }
      const first = await consumeTimes(opened.limiter, key('daily'), limits, 6)
      assert.equal(allowedCount(first), 5)
      assert.equal(dayOf(first[5]!).remaining, 2)

      opened.advance(60)
      const second = await consumeTimes(opened.limiter, key('daily'), limits, 3)
      assert.deepEqual(second.map((d) => d.allowed), [true, true, false])
      const refused = second[2]!
      assert.equal(dayOf(refused).remaining, 0)
      assert.equal(minuteOf(refused).remaining, 3, 'the minute still has room: the day is what refuses')

      opened.advance(3600)
      assert.equal((await opened.limiter.consume(key('daily'), limits)).allowed, false, 'later the same day')

      await toNextBoundary(opened, DAY_MS)
      const nextDay = await opened.limiter.consume(key('daily'), limits)
      assert.equal(nextDay.allowed, true)
      assert.equal(dayOf(nextDay).remaining, 6)
      assert.equal(minuteOf(nextDay).remaining, 4)
    })

    test('windows report name, limit, remaining, windowSeconds and resetAt on UTC boundaries in unix seconds', async (t) => {
      const opened = await open(t)
      const start = await toNextBoundary(opened, MINUTE_MS)
      opened.advance(12.5)
      const limits = { perMinute: 4, perDay: 9 }
      await opened.limiter.consume(key('shape'), limits)
      const decision = await opened.limiter.consume(key('shape'), limits)
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

      const peeked = await opened.limiter.peek(key('shape'), limits)
      assert.deepEqual(peeked.windows, decision.windows)
    })

    test('a refusal is a strike only when it comes before the retry time of the previous refusal, and only when asked for', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 1, perDay: 100 }
      const strikes = { strikes: { windowSeconds: 600, threshold: 100 } }
      const admitted = await opened.limiter.consume(key('striker'), limits, strikes)
      assert.equal(admitted.allowed, true)
      assert.equal(admitted.strikes, 0, 'an admitted request is no strike')

      const first = await opened.limiter.consume(key('striker'), limits, strikes)
      assert.equal(first.allowed, false)
      assert.equal(first.strikes, 0, 'the first refusal is no strike: the client could not know')

      const uncounted = await opened.limiter.consume(key('striker'), limits)
      assert.equal(uncounted.allowed, false)
      assert.equal(uncounted.strikes, 0, 'no strike policy, no strikes')

      assert.deepEqual(
        [
          (await opened.limiter.consume(key('striker'), limits, strikes)).strikes,
          (await opened.limiter.consume(key('striker'), limits, strikes)).strikes
        ],
        [1, 2],
        'refusals before the minute the first refusal named are strikes'
      )
      opened.advance(60)
      const patient = await opened.limiter.consume(key('striker'), limits, strikes)
      assert.equal(patient.allowed, true, 'waiting as told admits again')
      const refusedAgain = await opened.limiter.consume(key('striker'), limits, strikes)
      assert.equal(refusedAgain.strikes, 0, 'the first refusal after waiting is again no strike')
      assert.equal((await opened.limiter.consume(key('striker'), limits, strikes)).strikes, 3, 'the strike window keeps counting')
    })

    test('a client that always waits until the retry time it was told collects no strikes, whatever its limits', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, DAY_MS)
      const limits = { perMinute: 2, perDay: 3 }
      const strikes = { strikes: { windowSeconds: 600, threshold: 1 } }
      const seen: Array<[boolean, number]> = []
      const send = async (): Promise<Decision> => {
        const decision = await opened.limiter.consume(key('patient'), limits, strikes)
        seen.push([decision.allowed, decision.strikes])
        return decision
      }
      await send()
      await send()
      const minute = await send()
      // Waits exactly until the minute window the refusal named has reset.
      opened.advance(minute.windows[0].resetAt - minute.now / 1000)
      await send()
      const day = await send()
      assert.equal(day.allowed, false)
      opened.advance(day.windows[1].resetAt - day.now / 1000)
      await send()
      assert.deepEqual(seen, [[true, 0], [true, 0], [false, 0], [true, 0], [false, 0], [true, 0]])
    })

    test('strikes restart after the strike window, and after reaching the threshold, which is reported once', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, DAY_MS)
      const limits = { perMinute: 1, perDay: 100 }
      const strikes = { strikes: { windowSeconds: 30, threshold: 3 } }
      await opened.limiter.consume(key('striker'), limits, strikes)
      await opened.limiter.consume(key('striker'), limits, strikes)
      const counts = []
      for (let i = 0; i < 5; i++) counts.push((await opened.limiter.consume(key('striker'), limits, strikes)).strikes)
      assert.deepEqual(counts, [1, 2, 3, 1, 2], 'the threshold is reported once, then counting starts over')
      opened.advance(29)
      assert.equal((await opened.limiter.consume(key('striker'), limits, strikes)).strikes, 3, 'still within the strike window')
      opened.advance(1.5)
      assert.equal((await opened.limiter.consume(key('striker'), limits, strikes)).strikes, 1, 'a new strike window')
    })

    test('peek counts nothing', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 2, perDay: 5 }
      const fresh = await opened.limiter.peek(key('peeked'), limits)
      assert.equal(fresh.allowed, true)
      assert.equal(minuteOf(fresh).remaining, 2)
      assert.equal(dayOf(fresh).remaining, 5)
      for (let i = 0; i < 5; i++) await opened.limiter.peek(key('peeked'), limits)
      assert.equal(allowedCount(await consumeTimes(opened.limiter, key('peeked'), limits, 3)), 2)
      const exhausted = await opened.limiter.peek(key('peeked'), limits)
      assert.equal(exhausted.allowed, false, 'peek tells whether a consume would pass')
      assert.equal(exhausted.strikes, 0)
      assert.equal(minuteOf(exhausted).remaining, 0)
      assert.equal(dayOf(exhausted).remaining, 3)
    })

    test('peek under limits lower than what was counted reports the window spent, never a negative remainder', async (t) => {
      // What a usage reader sees when the plan's limits were lowered (PLANS) after the requests were counted.
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      await consumeTimes(opened.limiter, key('lowered'), { perMinute: 10, perDay: 100 }, 5)
      const peeked = await opened.limiter.peek(key('lowered'), { perMinute: 3, perDay: 4 })
      assert.equal(peeked.allowed, false)
      assert.deepEqual([minuteOf(peeked).limit, minuteOf(peeked).remaining, dayOf(peeked).limit, dayOf(peeked).remaining], [3, 0, 4, 0])
      const raised = await opened.limiter.peek(key('lowered'), { perMinute: 10, perDay: 100 })
      assert.deepEqual([minuteOf(raised).remaining, dayOf(raised).remaining], [5, 95], 'nothing was counted by the peeks')
    })

    test('reset clears the windows and strikes of a subject, and only of that subject', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 1, perDay: 10 }
      const strikes = { strikes: { windowSeconds: 60, threshold: 100 } }
      await consumeTimes(opened.limiter, key('other'), limits, 1)
      await consumeTimes(opened.limiter, key('cleared'), limits, 2)
      await opened.limiter.consume(key('cleared'), limits, strikes)
      await opened.limiter.consume(key('cleared'), limits, strikes)
      assert.equal((await opened.limiter.consume(key('cleared'), limits, strikes)).strikes, 2)

      await opened.limiter.reset(key('cleared'))
      const after = await opened.limiter.consume(key('cleared'), limits, strikes)
      assert.equal(after.allowed, true)
      assert.equal(dayOf(after).remaining, 9)
      assert.equal((await opened.limiter.consume(key('cleared'), limits, strikes)).strikes, 0, 'no retry time is pending after a reset')
      assert.equal((await opened.limiter.consume(key('cleared'), limits, strikes)).strikes, 1)
      assert.equal((await opened.limiter.peek(key('other'), limits)).allowed, false, 'other subjects keep their counts')
      await opened.limiter.reset(key('never-seen'))
    })

    test('subjects are independent', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const limits = { perMinute: 2, perDay: 10 }
      assert.equal(allowedCount(await consumeTimes(opened.limiter, key('alpha'), limits, 3)), 2)
      const beta = await opened.limiter.consume(key('beta'), limits)
      assert.equal(beta.allowed, true)
      assert.equal(minuteOf(beta).remaining, 1)
      assert.equal(dayOf(beta).remaining, 9)
    })

    test('subjects with colons, braces, percent signs and IPv6 addresses, of either kind, are distinct and work', async (t) => {
      const opened = await open(t)
      await toNextBoundary(opened, MINUTE_MS)
      const ids = [
        'a', 'a:b', 'a:b:m', '{a}', 'a}', '{a', '}', '{', '{}', '', '%', '%7B', '%7Ba%7D', 'x}{y',
        '2001:db8::1', '::1', '::ffff:192.0.2.1', 'fe80::1%eth0', '[2001:db8::1]:443', 'ip:{2001:db8::1}', 'key:a'
      ]
      const subjects = [...ids.map(key), ...ids.map(ip)]
      const limits = { perMinute: 3, perDay: 10 }
      // Subject i consumes i % 3 + 1 times; any collision between two subjects would show in the counts.
      for (const [i, subject] of subjects.entries()) await consumeTimes(opened.limiter, subject, limits, (i % 3) + 1)
      for (const [i, subject] of subjects.entries()) {
        const peeked = await opened.limiter.peek(subject, limits)
        assert.equal(minuteOf(peeked).remaining, 3 - ((i % 3) + 1), `subject ${JSON.stringify(subject)}`)
        assert.equal(dayOf(peeked).remaining, 10 - ((i % 3) + 1), `subject ${JSON.stringify(subject)}`)
      }
      await opened.limiter.reset(key('{a}'))
      assert.equal(minuteOf(await opened.limiter.peek(key('{a}'), limits)).remaining, 3)
      assert.equal(minuteOf(await opened.limiter.peek(key('a'), limits)).remaining, 2)
    })
  })
}
