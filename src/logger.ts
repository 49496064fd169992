/**
 * The service's logs (pino). Every line passes one last filter (src/redact.ts, the one traces pass too): whatever
 * reached it, a key, a webhook secret or signature, or credentials after `Bearer`/`Basic` never get written (none is
 * logged on purpose; this catches one a client put where it does not belong, such as a URL). On a terminal the lines are human-readable (pino-pretty); elsewhere they are JSON, one object
 * a line, for log collectors. LOG_FORMAT forces either.
 */
import type { FastifyBaseLogger } from 'fastify'
import { pino, type Bindings, type ChildLoggerOptions, type Logger, type LoggerOptions } from 'pino'
import pretty from 'pino-pretty'
import type { Config, LogFormat, LogLevel } from './config.js'
import { redactSecrets } from './redact.js'

export function loggerOptions (level: LogLevel): LoggerOptions {
  return { level, hooks: { streamWrite: redactSecrets } }
}

/** Whether the lines are pretty: as configured, or (auto) when stdout is a terminal. */
export function prettyLogs (format: LogFormat, stdoutIsTTY: boolean): boolean {
  return format === 'pretty' || (format === 'auto' && stdoutIsTTY)
}

/** The process's logger, writing to stdout. */
export function createLogger (config: Pick<Config, 'logLevel' | 'logFormat'>, stdoutIsTTY: boolean = process.stdout.isTTY === true): Logger {
  const options = loggerOptions(config.logLevel)
  if (!prettyLogs(config.logFormat, stdoutIsTTY)) return pino(options)
  // Synchronous, in this thread: a line is on the terminal when the call returns, as with JSON.
  return pino(options, pretty({ colorize: stdoutIsTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true, sync: true }))
}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const
type Level = typeof LEVELS[number]
type LogMethod = (...args: unknown[]) => void
type ParentLogger = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }

/**
 * A request's logger whose child (the one that carries the request id) is made only when a line is written at
 * a level that is on. Fastify makes a child logger for every request; pino's child serializes its bindings
 * when made, which cost more per request than anything else logging does while nothing is logged.
 */
class LazyChild {
  readonly #parent: ParentLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #real: FastifyBaseLogger | null = null
  /** The key the request named, once the gate knows it: bound into the child when it is made. */
  #keyId: string | null = null
  declare fatal: LogMethod
  declare error: LogMethod
  declare warn: LogMethod
  declare info: LogMethod
  declare debug: LogMethod
  declare trace: LogMethod

  constructor (parent: ParentLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  get level (): string {
    return this.#real?.level ?? this.#parent.level
  }

  set level (level: string) {
    this.#child().level = level
  }

  silent (): void {}

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#child().child(bindings, options)
  }

  /** Every line written from now on carries `keyId` (the child, if already made, gets it as a binding). */
  bindKeyId (keyId: string): void {
    if (this.#keyId === keyId) return
    this.#keyId = keyId
    ;(this.#real as Partial<Pick<Logger, 'setBindings'>> | null)?.setBindings?.({ keyId })
  }

  #child (): FastifyBaseLogger {
    this.#real ??= this.#parent.child(this.#keyId === null ? this.#bindings : { ...this.#bindings, keyId: this.#keyId }, this.#options)
    return this.#real
  }

  static {
    for (const level of LEVELS) {
      Object.defineProperty(LazyChild.prototype, level, {
        value: function (this: LazyChild, ...args: unknown[]): void {
          if (this.#real === null && this.#parent.isLevelEnabled?.(level) === false) return
          ;(this.#child()[level as Level] as LogMethod)(...args)
        }
      })
    }
  }
}

/**
 * Names the key a request named (its id, never the key) on every line its logger writes from now on, refusals
 * included. Costs a field store: the binding is serialized only if a line is written.
 */
export function bindKeyId (log: FastifyBaseLogger, keyId: string): void {
  if (log instanceof LazyChild) log.bindKeyId(keyId)
  else (log as Partial<Pick<Logger, 'setBindings'>>).setBindings?.({ keyId })
}

/** Fastify's childLoggerFactory: request loggers that cost nothing until they write. */
export function lazyChildLoggerFactory (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChild(logger, bindings, options) as unknown as FastifyBaseLogger
}
