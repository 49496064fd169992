/**
 * Configuration is read once, from the environment, at start. loadConfig validates every value and throws a
 * ConfigError naming the variable; nothing else in the code reads process.env.
 */
import { isIP } from 'node:net'
import { isAbsolute, resolve } from 'node:path'
import { isRfc3339DateTime } from './datetime.js'
import { ConfigError } from './errors.js'
import { ENVIRONMENTS, type Environment } from './model.js'
import { DEFAULT_IDEMPOTENCY_TTL_SECONDS } from './domain/idempotency.js'
import { HOLD_DEFAULTS, type HoldSettings } from './domain/selling.js'
import { PLAN_LIMITS, type Limits, type PlanTable } from './domain/rules.js'
import { DATABASE_DEFAULTS, DATABASE_POOLERS, isPostgresUrl, type DatabasePooler } from './store/postgres/options.js'

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = typeof LOG_LEVELS[number]
/** json: one JSON object a line; pretty: human-readable lines; auto: pretty when stdout is a terminal. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const
export type LogFormat = typeof LOG_FORMATS[number]

export interface Config {
  readonly port: number
  readonly host: string
  /** A postgres:// or postgresql:// URL selects PostgreSQL; anything else is a SQLite file path. */
  readonly databaseUrl: string
  /** PostgreSQL only: pool size per instance, statement timeout and connection wait, in ms, and the pooler in between. */
  readonly database: {
    readonly poolSize: number, readonly statementTimeoutMs: number, readonly connectTimeoutMs: number, readonly pooler: DatabasePooler
    /** Event triggers of the database the schema check leaves out (a managed PostgreSQL's own). */
    readonly trustedEventTriggers: readonly string[]
  }
  readonly logLevel: LogLevel
  readonly logFormat: LogFormat
  /** Decides the API key prefix: psk_live_ (production) or psk_test_ (staging). */
  readonly environment: Environment
  /** Public base addresses (without /v1) listed as `servers` in the OpenAPI document. */
  readonly servers: { readonly production: string, readonly staging: string }
  /** Base address of the human documentation, used by the Link headers of deprecated operations. */
  readonly docsUrl: string
  /**
   * The process runs in a container (the image sets PETSTORE_CONTAINER=true): the addresses it listens at are the
   * container's, and its CLI is run inside it, which the start line says instead of listing local addresses.
   */
  readonly container: boolean
  readonly pets: { readonly deprecatedAt: Date, readonly sunset: Date }
  /** How long an authenticated key is trusted without asking the store: the bound on revocation delay. */
  readonly authCacheTtlMs: number
  /** How long the record of a write's idempotency key is kept (a retry within it is replayed). */
  readonly idempotencyTtlSeconds: number
  /** Holds on stock: their default and longest duration, a quota's caps, and how long ended ones are kept. */
  readonly holds: HoldSettings
  /** Slow clients: time to send the headers, the whole request, and how long an idle keep-alive lasts. */
  readonly timeouts: { readonly headersMs: number, readonly requestMs: number, readonly keepAliveMs: number }
  /** Browser origins allowed to call the API (CORS); empty: CORS is off. */
  readonly corsOrigins: readonly string[]
  /**
   * On SIGTERM: how long the instance keeps serving after /readyz turned 503, for balancers to take it out before
   * the listener closes (SIGINT, a terminal's Ctrl+C, stops without it).
   */
  readonly shutdownDrainMs: number
  /** Once the listener has closed, how long in-flight requests may take before the process exits anyway. */
  readonly shutdownTimeoutMs: number
  /** Shared rate-limit counters (scale-out); null keeps them in process. */
  readonly redis: RedisConfig | null
  /** Prefix of every Redis key the service writes (several deployments can share one Redis). */
  readonly redisKeyPrefix: string
  /** Whether X-Forwarded-For is believed: false, true, a hop count, or trusted proxy addresses/CIDRs. */
  readonly trustProxy: boolean | number | string[]
  readonly rateLimits: RateLimitConfig
  /** GET /metrics: its own port (null: the main port) and the bearer token guarding it (null: open). */
  readonly metrics: { readonly port: number | null, readonly token: string | null }
  readonly webhooks: WebhookConfig
  readonly streams: StreamConfig
}

