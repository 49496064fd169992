/** REDIS_MODE and its variables, and RATE_LIMIT_ON_REDIS_DOWN: what each mode reads, and refusals that name the fix. */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { loadConfig } from '../src/config.js'
import { ConfigError } from '../src/errors.js'

describe('loadConfig: Redis topologies', () => {
  test('without REDIS_URL in the default mode, the limits are counted in process', () => {
    assert.equal(loadConfig({}).redis, null)
  })

  test('standalone (the default) reads one REDIS_URL, and the run-time policy defaults to local', () => {
    assert.deepEqual(loadConfig({ REDIS_URL: 'redis://10.0.0.5:6379/2' }).redis, { mode: 'standalone', url: 'redis://10.0.0.5:6379/2', onDown: 'local', commandTimeoutMs: 500 })
    assert.equal(loadConfig({ REDIS_URL: 'rediss://u:p@r.example:6380', RATE_LIMIT_ON_REDIS_DOWN: 'deny' }).redis?.onDown, 'deny')
  })

  test('cluster reads one or more comma-separated seed URLs from REDIS_URL', () => {
    assert.deepEqual(loadConfig({ REDIS_MODE: 'cluster', REDIS_URL: 'redis://10.0.0.1:7000, redis://10.0.0.2:7000' }).redis,
      { mode: 'cluster', seeds: ['redis://10.0.0.1:7000', 'redis://10.0.0.2:7000'], onDown: 'local', commandTimeoutMs: 500 })
    assert.deepEqual(loadConfig({ REDIS_MODE: 'cluster', REDIS_URL: 'redis://10.0.0.1:7000' }).redis,
      { mode: 'cluster', seeds: ['redis://10.0.0.1:7000'], onDown: 'local', commandTimeoutMs: 500 })
  })

  test('sentinel reads REDIS_SENTINELS and REDIS_SENTINEL_NAME, and the data nodes\' credentials', () => {
    assert.deepEqual(loadConfig({
      REDIS_MODE: 'sentinel', REDIS_SENTINELS: 's1.internal:26379,10.0.0.9:26380,[::1]:26381', REDIS_SENTINEL_NAME: 'petstore', REDIS_PASSWORD: 'pw', RATE_LIMIT_ON_REDIS_DOWN: 'deny'
    }).redis, {
      mode: 'sentinel',
      sentinels: [{ host: 's1.internal', port: 26379 }, { host: '10.0.0.9', port: 26380 }, { host: '::1', port: 26381 }],
      name: 'petstore',
      username: null,
      password: 'pw',
      onDown: 'deny',
      commandTimeoutMs: 500
    })
  })

  test('REDIS_COMMAND_TIMEOUT_MS sets how long one command may take before a request falls back', () => {
    assert.equal(loadConfig({ REDIS_URL: 'redis://a:6379', REDIS_COMMAND_TIMEOUT_MS: '150' }).redis?.commandTimeoutMs, 150)
    assert.throws(() => loadConfig({ REDIS_URL: 'redis://a:6379', REDIS_COMMAND_TIMEOUT_MS: '5' }), /REDIS_COMMAND_TIMEOUT_MS must be an integer from 10 to 10000/)
  })

  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ REDIS_MODE: 'sharded' }, /REDIS_MODE must be one of standalone, cluster, sentinel/],
    [{ REDIS_URL: 'redis://a:1', RATE_LIMIT_ON_REDIS_DOWN: 'open' }, /RATE_LIMIT_ON_REDIS_DOWN must be one of local, deny/],
    [{ REDIS_URL: 'redis://a:7000,redis://b:7000' }, /set REDIS_MODE=cluster/],
    [{ REDIS_URL: '10.0.0.1:6379' }, /REDIS_URL must be redis:\/\/ or rediss:\/\/ URLs/],
    [{ REDIS_MODE: 'cluster' }, /REDIS_MODE=cluster needs REDIS_URL/],
    [{ REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:7000,b:7000' }, /REDIS_URL must be redis:\/\/ or rediss:\/\/ URLs, got "b:7000"/],
    [{ REDIS_MODE: 'sentinel', REDIS_SENTINEL_NAME: 'petstore' }, /needs REDIS_SENTINELS/],
    [{ REDIS_MODE: 'sentinel', REDIS_SENTINELS: 'a:26379' }, /REDIS_SENTINEL_NAME/],
    [{ REDIS_MODE: 'sentinel', REDIS_SENTINELS: 'a', REDIS_SENTINEL_NAME: 'p' }, /host:port entries/],
    [{ REDIS_MODE: 'sentinel', REDIS_SENTINELS: 'a:26379', REDIS_SENTINEL_NAME: 'p', REDIS_URL: 'redis://a:6379' }, /REDIS_URL is not read with REDIS_MODE=sentinel/],
    [{ REDIS_URL: 'redis://a:6379', REDIS_SENTINELS: 'a:26379' }, /REDIS_SENTINELS is only read with REDIS_MODE=sentinel/],
    [{ REDIS_URL: 'redis://a:6379', REDIS_PASSWORD: 'x' }, /credentials of other modes go in REDIS_URL/]
  ]
  for (const [env, message] of refused) {
    test(`when ${JSON.stringify(env)}, then it throws a ConfigError that says what to set`, () => {
      assert.throws(() => loadConfig(env), (error: unknown) => error instanceof ConfigError && message.test(error.message))
    })
  }

  test('a refused URL never shows its password', () => {
    assert.throws(() => loadConfig({ REDIS_MODE: 'cluster', REDIS_URL: 'redis://a:7000,http://u:topsecret@b:7000' }),
      (error: unknown) => error instanceof ConfigError && !error.message.includes('topsecret'))
  })
})
