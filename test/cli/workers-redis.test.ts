/**
 * `petstore serve --workers N` with a Redis that cannot be used as configured exits 2 with the reason: the primary
 * checks Redis before it forks, and a worker that cannot start lets go of the IPC channel so it exits and the
 * primary, seeing a configuration error, stops instead of replacing it (found by an attacker helper).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { requireRedisServer, startRedisServer } from '../helpers/redis-servers.js'
import { cliFor, within } from './run.js'

if (await requireRedisServer('serve --workers with an unusable Redis')) {
  test('serve --workers 2 with a wrong Redis password exits 2 with the reason', async (t) => {
    const server = await startRedisServer(t.after.bind(t), ['--requirepass', 'right'])
    const cli = cliFor(t)
    const started = cli.start(['serve', '--workers', '2'], { PORT: '0', HOST: '127.0.0.1', REDIS_URL: `redis://:wrong@127.0.0.1:${server.port}` })
    t.after(() => { if (started.child.exitCode === null) started.child.kill('SIGKILL') })
    const { code } = await within(60_000, started.exited, 'serve --workers 2 exiting on a Redis configuration error').catch((error: unknown) => {
      assert.fail(`${String(error)}; stderr so far: ${started.output().stderr}`)
    })
    assert.equal(code, 2, started.output().stderr)
    assert.match(started.output().stderr, /credentials are wrong or missing/)
  })
}