/** Webhook delivery (docs/webhooks.md). */
export interface WebhookConfig {
  /** Off: this instance delivers nothing (subscriptions are still managed; other instances deliver). */
  readonly deliver: boolean
  /** Lifts the address rules (public https only) for development and tests: http and private addresses allowed. */
  readonly allowPrivateNetworks: boolean
  /** One attempt's deadline, connect to the last byte read. */
  readonly timeoutMs: number
  /** Attempts in flight per instance, per quota, and per subscription. */
  readonly concurrency: number
  readonly concurrencyPerQuota: number
  readonly concurrencyPerSubscription: number
  /** How long a delivery is retried before it fails; the first retry's delay (doubling, with jitter, up to maxDelayMs). */
  readonly retryForMs: number
  readonly retryBaseMs: number
  readonly retryMaxDelayMs: number
  /** A subscription is disabled once this many attempts in a row have failed over at least disableAfterMs. */
  readonly disableAfterFailures: number
  readonly disableAfterMs: number
  /** How often an idle instance looks for new changes and due deliveries. */
  readonly pollMs: number
  /** At most this many subscriptions per quota. */
  readonly maxPerQuota: number
  /** How long delivered and failed deliveries stay in the log. */
  readonly retentionMs: number
}

/** The live change stream (GET /v1/inventory/changes/stream). */
export interface StreamConfig {
  /** Open streams per quota (all instances), and per instance. */
  readonly maxPerQuota: number
  readonly maxPerInstance: number
  /** A comment line this often keeps proxies from closing an idle stream. */
  readonly heartbeatMs: number
  /** How often an instance with open streams looks for changes committed elsewhere. */
  readonly pollMs: number
}

export const REDIS_MODES = ['standalone', 'cluster', 'sentinel'] as const
export type RedisMode = typeof REDIS_MODES[number]
/** While Redis is unavailable at run time: count in process (limits per instance) or refuse gated requests (503). */
export const REDIS_DOWN_POLICIES = ['local', 'deny'] as const
export type RedisDownPolicy = typeof REDIS_DOWN_POLICIES[number]

/** Where the shared limiter's Redis is and how to reach it (REDIS_MODE and the variables of that mode). */
export type RedisConfig = (
  /** One server (or a primary a proxy keeps pointing at): REDIS_URL. */
  | { readonly mode: 'standalone', readonly url: string }
  /** Redis Cluster: REDIS_URL lists one or more seed nodes, comma-separated; the rest is discovered. */
  | { readonly mode: 'cluster', readonly seeds: readonly string[] }
  /** The primary Sentinel names: REDIS_SENTINELS (host:port,...) and REDIS_SENTINEL_NAME; credentials of the data nodes from REDIS_USERNAME/REDIS_PASSWORD. */
  | { readonly mode: 'sentinel', readonly sentinels: ReadonlyArray<{ readonly host: string, readonly port: number }>, readonly name: string,
    readonly username: string | null, readonly password: string | null }
) & {
  readonly onDown: RedisDownPolicy
  /** How long one Redis command may take before the request falls back (REDIS_COMMAND_TIMEOUT_MS). */
  readonly commandTimeoutMs: number
}

export interface BanPolicy {
  /** Refusals within the strike window that trigger a ban; null means the key's per-minute limit. */
  readonly strikes: number | null
  readonly strikeWindowSeconds: number
  /** The first ban's length; each repeat within repeatWindowSeconds doubles it, up to maxSeconds. */
  readonly baseSeconds: number
  readonly maxSeconds: number
  readonly repeatWindowSeconds: number
}

