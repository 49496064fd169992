/**
 * The service's logs (pino). Every line passes one last filter: whatever reached it, a key-shaped token never
 * gets written (keys are never logged on purpose; this catches a key a client put where it does not belong,
 * such as a URL). On a terminal the lines are human-readable (pino-pretty); elsewhere they are JSON, one object
 * a line, for log collectors. LOG_FORMAT forces either.
 */
import { pino, type Logger, type LoggerOptions } from 'pino'
import pretty from 'pino-pretty'
import { redactKeys } from './access/keys.js'
import type { Config, LogFormat, LogLevel } from './config.js'

export function loggerOptions (level: LogLevel): LoggerOptions {
  return { level, hooks: { streamWrite: redactKeys } }
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
