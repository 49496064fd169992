import { MemoryLimiter } from './memory.js'
import type { RedisLimiter } from './redis.js'
import { LimiterUnavailableError, type ConsumeOptions, type Decision, type RateLimiter, type Subject, type WindowLimits } from './types.js'

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
  /**
   * While Redis is unavailable: 'local' answers from the in-process limiter (limits count per instance), 'deny'
   * refuses every decision with LimiterUnavailableError (fail closed: no request passes uncounted). Default 'local'.
   */
  onDown?: 'local' | 'deny'
}

/**
 * An error as it may be logged: its name, message and code only. ioredis attaches the failed command to its
 * errors, and a refused reconnect's command is `HELLO 3 AUTH <user> <password>` (or `AUTH <password>`).
 */
export function loggable (error: unknown): { name: string, message: string, code?: string } {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) }
  const code = (error as Error & { code?: unknown }).code
  return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) }
}

/** 'connecting' is the first connection attempt: not an outage until it fails. */
type State = 'connecting' | 'up' | 'down'

/**
 * Redis when it answers; when it does not, by default the in-process limiter (a request is never refused or
 * failed because the limiter's store is away), or, with `onDown: 'deny'`, a refusal (LimiterUnavailableError). While Redis is out each instance counts on its own (exact per process,
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
  readonly #deny: boolean
  #state: State
  #retryAt = 0
  #fallbacks = 0
  readonly #onReady = (): void => this.#up()
  readonly #onError = (err: unknown): void => this.#down({ err: loggable(err) })

  constructor (options: ResilientLimiterOptions) {
    this.#redis = options.redis
    this.#memory = options.memory ?? new MemoryLimiter()
    this.#logger = options.logger
    this.#retryAfterMs = options.retryAfterMs ?? 1000
    this.#deny = options.onDown === 'deny'
    this.#state = this.#redis.status === 'ready' ? 'up' : 'connecting'
    // Connection events make outages and recoveries visible without waiting for a request to notice.
    this.#redis.client.on('ready', this.#onReady)
    this.#redis.client.on('error', this.#onError)
  }

  /** Times it switched from Redis to memory since it was created (for metrics). */
  get fallbacks (): number {
    return this.#fallbacks
  }

  /** Which backend answers now: Redis, the in-process fallback, or none (refusing, with `onDown: 'deny'`). */
  get backend (): 'redis' | 'memory-fallback' | 'unavailable' {
    if (this.#state === 'up' && this.#redis.status === 'ready') return 'redis'
    return this.#deny ? 'unavailable' : 'memory-fallback'
  }

  async consume (subject: Subject, limits: WindowLimits, options?: ConsumeOptions): Promise<Decision> {
    return this.#run(() => this.#redis.consume(subject, limits, options), () => this.#fallback(() => this.#memory.consume(subject, limits, options)))
  }

  async peek (subject: Subject, limits: WindowLimits): Promise<Decision> {
    return this.#run(() => this.#redis.peek(subject, limits), () => this.#fallback(() => this.#memory.peek(subject, limits)))
  }

  /**
   * Another user of the client (the change signal, src/changes/redis.ts) reached Redis: as when a decision does,
   * decisions go back to Redis (with one info line when that ends an outage).
   */
  commandSucceeded (): void {
    this.#up()
  }

  /** Another user of the client failed on it: as when a decision does, an outage (one warning) and a pause before the next try. */
  commandFailed (error: unknown): void {
    this.#retryAt = Date.now() + this.#retryAfterMs
    this.#down({ err: loggable(error) })
  }

  /** Another user of the client found it not ready and sent nothing: noted as a decision would note it. */
  commandSkipped (): void {
    this.#redisUsable()
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
        this.#down({ err: loggable(err) })
      }
    }
    return fromMemory()
  }

  async #fallback (fromMemory: () => Promise<Decision>): Promise<Decision> {
    if (this.#deny) throw new LimiterUnavailableError()
    // What Redis's decision would have read with it (the change counter) is unknown for this one.
    this.#redis.unread()
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
      { ...details, backend: this.#deny ? 'unavailable' : 'memory-fallback' },
      this.#deny
        ? 'rate limiter: Redis unavailable, refusing gated requests with 503 until it is back (RATE_LIMIT_ON_REDIS_DOWN=deny)'
        : 'rate limiter: Redis unavailable, answering from the in-process limiter (limits now count per instance)'
    )
  }
}
