/**
 * A limiter whose decisions are also shown to an observer (the inventory listing's change watch reads the change
 * counter a shared backend reports with each decision). Everything else is the wrapped limiter's.
 */
import type { ConsumeOptions, Decision, RateLimiter, Subject, WindowLimits } from './types.js'

export function observeDecisions (limiter: RateLimiter, observe: (decision: Decision) => void): RateLimiter {
  const observed: RateLimiter = {
    kind: limiter.kind,
    consume: async (subject: Subject, limits: WindowLimits, options?: ConsumeOptions) => {
      const decision = await limiter.consume(subject, limits, options)
      observe(decision)
      return decision
    },
    peek: async (subject: Subject, limits: WindowLimits) => {
      const decision = await limiter.peek(subject, limits)
      observe(decision)
      return decision
    },
    reset: async (subject: Subject) => { await limiter.reset(subject) },
    close: async () => { await limiter.close() }
  }
  if (limiter.announceChange !== undefined) observed.announceChange = limiter.announceChange.bind(limiter)
  return observed
}
