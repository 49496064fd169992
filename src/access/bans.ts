import type { BanPolicy } from '../config.js'
import type { Ban } from '../model.js'

/** True while the ban is in force at `now` (ms). */
export function isBanned (ban: Ban | null, now: number): ban is Ban {
  return ban !== null && ban.until.getTime() > now
}

/** How many refusals within the strike window trigger a ban for a key with this per-minute limit. */
export function strikeThreshold (policy: BanPolicy, perMinute: number): number {
  return policy.strikes ?? perMinute
}

/**
 * The next ban of a key: the base length, or twice the previous ban's length when that ban ended (ran out or
 * was lifted) less than the repeat window ago, capped at the maximum.
 */
export function nextBan (previous: Ban | null, now: number, policy: BanPolicy): Ban {
  const repeat = previous !== null && now - previous.until.getTime() < policy.repeatWindowSeconds * 1000
  const seconds = repeat ? Math.min(previous.seconds * 2, policy.maxSeconds) : policy.baseSeconds
  return { since: new Date(now), until: new Date(now + seconds * 1000), seconds }
}
