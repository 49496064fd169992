import { Redis } from 'ioredis'
import { buildDecision } from './decision.js'
import { subjectKey, type ConsumeOptions, type Decision, type RateLimiter, type Subject, type WindowLimits } from './types.js'

/**
 * Seconds a key outlives its window: a little slack past the boundary. Reads compare the stored window index
 * anyway, so expiry only reclaims memory and never decides a count.
 */
const EXPIRY_MARGIN_SECONDS = 5

/**
 * Shared by both scripts: the time and the two window counts. The time is Redis TIME (so the clocks of the
 * instances do not matter) plus ARGV[3], a test-only offset in whole milliseconds. A window is a hash
 * {w: window index, c: count}; a hash left from an earlier window reads as 0, because Redis 7.0 cannot expire
 * a single field and the key itself may outlive its window (time offsets, margin).
 */
const PRELUDE = `
local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[3]) * 1000
local sec = math.floor(us / 1000000)
local usec = us - sec * 1000000
local mw = math.floor(sec / 60)
local dw = math.floor(sec / 86400)
local function count (key, w)
  local v = redis.call('HMGET', key, 'w', 'c')
  if tonumber(v[1]) == w then return tonumber(v[2]) or 0 end
  return 0
end
local mc = count(KEYS[1], mw)
local dc = count(KEYS[2], dw)
local allowed = mc < tonumber(ARGV[1]) and dc < tonumber(ARGV[2])
local changes = tonumber(redis.call('GET', KEYS[#KEYS])) or 0
`

/**
 * KEYS: minute, day, strikes, change counter. ARGV: perMinute, perDay, offset (ms), strike window (s, 0 = no
 * strikes), margin (s), strike threshold, cost (requests this one counts as). Returns {allowed 0|1, minute count, day count, seconds, microseconds,
 * strikes, change counter}.
 *
 * The strikes hash is {t: strike window start (ms), c: count, r: retry time (ms)}: r is the end of the window
 * that refused the subject last (what its Retry-After named), and only a refusal before r is a strike. A hash
 * rather than INCR + EXPIRE: the windows must follow the script's time, which includes the offset, not the
 * server's expiry clock.
 */
const CONSUME_LUA = `${PRELUDE}
local margin = tonumber(ARGV[5])
local cost = tonumber(ARGV[7])
allowed = mc + cost <= tonumber(ARGV[1]) and dc + cost <= tonumber(ARGV[2])
if allowed then
  mc = mc + cost
  dc = dc + cost
  redis.call('HSET', KEYS[1], 'w', mw, 'c', mc)
  redis.call('EXPIRE', KEYS[1], (mw + 1) * 60 - sec + margin)
  redis.call('HSET', KEYS[2], 'w', dw, 'c', dc)
  redis.call('EXPIRE', KEYS[2], (dw + 1) * 86400 - sec + margin)
  return {1, mc, dc, sec, usec, 0, changes}
end
local strikes = 0
local sw = tonumber(ARGV[4]) * 1000
if sw > 0 then
  local now = math.floor(us / 1000)
  local s = redis.call('HMGET', KEYS[3], 't', 'c', 'r')
  local start = tonumber(s[1]) or now
  local count = tonumber(s[2]) or 0
  local retry = tonumber(s[3]) or 0
  if now < retry then
    if count == 0 or now - start >= sw then
      start = now
      count = 0
    end
    count = count + 1
    strikes = count
    if count >= tonumber(ARGV[6]) then count = 0 end
  end
  local reset = (mw + 1) * 60
  if dc >= tonumber(ARGV[2]) then reset = (dw + 1) * 86400 end
  if reset * 1000 > retry then retry = reset * 1000 end
  redis.call('HSET', KEYS[3], 't', start, 'c', count, 'r', retry)
  local keep = retry - now
  if start + sw - now > keep then keep = start + sw - now end
  redis.call('PEXPIRE', KEYS[3], keep + margin * 1000)
end
return {0, mc, dc, sec, usec, strikes, changes}
`

/** KEYS: minute, day, change counter. ARGV: perMinute, perDay, offset (ms). Same reply as the consume script, strikes 0. */
const PEEK_LUA = `${PRELUDE}
return {allowed and 1 or 0, mc, dc, sec, usec, 0, changes}
`

type ScriptReply = [number, number, number, number, number, number, number]

interface LimiterCommands {
  petstoreRateLimitConsume (
    minuteKey: string, dayKey: string, strikeKey: string, changesKey: string, perMinute: number, perDay: number, offsetMs: number,
    strikeWindowSeconds: number, marginSeconds: number, strikeThreshold: number, cost: number
  ): Promise<ScriptReply>
  petstoreRateLimitPeek (minuteKey: string, dayKey: string, changesKey: string, perMinute: number, perDay: number, offsetMs: number): Promise<ScriptReply>
}