export interface RateLimitConfig {
  readonly plans: PlanTable
  /** Limits per client IP for requests without a valid key. */
  readonly anonymous: Limits
  /**
   * The budget of GET /v1/rate_limit per key quota: the status call spends none of the key's own quota (as on
   * GitHub), and a caller polling it is bounded by this budget instead.
   */
  readonly status: Limits
  /** null when bans are switched off (BAN_SECONDS=0). */
  readonly bans: BanPolicy | null
  /** The in-process limiter's cap on subjects held at once, for keys and for client addresses each. */
  readonly maxSubjects: number
  /** Keyless IPv6 clients are limited per network prefix of this length (IPv4 clients per address). */
  readonly ipv6PrefixLength: number
}

/** Defaults the code uses where no configuration is given (a store or limiter built in a test), named once. */
/**
 * The default wait for one Redis command (REDIS_COMMAND_TIMEOUT_MS). Long enough that a busy event loop (a timer
 * that fires late though the reply has arrived) is not taken for an outage: such a false timeout counts the
 * request in Redis and lets the fallback admit it too. Short enough that an outage costs a request well under a
 * second, and only one request a second per instance while Redis stays away.
 */
export const REDIS_DEFAULTS = Object.freeze({ commandTimeoutMs: 500 })
export const LIMITER_DEFAULTS = Object.freeze({ maxSubjects: 200_000, ipv6PrefixLength: 56 })

export const DEFAULTS = {
  PORT: '8080',
  HOST: '127.0.0.1',
  DATABASE_URL: './data/petstore.db',
  DATABASE_POOL_SIZE: String(DATABASE_DEFAULTS.poolSize),
  DATABASE_STATEMENT_TIMEOUT_MS: String(DATABASE_DEFAULTS.statementTimeoutMs),
  DATABASE_CONNECT_TIMEOUT_MS: String(DATABASE_DEFAULTS.connectTimeoutMs),
  DATABASE_POOLER: 'none',
  DATABASE_TRUSTED_EVENT_TRIGGERS: '',
  LOG_LEVEL: 'info',
  LOG_FORMAT: 'auto',
  METRICS_PORT: '',
  METRICS_TOKEN: '',
  PETSTORE_ENV: 'production',
  PETSTORE_CONTAINER: 'false',
  PRODUCTION_URL: 'https://api.petstore.example',
  STAGING_URL: 'https://api.staging.petstore.example',
  DOCS_URL: 'https://docs.petstore.example',
  PETS_DEPRECATED_AT: '2026-06-01T00:00:00Z',
  PETS_SUNSET: '2027-12-31T23:59:59Z',
  AUTH_CACHE_TTL_MS: '5000',
  IDEMPOTENCY_TTL_SECONDS: String(DEFAULT_IDEMPOTENCY_TTL_SECONDS),
  HOLD_DEFAULT_TTL_SECONDS: String(HOLD_DEFAULTS.defaultTtlSeconds),
  HOLD_MAX_TTL_SECONDS: String(HOLD_DEFAULTS.maxTtlSeconds),
  HOLDS_MAX_ACTIVE_PER_QUOTA: String(HOLD_DEFAULTS.maxActivePerQuota),
  HOLDS_MAX_UNITS_PER_QUOTA: String(HOLD_DEFAULTS.maxUnitsPerQuota),
  HOLDS_RETENTION_DAYS: String(HOLD_DEFAULTS.retentionDays),
  HEADERS_TIMEOUT_MS: '10000',
  REQUEST_TIMEOUT_MS: '30000',
  KEEP_ALIVE_TIMEOUT_MS: '72000',
  SHUTDOWN_TIMEOUT_MS: '10000',
  // The readiness period of the Kubernetes manifests (deploy/kubernetes): one failed check takes the pod out.
  SHUTDOWN_DRAIN_MS: '5000',
  CORS_ORIGINS: '',
  REDIS_URL: '',
  REDIS_MODE: 'standalone',
  REDIS_SENTINELS: '',
  REDIS_SENTINEL_NAME: '',
  REDIS_USERNAME: '',
  REDIS_PASSWORD: '',
  REDIS_KEY_PREFIX: 'petstore:rl:',
  RATE_LIMIT_ON_REDIS_DOWN: 'local',
  REDIS_COMMAND_TIMEOUT_MS: String(REDIS_DEFAULTS.commandTimeoutMs),
  TRUST_PROXY: 'false',
  RATE_LIMIT_FREE: `${PLAN_LIMITS.free.perMinute}/${PLAN_LIMITS.free.perDay}`,
  RATE_LIMIT_PRO: `${PLAN_LIMITS.pro.perMinute}/${PLAN_LIMITS.pro.perDay}`,
  RATE_LIMIT_BUSINESS: `${PLAN_LIMITS.business.perMinute}/${PLAN_LIMITS.business.perDay}`,
  RATE_LIMIT_ANONYMOUS: `${PLAN_LIMITS.free.perMinute}/${PLAN_LIMITS.free.perDay}`,
  RATE_LIMIT_STATUS: '60/10000',
  RATE_LIMIT_MAX_SUBJECTS: String(LIMITER_DEFAULTS.maxSubjects),
  RATE_LIMIT_IPV6_PREFIX: String(LIMITER_DEFAULTS.ipv6PrefixLength),
  WEBHOOK_DELIVERY: 'true',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'false',
  WEBHOOK_TIMEOUT_MS: '10000',
  WEBHOOK_CONCURRENCY: '16',
  WEBHOOK_CONCURRENCY_PER_QUOTA: '4',
  WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION: '4',
  WEBHOOK_RETRY_FOR_MS: String(24 * 3_600_000),
  WEBHOOK_RETRY_BASE_MS: '5000',
  WEBHOOK_RETRY_MAX_DELAY_MS: String(3_600_000),
  WEBHOOK_DISABLE_AFTER_FAILURES: '50',
  WEBHOOK_DISABLE_AFTER_MS: String(24 * 3_600_000),
  WEBHOOK_POLL_MS: '200',
  WEBHOOK_MAX_PER_QUOTA: '10',
  WEBHOOK_RETENTION_MS: String(30 * 86_400_000),
  STREAM_MAX_PER_QUOTA: '5',
  STREAM_MAX_PER_INSTANCE: '1000',
  STREAM_HEARTBEAT_MS: '15000',
  STREAM_POLL_MS: '250',
  BAN_STRIKES: '',
  BAN_STRIKE_WINDOW_SECONDS: '600',
  BAN_SECONDS: '900',
  BAN_MAX_SECONDS: '86400',
  BAN_REPEAT_WINDOW_SECONDS: '86400'
} as const

