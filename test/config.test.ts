import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ConfigError, DEFAULTS, loadConfig } from '../src/config.js'

describe('loadConfig', () => {
  test('when nothing is set, then the documented defaults apply', () => {
    const config = loadConfig({}, '/srv/app')
    assert.equal(config.port, 8080)
    assert.equal(config.host, '127.0.0.1')
    assert.equal(config.databaseUrl, '/srv/app/data/petstore.db')
    assert.equal(config.environment, 'production')
    assert.equal(config.authCacheTtlMs, 5000)
    assert.equal(config.pets.sunset.toISOString(), new Date(DEFAULTS.PETS_SUNSET).toISOString())
    assert.ok(Object.isFrozen(config))
  })

  test('when DATABASE_URL is a postgres URL, then it is kept as given', () => {
    assert.equal(loadConfig({ DATABASE_URL: 'postgres://u@h/db' }).databaseUrl, 'postgres://u@h/db')
    assert.equal(loadConfig({ DATABASE_URL: 'postgresql://u@h/db' }).databaseUrl, 'postgresql://u@h/db')
  })

  const invalid: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /PORT/],
    [{ PORT: '70000' }, /PORT/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ PETSTORE_ENV: 'dev' }, /PETSTORE_ENV/],
    [{ PETS_SUNSET: 'next year' }, /PETS_SUNSET/],
    [{ PETS_DEPRECATED_AT: '2026-13-01' }, /PETS_DEPRECATED_AT/],
    [{ PETS_DEPRECATED_AT: '2027-01-01T00:00:00Z', PETS_SUNSET: '2026-01-01T00:00:00Z' }, /not be earlier/],
    [{ PRODUCTION_URL: 'ftp://x' }, /PRODUCTION_URL/],
    [{ AUTH_CACHE_TTL_MS: '-1' }, /AUTH_CACHE_TTL_MS/],
    [{ CORS_ORIGINS: '*' }, /CORS_ORIGINS/],
    [{ CORS_ORIGINS: 'https://shop.example/path' }, /CORS_ORIGINS/]
  ]
  for (const [env, message] of invalid) {
    test(`when ${JSON.stringify(env)}, then it throws a ConfigError naming the variable`, () => {
      assert.throws(() => loadConfig(env), (error: unknown) => error instanceof ConfigError && message.test(error.message))
    })
  }
})