/**
 * The hash tag of a subject: its text with '%', '{' and '}' percent-encoded, so the tag always ends at the
 * closing brace we add (all keys of a subject share one Cluster slot) and distinct subjects stay distinct. An
 * empty subject becomes a lone '%' (no encoding produces it) because Cluster ignores an empty tag '{}'.
 */
function hashTag (subject: string): string {
  if (subject === '') return '%'
  return subject.replace(/[%{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
}

/** The keys of one subject: minute window, day window and strikes. Exported for tests. */
export function redisKeys (prefix: string, subject: Subject): { minute: string, day: string, strikes: string } {
  const base = `${prefix}{${hashTag(subjectKey(subject))}}`
  return { minute: `${base}:m`, day: `${base}:d`, strikes: `${base}:s` }
}

export interface RedisLimiterOptions {
  /** The caller's client: the limiter never connects, quits or disconnects it. */
  client: Redis
  /** Prepended to every key; should not contain '{' or '}'. Default 'rl:'. */
  prefix?: string
  /** Test-only: seconds added to Redis TIME, so tests can move time without waiting. Default 0. */
  timeOffsetSeconds?: () => number
}

/**
 * The shared limiter: both windows and the strike counter of a subject live in Redis, and each consume is one
 * Lua script (read both windows, admit, count), so exactly `limit` requests pass across all instances. The
 * time comes from Redis TIME, never from the instance. Keys expire a few seconds after their window ends.
 */
export class RedisLimiter implements RateLimiter {
  readonly kind = 'redis'
  readonly #client: Redis & LimiterCommands
  readonly #prefix: string
  readonly #changesKey: string
  readonly #offset: () => number

  constructor (options: RedisLimiterOptions) {
    // defineCommand sends EVALSHA and falls back to EVAL once per connection on NOSCRIPT. Defining the same
    // names again on a shared client just replaces them with identical scripts.
    options.client.defineCommand('petstoreRateLimitConsume', { numberOfKeys: 4, lua: CONSUME_LUA })
    options.client.defineCommand('petstoreRateLimitPeek', { numberOfKeys: 3, lua: PEEK_LUA, readOnly: true })
    this.#client = options.client as Redis & LimiterCommands
    this.#prefix = options.prefix ?? 'rl:'
    this.#changesKey = `${this.#prefix}changes`
    this.#offset = options.timeOffsetSeconds ?? (() => 0)
  }

  /** The client's connection status, e.g. 'ready' (for the resilient wrapper). */
  get status (): string {
    return this.#client.status
  }

  /** The caller's client (for the resilient wrapper's connection events). */
  get client (): Redis {
    return this.#client
  }

  async consume (subject: Subject, limits: WindowLimits, options: ConsumeOptions = {}): Promise<Decision> {
    const keys = redisKeys(this.#prefix, subject)
    const strikes = options.strikes
    const reply = await this.#client.petstoreRateLimitConsume(
      keys.minute, keys.day, keys.strikes, this.#changesKey, limits.perMinute, limits.perDay, this.#offsetMs(),
      Math.max(0, strikes?.windowSeconds ?? 0), EXPIRY_MARGIN_SECONDS, strikes?.threshold ?? 0, options.cost ?? 1
    )
    return toDecision(reply, limits)
  }

  async peek (subject: Subject, limits: WindowLimits): Promise<Decision> {
    const keys = redisKeys(this.#prefix, subject)
    const reply = await this.#client.petstoreRateLimitPeek(keys.minute, keys.day, this.#changesKey, limits.perMinute, limits.perDay, this.#offsetMs())
    return toDecision(reply, limits)
  }

  async reset (subject: Subject): Promise<void> {
    const keys = redisKeys(this.#prefix, subject)
    await this.#client.del(keys.minute, keys.day, keys.strikes)
  }

  async announceChange (): Promise<void> {
    await this.#client.incr(this.#changesKey)
  }

  /** Does nothing: the client belongs to the caller, who quits it (possibly after other users are done). */
  async close (): Promise<void> {}

  /** Whole milliseconds, so the script's microsecond arithmetic stays in exact integers. */
  #offsetMs (): number {
    return Math.round(this.#offset() * 1000)
  }
}

function toDecision (reply: ScriptReply, limits: WindowLimits): Decision {
  const [allowed, minuteCount, dayCount, sec, usec, strikes, changes] = reply
  return { ...buildDecision(allowed === 1, limits, minuteCount, dayCount, sec * 1000 + Math.floor(usec / 1000), strikes), changes }
}

/**
 * A client for the request path: it fails fast instead of queueing (no offline queue, one retry, 100 ms per
 * command) so a slow or absent Redis costs a request at most ~100 ms before the caller falls back, and it keeps
 * reconnecting in the background at most a second apart. Connection errors are swallowed here (the resilient
 * limiter reports outages) because an 'error' event without a listener would crash the process.
 */
export function createRedisClient (url: string): Redis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 100,
    connectTimeout: 1000,
    lazyConnect: false,
    retryStrategy: (times: number) => Math.min(times * 100, 1000)
  })
  client.on('error', () => {})
  return client
}