type Env = Readonly<Record<string, string | undefined>>

function read (env: Env, name: keyof typeof DEFAULTS): string {
  const value = env[name]
  return value === undefined || value === '' ? DEFAULTS[name] : value
}

function integer (env: Env, name: keyof typeof DEFAULTS, min: number, max: number): number {
  const text = read(env, name)
  const value = Number(text)
  if (!/^[0-9]+$/.test(text) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${text}"`)
  }
  return value
}

function boolean (env: Env, name: keyof typeof DEFAULTS): boolean {
  const text = read(env, name)
  if (text !== 'true' && text !== 'false') throw new ConfigError(`${name} must be true or false, got "${text}"`)
  return text === 'true'
}

function oneOf<T extends string> (env: Env, name: keyof typeof DEFAULTS, allowed: readonly T[]): T {
  const value = read(env, name)
  if (!(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${value}"`)
  }
  return value as T
}

function timestamp (env: Env, name: keyof typeof DEFAULTS): Date {
  const text = read(env, name)
  if (!isRfc3339DateTime(text)) {
    throw new ConfigError(`${name} must be an RFC 3339 date-time such as 2027-12-31T23:59:59Z, got "${text}"`)
  }
  return new Date(Date.parse(text))
}

function httpUrl (env: Env, name: keyof typeof DEFAULTS): string {
  const text = read(env, name)
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new ConfigError(`${name} must be an absolute http(s) URL, got "${text}"`)
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigError(`${name} must be an absolute http(s) URL, got "${text}"`)
  }
  return text.replace(/\/+$/, '')
}

