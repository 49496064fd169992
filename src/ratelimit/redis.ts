import { createHash } from 'node:crypto'
import type { Cluster} from 'ioredis';
import { Redis } from 'ioredis'
import { REDIS_DEFAULTS } from '../config.js'
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
`

/** Standalone with a piggyback: its key is the last key, read in the same call. */
const READ_PIGGYBACK = `local piggyback = tonumber(redis.call('GET', KEYS[#KEYS])) or 0
`
/** No piggyback, or Cluster: its key would live in another slot, so the client reads it beside the script. */
const NO_PIGGYBACK = `local piggyback = 0
`

/**
 * KEYS: minute, day, strikes (and the piggyback's key, when read in the script). ARGV: perMinute, perDay, offset (ms),
 * strike window (s, 0 = no strikes), margin (s), strike threshold, cost (requests this one counts as). Returns
 * {allowed 0|1, minute count, day count, seconds, microseconds, strikes, piggyback's value}.
 *
 * The strikes hash is {t: strike window start (ms), c: count, r: retry time (ms)}: r is the end of the window
 * that refused the subject last (what its Retry-After named), and only a refusal before r is a strike. A hash
 * rather than INCR + EXPIRE: the windows must follow the script's time, which includes the offset, not the
 * server's expiry clock.
 */
const CONSUME_BODY = `
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
  return {1, mc, dc, sec, usec, 0, piggyback}
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
return {0, mc, dc, sec, usec, strikes, piggyback}
`

/** KEYS: minute, day (and the piggyback's key). ARGV: perMinute, perDay, offset (ms). Same reply as the consume script, strikes 0. */
const PEEK_BODY = `
return {allowed and 1 or 0, mc, dc, sec, usec, 0, piggyback}
`

/**
 * The scripts of each key layout: `reading` reads the piggyback's key in the call (standalone and Sentinel, with a
 * piggyback); `plain` reads nothing more (no piggyback, or a Cluster, which cannot).
 */
const SCRIPTS = {
  reading: { consume: PRELUDE + READ_PIGGYBACK + CONSUME_BODY, peek: PRELUDE + READ_PIGGYBACK + PEEK_BODY, extraKeys: 1 },
  plain: { consume: PRELUDE + NO_PIGGYBACK + CONSUME_BODY, peek: PRELUDE + NO_PIGGYBACK + PEEK_BODY, extraKeys: 0 }
} as const

/** The SHA1 Redis names a script by (SCRIPT EXISTS): for the start check that scripts stay loaded. */
export function scriptSha (layout: keyof typeof SCRIPTS): string {
  return createHash('sha1').update(SCRIPTS[layout].consume).digest('hex')
}

type ScriptReply = [number, number, number, number, number, number, number]

/** The scripts as commands; `keys` are minute, day (and strikes, for consume), then the piggyback's key when read in the script. */
interface LimiterCommands {
  petstoreRateLimitConsume (...args: Array<string | number>): Promise<ScriptReply>
  petstoreRateLimitPeek (...args: Array<string | number>): Promise<ScriptReply>
  petstoreRateLimitConsumePlain (...args: Array<string | number>): Promise<ScriptReply>
  petstoreRateLimitPeekPlain (...args: Array<string | number>): Promise<ScriptReply>
}

/** A standalone (or Sentinel-managed) client, or a Redis Cluster client. */
export type RedisClient = Redis | Cluster

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

/**
 * Another key to read with every decision (consume and peek) in the same call, and where its value goes: the
 * limiter knows nothing of what the key means (the change signal, src/changes/redis.ts, keeps its counter there).
 */
export interface Piggyback {
  /** The key: read as a number, 0 when it does not exist. */
  key: string
  /**
   * Called with the key's value right after each decision's reply, in the order the decisions were sent (one
   * connection answers in order); undefined when a decision was made without reading it (a failed read on a
   * Cluster, or another limiter answering in this one's place: see unread).
   */
  seen: (value: number | undefined) => void
}

export interface RedisLimiterOptions {
  /** The caller's client: the limiter never connects, quits or disconnects it. A Cluster client selects the Cluster key layout. */
  client: RedisClient
  /** Prepended to every key; should not contain '{' or '}'. Default 'rl:'. */
  prefix?: string
  /** Test-only: seconds added to Redis TIME, so tests can move time without waiting. Default 0. */
  timeOffsetSeconds?: () => number
  /** Also read this key with every decision, in the same round trip. None by default. */
  piggyback?: Piggyback
}

/** The command names of each script layout: distinct, so limiters of both layouts can share one client. */
const COMMANDS = {
  reading: { consume: 'petstoreRateLimitConsume', peek: 'petstoreRateLimitPeek' },
  plain: { consume: 'petstoreRateLimitConsumePlain', peek: 'petstoreRateLimitPeekPlain' }
} as const

/**
 * The shared limiter: both windows and the strike counter of a subject live in Redis, and each consume is one
 * Lua script (read both windows, admit, count), so exactly `limit` requests pass across all instances. The
 * time comes from Redis TIME, never from the instance. Keys expire a few seconds after their window ends.
 *
 * Every key of a subject carries the subject's hash tag, so on a Redis Cluster the script's keys share one slot
 * and a decision stays one call. The piggyback's key cannot ride in that call on a Cluster (another slot): there
 * the decision's call and a GET of the key go out together, in the same round trip.
 */
export class RedisLimiter implements RateLimiter {
  readonly kind = 'redis'
  readonly #client: RedisClient & LimiterCommands
  readonly #prefix: string
  /** The piggyback's key is read in the script (standalone, Sentinel). */
  readonly #reading: boolean
  readonly #piggyback: Piggyback | null
  readonly #consume: 'petstoreRateLimitConsume' | 'petstoreRateLimitConsumePlain'
  readonly #peek: 'petstoreRateLimitPeek' | 'petstoreRateLimitPeekPlain'
  readonly #offset: () => number

  constructor (options: RedisLimiterOptions) {
    this.#piggyback = options.piggyback ?? null
    this.#reading = this.#piggyback !== null && !options.client.isCluster
    const layout = this.#reading ? 'reading' : 'plain'
    const script = SCRIPTS[layout]
    const names = COMMANDS[layout]
    // defineCommand sends EVALSHA and falls back to EVAL once per connection on NOSCRIPT. Defining the same
    // names again on a shared client just replaces them with identical scripts.
    options.client.defineCommand(names.consume, { numberOfKeys: 3 + script.extraKeys, lua: script.consume })
    options.client.defineCommand(names.peek, { numberOfKeys: 2 + script.extraKeys, lua: script.peek, readOnly: true })
    this.#consume = names.consume
    this.#peek = names.peek
    this.#client = options.client as RedisClient & LimiterCommands
    this.#prefix = options.prefix ?? 'rl:'
    this.#offset = options.timeOffsetSeconds ?? (() => 0)
  }

  /** The client's connection status, e.g. 'ready' (for the resilient wrapper). */
  get status (): string {
    return this.#client.status
  }

  /** The caller's client (for the resilient wrapper's connection events). */
  get client (): RedisClient {
    return this.#client
  }

  async consume (subject: Subject, limits: WindowLimits, options: ConsumeOptions = {}): Promise<Decision> {
    const keys = redisKeys(this.#prefix, subject)
    const strikes = options.strikes
    const args = [
      limits.perMinute, limits.perDay, this.#offsetMs(), Math.max(0, strikes?.windowSeconds ?? 0), EXPIRY_MARGIN_SECONDS,
      strikes?.threshold ?? 0, options.cost ?? 1
    ]
    const piggyback = this.#piggyback
    if (piggyback === null) return toDecision(await this.#client[this.#consume](keys.minute, keys.day, keys.strikes, ...args), limits)
    if (this.#reading) return this.#seen(await this.#client[this.#consume](keys.minute, keys.day, keys.strikes, piggyback.key, ...args), limits, piggyback)
    const value = this.#readPiggyback(piggyback)
    const reply = await this.#client[this.#consume](keys.minute, keys.day, keys.strikes, ...args)
    piggyback.seen(await value)
    return toDecision(reply, limits)
  }

  async peek (subject: Subject, limits: WindowLimits): Promise<Decision> {
    const keys = redisKeys(this.#prefix, subject)
    const args = [limits.perMinute, limits.perDay, this.#offsetMs()]
    const piggyback = this.#piggyback
    if (piggyback === null) return toDecision(await this.#client[this.#peek](keys.minute, keys.day, ...args), limits)
    if (this.#reading) return this.#seen(await this.#client[this.#peek](keys.minute, keys.day, piggyback.key, ...args), limits, piggyback)
    const value = this.#readPiggyback(piggyback)
    const reply = await this.#client[this.#peek](keys.minute, keys.day, ...args)
    piggyback.seen(await value)
    return toDecision(reply, limits)
  }

  async reset (subject: Subject): Promise<void> {
    const keys = redisKeys(this.#prefix, subject)
    await this.#client.del(keys.minute, keys.day, keys.strikes)
  }

  /**
   * A decision was made without this limiter (the resilient limiter's fallback answered in its place): the
   * piggyback is told that its key went unread.
   */
  unread (): void {
    this.#piggyback?.seen(undefined)
  }

  /**
   * The start check's probe: one decision on a subject of its own, made and then removed, which fails as a real
   * request would (a read-only replica, a key on another Cluster node, a refused script or command).
   */
  async probe (): Promise<Decision> {
    const subject: Subject = { kind: 'ip', id: 'petstore-start-check' }
    try {
      return await this.consume(subject, { perMinute: 1_000_000_000, perDay: 1_000_000_000 })
    } finally {
      await this.reset(subject).catch(() => {})
    }
  }

  /** Does nothing: the client belongs to the caller, who quits it (possibly after other users are done). */
  async close (): Promise<void> {}

  /** Reading layout: the reply's last field is the piggyback's value. */
  #seen (reply: ScriptReply, limits: WindowLimits, piggyback: Piggyback): Decision {
    piggyback.seen(reply[6])
    return toDecision(reply, limits)
  }

  /**
   * Cluster: the piggyback's key, read beside the decision. A failed read is reported as unread (the change signal
   * then counts a gap), never fails the decision itself.
   */
  #readPiggyback (piggyback: Piggyback): Promise<number | undefined> {
    return this.#client.get(piggyback.key).then((text) => Number(text ?? 0), () => undefined)
  }

  /** Whole milliseconds, so the script's microsecond arithmetic stays in exact integers. */
  #offsetMs (): number {
    return Math.round(this.#offset() * 1000)
  }
}

function toDecision (reply: ScriptReply, limits: WindowLimits): Decision {
  const [allowed, minuteCount, dayCount, sec, usec, strikes] = reply
  return buildDecision(allowed === 1, limits, minuteCount, dayCount, sec * 1000 + Math.floor(usec / 1000), strikes)
}

/**
 * A client for the request path: it fails fast instead of queueing (no offline queue, one retry, `commandTimeoutMs`
 * per command) so a slow or absent Redis costs a request at most about that before the caller falls back (one
 * request a second while it stays away: the resilient limiter answers the others at once), and it keeps
 * reconnecting in the background at most a second apart. Connection errors are swallowed here (the resilient
 * limiter reports outages) because an 'error' event without a listener would crash the process.
 */
export function createRedisClient (url: string, commandTimeoutMs: number = REDIS_DEFAULTS.commandTimeoutMs): Redis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    lazyConnect: false,
    retryStrategy: (times: number) => Math.min(times * 100, 1000)
  })
  client.on('error', () => {})
  return client
}
