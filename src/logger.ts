/**
 * The service's log options (pino), shared by the server and apps built without a logger of their own. Every
 * line passes one last filter: whatever reached it, a key-shaped token never gets written (keys are never
 * logged on purpose; this catches a key a client put where it does not belong, such as a URL).
 */
import type { LoggerOptions } from 'pino'
import { redactKeys } from './access/keys.js'
import type { LogLevel } from './config.js'

export function loggerOptions (level: LogLevel): LoggerOptions {
  return { level, hooks: { streamWrite: redactKeys } }
}