function limits (env: Env, name: keyof typeof DEFAULTS): Limits {
  const text = read(env, name)
  const match = /^([1-9][0-9]{0,9})\/([1-9][0-9]{0,10})$/.exec(text)
  const perMinute = Number(match?.[1])
  const perDay = Number(match?.[2])
  if (match === null || perMinute > perDay) {
    throw new ConfigError(`${name} must be PER_MINUTE/PER_DAY with PER_MINUTE <= PER_DAY, e.g. 60/1000, got "${text}"`)
  }
  return { perMinute, perDay }
}

function trustProxy (env: Env): boolean | number | string[] {
  const text = read(env, 'TRUST_PROXY').trim()
  if (text === 'false') return false
  if (text === 'true') return true
  if (/^[0-9]{1,2}$/.test(text)) return Number(text)
  const entries = text.split(',').map((entry) => entry.trim())
  if (entries.every((entry) => isIP(entry.replace(/\/[0-9]{1,3}$/, '')) !== 0)) return entries
  throw new ConfigError(`TRUST_PROXY must be false, true, a hop count, or a comma-separated list of proxy addresses/CIDRs, got "${text}"`)
}

function corsOrigins (env: Env): string[] {
  const text = read(env, 'CORS_ORIGINS').trim()
  if (text === '') return []
  return text.split(',').map((entry) => {
    const origin = entry.trim()
    // Exact origins only (scheme://host[:port]): no wildcards, no paths.
    if (!/^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?$/.test(origin)) {
      throw new ConfigError(`CORS_ORIGINS must list exact origins such as https://shop.example, got "${origin}"`)
    }
    return origin
  })
}

function metrics (env: Env, port: number): Config['metrics'] {
  const metricsPort = read(env, 'METRICS_PORT') === '' ? null : integer(env, 'METRICS_PORT', 0, 65535)
  // Port 0 (any free port, for tests) never collides; any other equal pair would.
  if (metricsPort !== null && metricsPort !== 0 && metricsPort === port) {
    throw new ConfigError(`METRICS_PORT must differ from PORT (${port}); leave it empty to serve /metrics on PORT`)
  }
  const token = read(env, 'METRICS_TOKEN')
  // The characters of an RFC 6750 bearer token; never echoed in the error.
  if (token !== '' && !/^[A-Za-z0-9._~+/=-]{16,256}$/.test(token)) {
    throw new ConfigError(`METRICS_TOKEN must be 16-256 of A-Z a-z 0-9 . _ ~ + / = - (got ${token.length} characters)`)
  }
  return Object.freeze({ port: metricsPort, token: token === '' ? null : token })
}

/** A redis:// or rediss:// URL, shown with its password hidden when refused. */
function redisUrlText (name: string, text: string): string {
  if (!/^rediss?:\/\/[^\s,]+$/.test(text)) throw new ConfigError(`${name} must be redis:// or rediss:// URLs, got "${text.replace(/\/\/.*@/, '//***@')}"`)
  return text
}

