/**
 * The change signal in Redis: a counter every instance increments for each change it acknowledges, and reads with
 * every rate-limit decision. The read costs no round trip of its own: the Redis limiter reads the counter in the same
 * call as its decision (its `piggyback` option, src/ratelimit/redis.ts), and hands each value to this signal's watch.
 */
import type { Piggyback, RedisClient } from '../ratelimit/redis.js'
import type { ChangeSignal } from './types.js'
import { ChangeWatch } from './watch.js'

/**
 * KEYS: a change counter. Counts one change, and never lets the counter fall behind Redis TIME in microseconds: the
 * new value is the larger of the old one plus one and the time. A counter that was lost (a Redis restarted empty, a
 * Cluster node that lost its data, a flush) or that a failover set back (a replica that had not received the last
 * changes) so climbs past every value an instance saw before with the first change after, instead of landing on
 * one and being taken for "nothing changed" (the listing's freshness, src/http/inventory-cache.ts).
 */
const ANNOUNCE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local old = tonumber(redis.call('GET', KEYS[1])) or 0
local new = old + 1
if new < now then new = now end
return redis.call('INCRBY', KEYS[1], new - old)
`

/**
 * Cluster: copies of the change counter, each in its own hash slot (spread over the shards). A write counts its
 * change in every copy before it is acknowledged; each instance reads one copy, chosen at random when it starts,
 * so no single key takes every request's read.
 */
export const CHANGE_COUNTER_COPIES = 16

/** Tries of an announcement before the change goes unannounced (each bounded by the client's command timeout). */
const ANNOUNCE_ATTEMPTS = 2

interface SignalCommands {
  petstoreAnnounceChange (key: string): Promise<number>
}

/**
 * Who else uses the client and keeps a view of whether Redis answers (the resilient limiter): told how each
 * announcement went, so a failed one counts as an outage and a successful one as a recovery, as the limiter's own
 * commands do.
 */
export interface ClientHealth {
  /** An announcement reached Redis. */
  commandSucceeded (): void
  /** An announcement failed on every try. */
  commandFailed (error: unknown): void
  /** No announcement was sent: the client was not ready. */
  commandSkipped (): void
}

export interface RedisChangeSignalOptions {
  /** The caller's client (the limiter's): the signal never connects, quits or disconnects it. */
  client: RedisClient
  /** Prepended to the counter's key(s), as the limiter's prefix is to its keys. Default 'rl:'. */
  prefix?: string
  /** Cluster: which copy of the counter this instance reads (default: one at random). */
  changeCopy?: number
}

/**
 * The change counter in Redis: `${prefix}changes`, or on a Cluster CHANGE_COUNTER_COPIES copies `${prefix}{changes:i}`.
 * A counter that was lost reads as 0 until the next change, which sets it above every value seen before (see
 * ANNOUNCE_LUA); the watch counts the drop as a gap.
 */
export class RedisChangeSignal implements ChangeSignal {
  readonly watch = new ChangeWatch()
  /**
   * What the Redis limiter reads with each decision (its `piggyback` option): this instance's counter key, and the
   * watch that each value (or undefined, for a decision made without reading it) goes to.
   */
  readonly piggyback: Piggyback
  readonly #client: RedisClient & SignalCommands
  /** Every key a change is counted in: the one counter, or all Cluster copies. */
  readonly #keys: readonly string[]
  /** The key this instance reads: the one counter, or its Cluster copy. */
  readonly #read: string
  #health: ClientHealth | null = null

  constructor (options: RedisChangeSignalOptions) {
    const prefix = options.prefix ?? 'rl:'
    options.client.defineCommand('petstoreAnnounceChange', { numberOfKeys: 1, lua: ANNOUNCE_LUA })
    this.#client = options.client as RedisClient & SignalCommands
    if (options.client.isCluster) {
      this.#keys = Array.from({ length: CHANGE_COUNTER_COPIES }, (_, i) => `${prefix}{changes:${i}}`)
      const copy = options.changeCopy ?? Math.floor(Math.random() * CHANGE_COUNTER_COPIES)
      this.#read = this.#keys[copy % CHANGE_COUNTER_COPIES] as string
    } else {
      this.#read = `${prefix}changes`
      this.#keys = [this.#read]
    }
    const watch = this.watch
    this.piggyback = { key: this.#read, seen: (value) => { watch.observe(value) } }
  }

  /** Tells `health` how each announcement goes from now on. */
  reportTo (health: ClientHealth): void {
    this.#health = health
  }

  /**
   * Counts the change, tried whenever the connection is up (also while the limiter's decisions fall back after a
   * failed command: that state only spares the request path a wait), and tried once more when the first attempt
   * fails: a change that no instance hears of leaves their listings stale until their next check of the store. An
   * outage is reported (ClientHealth), not thrown.
   */
  async announce (): Promise<void> {
    let failure: unknown
    for (let attempt = 0; attempt < ANNOUNCE_ATTEMPTS && this.#client.status === 'ready'; attempt++) {
      try {
        await this.count()
        this.#health?.commandSucceeded()
        return
      } catch (err) {
        failure = err
      }
    }
    if (failure !== undefined) this.#health?.commandFailed(failure)
    else this.#health?.commandSkipped()
  }

  /** One attempt: counts a change in the counter (every copy on a Cluster) before it resolves; throws what Redis said. */
  async count (): Promise<void> {
    await Promise.all(this.#keys.map((key) => this.#client.petstoreAnnounceChange(key)))
  }
}
