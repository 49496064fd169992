import { MemoryLimiter } from './memory.js'
import type { RedisLimiter } from './redis.js'
import type { ConsumeOptions, Decision, RateLimiter, Subject, WindowLimits } from './types.js'

/** The two log levels the limiter uses; a Fastify/pino logger fits. */
export interface LimiterLogger {
  warn (obj: object, msg: string): void
  info (obj: object, msg: string): void
}

export interface ResilientLimiterOptions {
  redis: RedisLimiter
  /** Answers while Redis is unavailable; a fresh MemoryLimiter by default. */
  memory?: MemoryLimiter
  logger: LimiterLogger
  /**
   * After a command failed on a connection that still looks ready (a black-holed network, timeouts), how long
   * to answer from memory before one request probes Redis again. Default 1000 ms.
   */
  retryAfterMs?: number
}

/** 'connecting' is the first connection attempt: not an outage until it fails. */
type State = 'connecting' | 'up' | 'down'

/**
 * Redis when it answers, the in-process limiter when it does not: a request is never refused or failed
 * because the limiter's store is away. While Redis is out each instance counts on its own (exact per process,
 * shared limits become per-instance limits); it goes back to Redis by itself once the client is ready again.
 * One warning per outage and one info line on recovery, however many requests fall back.
 *
 * It never throws and never waits longer than the client's command timeout, provided the client fails fast
 * (see createRedisClient: no offline queue, short command timeout).
 */
export class ResilientLimiter implements RateLimiter {
  /** The configured backend, for logs; `backend` tells which one answers right now. */
  readonly kind = 'redis'
  readonly #redis: RedisLimiter
  readonly #memory: MemoryLimiter
  readonly #logger: LimiterLogger
  readonly #retryAfterMs: number
  #state: State
  #retryAt = 0
  #fallbacks = 0
  readonly #onReady = (): void => this.#up()
  readonly #onError = (err: unknown): void => this.#down({ err })

  constructor (options: ResilientLimiterOptions) {
    this.#redis = options.redis
    this.#memory = options.memory ?? new MemoryLimiter()
    this.#logger = options.logger
    this.#retryAfterMs = options.retryAfterMs ?? 1000
    this.#state = this.#redis.status === 'ready' ? 'up' : 'connecting'
    // Connection events make outages and recoveries visible without waiting for a request to notice.
    this.#redis.client.on('ready', this.#onReady)
    this.#redis.client.on('error', this.#onError)
  }

  /** Times it switched from Redis to memory since it was created (for metrics). */
  get fallbacks (): number {
    return this.#fallbacks
  }

  /** Which backend answers now. */
  get backend (): 'redis' | 'memory-fallback' {
    return this.#state === 'up' && this.#redis.status === 'ready' ? 'redis' : 'memory-fallback'
  }

  async consume (subject: Subject, limits: WindowLimits, options?: ConsumeOptions): Promise<Decision> {
    return this.#run(() => this.#redis.consume(subject, limits, options), () => this.#memory.consume(subject, limits, options))
  }

  async peek (subject: Subject, limits: WindowLimits): Promise<Decision> {
    return this.#run(() => this.#redis.peek(subject, limits), () => this.#memory.peek(subject, limits))
  }

  /** Counts an inventory change in Redis when it answers; an outage is logged as one, not thrown. */
  async announceChange (): Promise<void> {
    await this.#run(() => this.#redis.announceChange(), async () => {})
  }

  /** Clears the subject in memory and, when reachable, in Redis; a Redis failure is logged as an outage, not thrown. */
  async reset (subject: Subject): Promise<void> {
    await this.#memory.reset(subject)
    await this.#run(() => this.#redis.reset(subject), async () => {})
  }

  /** Detaches from the client (which the caller owns and quits) and drops the in-memory state. */
  async close (): Promise<void> {
    this.#redis.client.off('ready', this.#onReady)
    this.#redis.client.off('error', this.#onError)
    await this.#redis.close()
    await this.#memory.close()
  }

  async #run<T> (fromRedis: () => Promise<T>, fromMemory: () => Promise<T>): Promise<T> {
    if (this.#redisUsable()) {
      try {
        const result = await fromRedis()
        this.#up()
        return result
      } catch (err) {
        this.#retryAt = Date.now() + this.#retryAfterMs
        this.#down({ err })
      }
    }
    return fromMemory()
  }

  #redisUsable (): boolean {
    const status = this.#redis.status
    if (status !== 'ready') {
      // While the very first connection is under way, fall back quietly: a failure shows up as an 'error' event.
      if (this.#state !== 'connecting' || status === 'wait' || status === 'end') this.#down({ status })
      return false
    }
    if (this.#state !== 'down') return true
    const now = Date.now()
    if (now < this.#retryAt) return false
    // One probe per interval; the requests arriving meanwhile keep answering from memory.
    this.#retryAt = now + this.#retryAfterMs
    return true
  }

  #up (): void {
    if (this.#state === 'down') {
      this.#logger.info({ backend: 'redis' }, 'rate limiter: Redis is back, limits are shared again')
    }
    this.#state = 'up'
    this.#retryAt = 0
  }

  #down (details: object): void {
    if (this.#state === 'down') return
    this.#state = 'down'
    this.#fallbacks++
    this.#logger.warn(
      { ...details, backend: 'memory-fallback' },
      'rate limiter: Redis unavailable, answering from the in-process limiter (limits now count per instance)'
    )
  }
}