function redis (env: Env): RedisConfig | null {
  const mode = oneOf(env, 'REDIS_MODE', REDIS_MODES)
  const onDown = oneOf(env, 'RATE_LIMIT_ON_REDIS_DOWN', REDIS_DOWN_POLICIES)
  const commandTimeoutMs = integer(env, 'REDIS_COMMAND_TIMEOUT_MS', 10, 10_000)
  const url = read(env, 'REDIS_URL').trim()
  const sentinels = read(env, 'REDIS_SENTINELS').trim()
  const sentinelOnly = (['REDIS_SENTINELS', 'REDIS_SENTINEL_NAME', 'REDIS_USERNAME', 'REDIS_PASSWORD'] as const).filter((name) => read(env, name) !== '')
  if (mode !== 'sentinel' && sentinelOnly.length > 0) {
    throw new ConfigError(`${sentinelOnly.join(', ')} ${sentinelOnly.length === 1 ? 'is' : 'are'} only read with REDIS_MODE=sentinel (REDIS_MODE is ${mode}); ` +
      'credentials of other modes go in REDIS_URL')
  }
  switch (mode) {
    case 'standalone':
      if (url === '') return null
      if (url.includes(',')) throw new ConfigError('REDIS_URL lists several servers: set REDIS_MODE=cluster for a Redis Cluster, or give one URL')
      return Object.freeze({ mode, url: redisUrlText('REDIS_URL', url), onDown, commandTimeoutMs })
    case 'cluster': {
      if (url === '') throw new ConfigError('REDIS_MODE=cluster needs REDIS_URL: one or more seed nodes, e.g. redis://10.0.0.1:7000,redis://10.0.0.2:7000')
      const seeds = url.split(',').map((seed) => redisUrlText('REDIS_URL', seed.trim()))
      return Object.freeze({ mode, seeds: Object.freeze(seeds), onDown, commandTimeoutMs })
    }
    case 'sentinel': {
      if (url !== '') throw new ConfigError('REDIS_URL is not read with REDIS_MODE=sentinel: the Sentinels name the primary (REDIS_SENTINELS, REDIS_SENTINEL_NAME)')
      const name = read(env, 'REDIS_SENTINEL_NAME').trim()
      if (sentinels === '' || name === '') throw new ConfigError('REDIS_MODE=sentinel needs REDIS_SENTINELS (host:port,...) and REDIS_SENTINEL_NAME (the primary\'s name)')
      const list = sentinels.split(',').map((entry) => {
        const match = /^\[?([A-Za-z0-9.:-]+?)\]?:([0-9]{1,5})$/.exec(entry.trim())
        const port = Number(match?.[2])
        if (match === null || port < 1 || port > 65535) throw new ConfigError(`REDIS_SENTINELS must be host:port entries, comma-separated, got "${entry.trim()}"`)
        return Object.freeze({ host: match[1] as string, port })
      })
      const username = read(env, 'REDIS_USERNAME')
      const password = read(env, 'REDIS_PASSWORD')
      return Object.freeze({ mode, sentinels: Object.freeze(list), name, username: username === '' ? null : username, password: password === '' ? null : password, onDown, commandTimeoutMs })
    }
  }
}

function redisKeyPrefix (env: Env): string {
  const text = read(env, 'REDIS_KEY_PREFIX')
  // Braces would break the Redis Cluster hash tag that keeps a subject's keys on one node.
  if (!/^[A-Za-z0-9:._-]{1,64}$/.test(text)) throw new ConfigError(`REDIS_KEY_PREFIX must be 1-64 of A-Z a-z 0-9 : . _ -, got "${text}"`)
  return text
}

function banPolicy (env: Env): BanPolicy | null {
  const baseSeconds = integer(env, 'BAN_SECONDS', 0, 7 * 86_400)
  if (baseSeconds === 0) return null
  const strikes = read(env, 'BAN_STRIKES') === '' ? null : integer(env, 'BAN_STRIKES', 1, 1_000_000_000)
  const maxSeconds = integer(env, 'BAN_MAX_SECONDS', 1, 30 * 86_400)
  if (maxSeconds < baseSeconds) throw new ConfigError('BAN_MAX_SECONDS must not be less than BAN_SECONDS')
  return Object.freeze({
    strikes,
    strikeWindowSeconds: integer(env, 'BAN_STRIKE_WINDOW_SECONDS', 1, 86_400),
    baseSeconds,
    maxSeconds,
    repeatWindowSeconds: integer(env, 'BAN_REPEAT_WINDOW_SECONDS', 0, 30 * 86_400)
  })
}

function databasePooler (env: Env, databaseUrl: string): DatabasePooler {
  const pooler = oneOf(env, 'DATABASE_POOLER', DATABASE_POOLERS)
  if (pooler !== 'none' && !isPostgresUrl(databaseUrl)) {
    throw new ConfigError(`DATABASE_POOLER=${pooler} needs a postgres:// or postgresql:// DATABASE_URL (SQLite has no pooler)`)
  }
  return pooler
}

