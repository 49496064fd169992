import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { DEFAULTS, loadConfig } from '../src/config.js'
import { ConfigError } from '../src/errors.js'
import { prettyLogs } from '../src/logger.js'

describe('loadConfig', () => {
  test('when nothing is set, then the documented defaults apply', () => {
    const config = loadConfig({}, '/srv/app')
    assert.equal(config.port, 8080)
    assert.equal(config.host, '127.0.0.1')
    assert.equal(config.databaseUrl, '/srv/app/data/petstore.db')
    assert.equal(config.environment, 'production')
    assert.equal(config.authCacheTtlMs, 5000)
    // A SIGTERM drains for the Kubernetes manifests' readiness period, then in-flight requests get 10 s.
    assert.deepEqual([config.shutdownDrainMs, config.shutdownTimeoutMs], [5000, 10_000])
    assert.equal(config.pets.sunset.toISOString(), new Date(DEFAULTS.PETS_SUNSET).toISOString())
    assert.ok(Object.isFrozen(config))
  })

  test('when LOG_FORMAT is auto, then logs are pretty on a terminal and JSON elsewhere; json and pretty force either', () => {
    assert.equal(loadConfig({}).logFormat, 'auto')
    assert.deepEqual([prettyLogs('auto', true), prettyLogs('auto', false)], [true, false])
    assert.deepEqual([prettyLogs('json', true), prettyLogs('pretty', false)], [false, true])
  })

  test('when DATABASE_URL is a postgres URL, then it is kept as given', () => {
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://u@h/db' }).databaseUrl, 'postgres://u@h/db')
    assert.equal(loadConfig({ DATABASE_URL: 'postgresql://u@h/db' }).databaseUrl, 'postgresql://u@h/db')
  })

  const invalid: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /PORT/],
    [{ PORT: '70000' }, /PORT/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ LOG_FORMAT: 'xml' }, /LOG_FORMAT must be one of auto, json, pretty/],
    [{ RATE_LIMIT_IPV6_PREFIX: '16' }, /RATE_LIMIT_IPV6_PREFIX/],
    [{ PETSTORE_ENV: 'dev' }, /PETSTORE_ENV/],
    [{ PETS_SUNSET: 'next year' }, /PETS_SUNSET/],
    [{ PETS_DEPRECATED_AT: '2026-13-01' }, /PETS_DEPRECATED_AT/],
    [{ PETS_DEPRECATED_AT: '2027-01-01T00:00:00Z', PETS_SUNSET: '2026-01-01T00:00:00Z' }, /not be earlier/],
    [{ PRODUCTION_URL: 'ftp://x' }, /PRODUCTION_URL/],
    [{ AUTH_CACHE_TTL_MS: '-1' }, /AUTH_CACHE_TTL_MS/],
    [{ SHUTDOWN_DRAIN_MS: '5s' }, /SHUTDOWN_DRAIN_MS must be an integer from 0 to 600000/],
    [{ SHUTDOWN_DRAIN_MS: '600001' }, /SHUTDOWN_DRAIN_MS/],
    [{ CORS_ORIGINS: '*' }, /CORS_ORIGINS/],
    [{ CORS_ORIGINS: 'https://shop.example/path' }, /CORS_ORIGINS/]
  ]
  for (const [env, message] of invalid) {
    test(`when ${JSON.stringify(env)}, then it throws a ConfigError naming the variable`, () => {
      assert.throws(() => loadConfig(env), (error: unknown) => error instanceof ConfigError && message.test(error.message))
    })
  }
})

describe('loadConfig: metrics', () => {
  test('when METRICS_PORT and METRICS_TOKEN are unset, then /metrics is on the main port and open', () => {
    assert.deepEqual(loadConfig({}).metrics, { port: null, token: null })
  })

  test('when METRICS_PORT and METRICS_TOKEN are set, then they are kept', () => {
    const token = 'scrape-token-0123456789'
    assert.deepEqual(loadConfig({ METRICS_PORT: '9464', METRICS_TOKEN: token }).metrics, { port: 9464, token })
  })

  test('when PORT and METRICS_PORT are both 0, then both are accepted (two ephemeral ports)', () => {
    assert.equal(loadConfig({ PORT: '0', METRICS_PORT: '0' }).metrics.port, 0)
  })

  const invalid: Array<[Record<string, string>, RegExp]> = [
    [{ METRICS_PORT: 'abc' }, /METRICS_PORT/],
    [{ METRICS_PORT: '70000' }, /METRICS_PORT/],
    [{ METRICS_PORT: '8080' }, /METRICS_PORT must differ from PORT/],
    [{ PORT: '9000', METRICS_PORT: '9000' }, /METRICS_PORT must differ from PORT/],
    [{ METRICS_TOKEN: 'short' }, /METRICS_TOKEN/],
    [{ METRICS_TOKEN: 'has spaces in it, 16+ chars' }, /METRICS_TOKEN/]
  ]
  for (const [env, message] of invalid) {
    test(`when ${JSON.stringify(env)}, then it throws a ConfigError naming the variable`, () => {
      assert.throws(() => loadConfig(env), (error: unknown) => error instanceof ConfigError && message.test(error.message))
    })
  }

  test('when METRICS_TOKEN is invalid, then the error does not show it', () => {
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'secret!' }),
      (error: unknown) => error instanceof ConfigError && !error.message.includes('secret'))
  })
})

