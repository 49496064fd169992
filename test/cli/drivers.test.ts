/**
 * A process loads the drivers of what it is configured to use and no other: on SQLite with the in-process limiter,
 * neither PostgreSQL's client (pg) nor Redis's (ioredis), which would add a sixth of a second to every command's start.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Output } from './run.js'

const PRELOAD = `--import=${fileURLToPath(new URL('../fixtures/loaded-packages.mjs', import.meta.url))}`

/** The packages named by the line the preload (test/fixtures/loaded-packages.mjs) writes to stderr at exit. */
function loaded ({ stderr }: Output): string[] {
  const line = /^loaded packages: (.*)$/m.exec(stderr)
  assert.ok(line !== null, `no list of loaded packages in:\n${stderr}`)
  return (line[1] as string).split(' ').filter(Boolean)
}

function assertSqliteOnly (packages: string[]): void {
  assert.ok(packages.includes('better-sqlite3'), `better-sqlite3 among ${packages.join(', ')}`)
  for (const driver of ['pg', 'ioredis']) {
    assert.ok(!packages.includes(driver), `${driver} loaded: ${packages.join(', ')}`)
  }
}

describe('the drivers a process loads', () => {
  test('when commands run on a SQLite store without REDIS_URL, then they load better-sqlite3 but neither pg nor ioredis', async (t) => {
    const cli = cliFor(t, { NODE_OPTIONS: PRELOAD })
    for (const args of [['migrate'], ['keys', 'create', '--plan', 'free'], ['keys', 'list']]) {
      const res = await cli.run(args)
      assert.equal(res.code, 0, res.stderr)
      assertSqliteOnly(loaded(res))
    }
  })

  test('when serve runs on a SQLite store without REDIS_URL, then it loads neither pg nor ioredis', async (t) => {
    const cli = cliFor(t, { NODE_OPTIONS: PRELOAD })
    const { server } = await startServe(cli)
    server.child.kill('SIGTERM')
    assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
    assertSqliteOnly(loaded(server.output()))
  })

  test('when a command runs on PostgreSQL, then it loads pg', async (t) => {
    // Nothing listens on port 1: the command fails to connect, after loading the driver it would have used.
    const cli = cliFor(t, { NODE_OPTIONS: PRELOAD, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/petstore' })
    const res = await cli.run(['keys', 'list'])
    assert.notEqual(res.code, 0)
    assert.ok(loaded(res).includes('pg'), res.stderr)
  })
})