/**
 * DATABASE_TRUSTED_EVENT_TRIGGERS: names of event triggers, comma-separated, that the PostgreSQL schema check leaves out
 * (a managed PostgreSQL installs some of its own). Each is a PostgreSQL identifier as pg_event_trigger stores it.
 */
function trustedEventTriggers (env: Env, databaseUrl: string): readonly string[] {
  const text = read(env, 'DATABASE_TRUSTED_EVENT_TRIGGERS')
  if (text === '') return Object.freeze([])
  if (!isPostgresUrl(databaseUrl)) {
    throw new ConfigError('DATABASE_TRUSTED_EVENT_TRIGGERS needs a postgres:// or postgresql:// DATABASE_URL (SQLite has no event triggers)')
  }
  const names = text.split(',').map((name) => name.trim())
  for (const name of names) {
    // NAMEDATALEN - 1 bytes, printable, no comma (the separator).
    if (name === '' || Buffer.byteLength(name) > 63 || !/^[\x21-\x7e]+$/.test(name)) {
      throw new ConfigError('DATABASE_TRUSTED_EVENT_TRIGGERS must list event trigger names separated by commas, each 1 to 63 visible characters')
    }
  }
  return Object.freeze(names)
}

/** The settings of holds; a default duration longer than the maximum would refuse every hold sent without one. */
function holds (env: Env): HoldSettings {
  const maxTtlSeconds = integer(env, 'HOLD_MAX_TTL_SECONDS', 1, 30 * 86_400)
  const defaultTtlSeconds = integer(env, 'HOLD_DEFAULT_TTL_SECONDS', 1, 30 * 86_400)
  if (defaultTtlSeconds > maxTtlSeconds) {
    throw new ConfigError(`HOLD_DEFAULT_TTL_SECONDS (${defaultTtlSeconds}) must not be greater than HOLD_MAX_TTL_SECONDS (${maxTtlSeconds})`)
  }
  return Object.freeze({
    defaultTtlSeconds,
    maxTtlSeconds,
    maxActivePerQuota: integer(env, 'HOLDS_MAX_ACTIVE_PER_QUOTA', 1, 1_000_000),
    maxUnitsPerQuota: integer(env, 'HOLDS_MAX_UNITS_PER_QUOTA', 1, 1_000_000_000_000),
    retentionDays: integer(env, 'HOLDS_RETENTION_DAYS', 1, 3650)
  })
}