describe('loadConfig: DATABASE_TRUSTED_EVENT_TRIGGERS', () => {
  const url = 'postgres://petstore@db.internal/petstore'

  test('when unset, then no event trigger is trusted', () => {
    assert.deepEqual(loadConfig({ DATABASE_URL: url }).database.trustedEventTriggers, [])
  })

  test('when it lists names, then each is kept as written, blanks around commas dropped', () => {
    assert.deepEqual(loadConfig({ DATABASE_URL: url, DATABASE_TRUSTED_EVENT_TRIGGERS: 'pgrst_ddl_watch, issue_pg_cron_access' }).database.trustedEventTriggers,
      ['pgrst_ddl_watch', 'issue_pg_cron_access'])
  })

  const invalid: Array<[Record<string, string>, RegExp]> = [
    [{ DATABASE_URL: './data/petstore.db', DATABASE_TRUSTED_EVENT_TRIGGERS: 'audit' }, /DATABASE_TRUSTED_EVENT_TRIGGERS needs a postgres:\/\/ or postgresql:\/\/ DATABASE_URL/],
    [{ DATABASE_URL: url, DATABASE_TRUSTED_EVENT_TRIGGERS: 'audit,,other' }, /DATABASE_TRUSTED_EVENT_TRIGGERS must list event trigger names/],
    [{ DATABASE_URL: url, DATABASE_TRUSTED_EVENT_TRIGGERS: 'a'.repeat(64) }, /each 1 to 63 visible characters/],
    [{ DATABASE_URL: url, DATABASE_TRUSTED_EVENT_TRIGGERS: 'two words' }, /each 1 to 63 visible characters/]
  ]
  for (const [env, message] of invalid) {
    test(`when ${JSON.stringify(env)}, then it throws a ConfigError naming the variable`, () => {
      assert.throws(() => loadConfig(env), (error: unknown) => error instanceof ConfigError && message.test(error.message))
    })
  }
})

describe('loadConfig: DATABASE_POOLER', () => {
  const url = 'postgres://petstore@pgbouncer.internal:6432/petstore'

  test('when DATABASE_POOLER is unset, then the store connects as to PostgreSQL itself (none)', () => {
    assert.equal(loadConfig({ DATABASE_URL: url }).database.pooler, 'none')
    assert.equal(loadConfig({}).database.pooler, 'none')
  })

  test('when DATABASE_POOLER is transaction with a PostgreSQL URL, then it is kept', () => {
    assert.equal(loadConfig({ DATABASE_URL: url, DATABASE_POOLER: 'transaction' }).database.pooler, 'transaction')
  })

  const invalid: Array<[Record<string, string>, RegExp]> = [
    [{ DATABASE_URL: url, DATABASE_POOLER: 'session' }, /DATABASE_POOLER must be one of none, transaction, got "session"/],
    [{ DATABASE_URL: url, DATABASE_POOLER: 'Transaction' }, /DATABASE_POOLER must be one of none, transaction/],
    [{ DATABASE_URL: './data/petstore.db', DATABASE_POOLER: 'transaction' }, /DATABASE_POOLER=transaction needs a postgres:\/\/ or postgresql:\/\/ DATABASE_URL/]
  ]
  for (const [env, message] of invalid) {
    test(`when ${JSON.stringify(env)}, then it throws a ConfigError naming the variable`, () => {
      assert.throws(() => loadConfig(env), (error: unknown) => error instanceof ConfigError && message.test(error.message))
    })
  }
})

describe('loadConfig: holds', () => {
  test('when nothing is set, then holds last 15 minutes, a day at most, with the documented caps and retention', () => {
    assert.deepEqual(loadConfig({}).holds, { defaultTtlSeconds: 900, maxTtlSeconds: 86_400, maxActivePerQuota: 1000, maxUnitsPerQuota: 100_000, retentionDays: 30 })
  })

  test('when the settings are given, then they are kept', () => {
    const config = loadConfig({
      HOLD_DEFAULT_TTL_SECONDS: '60', HOLD_MAX_TTL_SECONDS: '600', HOLDS_MAX_ACTIVE_PER_QUOTA: '5', HOLDS_MAX_UNITS_PER_QUOTA: '50', HOLDS_RETENTION_DAYS: '7'
    })
    assert.deepEqual(config.holds, { defaultTtlSeconds: 60, maxTtlSeconds: 600, maxActivePerQuota: 5, maxUnitsPerQuota: 50, retentionDays: 7 })
  })

  test('when a setting is out of range, or the default outlasts the maximum, then loading fails naming the variable', () => {
    assert.throws(() => loadConfig({ HOLD_MAX_TTL_SECONDS: '0' }), (error: unknown) => error instanceof ConfigError && /HOLD_MAX_TTL_SECONDS must be an integer from 1/.test(error.message))
    assert.throws(() => loadConfig({ HOLDS_MAX_ACTIVE_PER_QUOTA: 'many' }), (error: unknown) => error instanceof ConfigError && /HOLDS_MAX_ACTIVE_PER_QUOTA/.test(error.message))
    assert.throws(() => loadConfig({ HOLDS_RETENTION_DAYS: '0' }), (error: unknown) => error instanceof ConfigError && /HOLDS_RETENTION_DAYS/.test(error.message))
    assert.throws(() => loadConfig({ HOLD_DEFAULT_TTL_SECONDS: '900', HOLD_MAX_TTL_SECONDS: '600' }),
      (error: unknown) => error instanceof ConfigError && /HOLD_DEFAULT_TTL_SECONDS \(900\) must not be greater than HOLD_MAX_TTL_SECONDS \(600\)/.test(error.message))
  })
})
