import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { MIGRATIONS } from '../../src/store/postgres/migrations.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { cliFor, freePort } from './run.js'

const DEMO = fileURLToPath(new URL('../../data/demo.json', import.meta.url))

describe('the CLI on PostgreSQL', () => {
  test('when PostgreSQL is unreachable, then migrate exits 1 with a message and no stack trace', async (t) => {
    const port = await freePort()
    const cli = cliFor(t, { DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/none`, DATABASE_CONNECT_TIMEOUT_MS: '500' })
    const res = await cli.run(['migrate'])
    assert.equal(res.code, 1)
    assert.match(res.stderr, /PostgreSQL is unavailable/)
    assert.doesNotMatch(res.stderr, /\n\s+at /)
  })
})

if (await requirePostgres('CLI tests on PostgreSQL')) {
  describe('the CLI on PostgreSQL', () => {
    test('when DATABASE_URL names PostgreSQL, then migrate, import, inventory history and keys work against it', async (t) => {
      const url = await tempPostgresDatabase(t)
      const cli = cliFor(t, { DATABASE_URL: url })
      const first = await cli.run(['migrate'])
      assert.equal(first.code, 0, first.stderr)
      assert.match(first.stderr, new RegExp(`Applied ${MIGRATIONS.length} migration`))
      assert.match((await cli.run(['migrate'])).stderr, /up to date/)
      const imported = await cli.run(['import', DEMO])
      assert.equal(imported.code, 0, imported.stderr)
      const history = await cli.run(['inventory', 'history', '1', '--json'])
      assert.equal(history.code, 0, history.stderr)
      assert.deepEqual((JSON.parse(history.stdout) as Array<{ reason: string, previousQuantity: number | null }>)
        .map((e) => [e.reason, e.previousQuantity]), [['import', null]])
      const created = await cli.run(['keys', 'create', '--plan', 'pro', '--json'])
      assert.equal(created.code, 0, created.stderr)
      const { id } = JSON.parse(created.stdout) as { id: string }
      assert.equal((await cli.run(['keys', 'revoke', id])).code, 0)
      const listed = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as Array<{ id: string, revokedAt: string | null, perMinute: number }>
      assert.equal(listed[0]?.id, id)
      assert.equal(listed[0]?.perMinute, 300)
      assert.notEqual(listed[0]?.revokedAt, null)
    })
  })
}