/** Reads and validates the configuration; `cwd` resolves a relative SQLite path. */
export function loadConfig (env: Env, cwd: string = process.cwd()): Config {
  const databaseUrl = read(env, 'DATABASE_URL')
  const pets = { deprecatedAt: timestamp(env, 'PETS_DEPRECATED_AT'), sunset: timestamp(env, 'PETS_SUNSET') }
  if (pets.sunset.getTime() < pets.deprecatedAt.getTime()) {
    throw new ConfigError('PETS_SUNSET must not be earlier than PETS_DEPRECATED_AT (RFC 8594)')
  }
  const host = read(env, 'HOST')
  const port = integer(env, 'PORT', 0, 65535)
  return Object.freeze({
    port,
    host,
    databaseUrl: isPostgresUrl(databaseUrl) || databaseUrl === ':memory:' || isAbsolute(databaseUrl)
      ? databaseUrl
      : resolve(cwd, databaseUrl),
    database: Object.freeze({
      poolSize: integer(env, 'DATABASE_POOL_SIZE', 1, 1000),
      statementTimeoutMs: integer(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 10, 600_000),
      connectTimeoutMs: integer(env, 'DATABASE_CONNECT_TIMEOUT_MS', 10, 600_000),
      pooler: databasePooler(env, databaseUrl),
      trustedEventTriggers: trustedEventTriggers(env, databaseUrl)
    }),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS),
    logFormat: oneOf(env, 'LOG_FORMAT', LOG_FORMATS),
    environment: oneOf(env, 'PETSTORE_ENV', ENVIRONMENTS),
    servers: Object.freeze({ production: httpUrl(env, 'PRODUCTION_URL'), staging: httpUrl(env, 'STAGING_URL') }),
    docsUrl: httpUrl(env, 'DOCS_URL'),
    container: boolean(env, 'PETSTORE_CONTAINER'),
    pets: Object.freeze(pets),
    authCacheTtlMs: integer(env, 'AUTH_CACHE_TTL_MS', 0, 60_000),
    idempotencyTtlSeconds: integer(env, 'IDEMPOTENCY_TTL_SECONDS', 60, 30 * 86_400),
    holds: holds(env),
    timeouts: Object.freeze({
      headersMs: integer(env, 'HEADERS_TIMEOUT_MS', 100, 600_000),
      requestMs: integer(env, 'REQUEST_TIMEOUT_MS', 100, 600_000),
      keepAliveMs: integer(env, 'KEEP_ALIVE_TIMEOUT_MS', 100, 600_000)
    }),
    shutdownDrainMs: integer(env, 'SHUTDOWN_DRAIN_MS', 0, 600_000),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 100, 600_000),
    corsOrigins: corsOrigins(env),
    redis: redis(env),
    redisKeyPrefix: redisKeyPrefix(env),
    trustProxy: trustProxy(env),
    rateLimits: Object.freeze({
      plans: Object.freeze({
        free: limits(env, 'RATE_LIMIT_FREE'),
        pro: limits(env, 'RATE_LIMIT_PRO'),
        business: limits(env, 'RATE_LIMIT_BUSINESS')
      }),
      anonymous: limits(env, 'RATE_LIMIT_ANONYMOUS'),
      status: limits(env, 'RATE_LIMIT_STATUS'),
      bans: banPolicy(env),
      maxSubjects: integer(env, 'RATE_LIMIT_MAX_SUBJECTS', 1000, 100_000_000),
      ipv6PrefixLength: integer(env, 'RATE_LIMIT_IPV6_PREFIX', 32, 128)
    }),
    metrics: metrics(env, port),
    webhooks: Object.freeze({
      deliver: boolean(env, 'WEBHOOK_DELIVERY'),
      allowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'),
      timeoutMs: integer(env, 'WEBHOOK_TIMEOUT_MS', 100, 60_000),
      concurrency: integer(env, 'WEBHOOK_CONCURRENCY', 1, 1000),
      concurrencyPerQuota: integer(env, 'WEBHOOK_CONCURRENCY_PER_QUOTA', 1, 1000),
      concurrencyPerSubscription: integer(env, 'WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION', 1, 100),
      retryForMs: integer(env, 'WEBHOOK_RETRY_FOR_MS', 0, 30 * 86_400_000),
      retryBaseMs: integer(env, 'WEBHOOK_RETRY_BASE_MS', 10, 3_600_000),
      retryMaxDelayMs: integer(env, 'WEBHOOK_RETRY_MAX_DELAY_MS', 10, 86_400_000),
      disableAfterFailures: integer(env, 'WEBHOOK_DISABLE_AFTER_FAILURES', 1, 1_000_000),
      disableAfterMs: integer(env, 'WEBHOOK_DISABLE_AFTER_MS', 0, 30 * 86_400_000),
      pollMs: integer(env, 'WEBHOOK_POLL_MS', 10, 60_000),
      maxPerQuota: integer(env, 'WEBHOOK_MAX_PER_QUOTA', 1, 1000),
      retentionMs: integer(env, 'WEBHOOK_RETENTION_MS', 60_000, 365 * 86_400_000)
    }),
    streams: Object.freeze({
      maxPerQuota: integer(env, 'STREAM_MAX_PER_QUOTA', 1, 1000),
      maxPerInstance: integer(env, 'STREAM_MAX_PER_INSTANCE', 1, 100_000),
      heartbeatMs: integer(env, 'STREAM_HEARTBEAT_MS', 100, 600_000),
      pollMs: integer(env, 'STREAM_POLL_MS', 10, 60_000)
    })
  })
}
