import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { MIGRATIONS } from '../../src/store/postgres/migrations.js'
import { startPgBouncer } from '../helpers/pgbouncer.js'
import pg from 'pg'
import { adminQuery, requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { cliFor, freePort, startServe, within } from './run.js'

const DEMO = fileURLToPath(new URL('../../data/demo.json', import.meta.url))

/** The rows of one query on the database at `url`. */
async function adminRows (sql: string, url: string): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql)).rows
  } finally {
    await client.end()
  }
}

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

  describe('a PostgreSQL store restored from a tampered dump', () => {
    test('when the database holds a trigger no migration made, then migrate and serve refuse it at start with exit 2 naming it, and a read key stays a read key', async (t) => {
      const url = await tempPostgresDatabase(t)
      const cli = cliFor(t, { DATABASE_URL: url })
      assert.equal((await cli.run(['migrate'])).code, 0)
      const created = await cli.run(['keys', 'create', '--plan', 'free', '--scope', 'read', '--json'])
      assert.equal(created.code, 0, created.stderr)
      const { id } = JSON.parse(created.stdout) as { id: string }
      await adminQuery("CREATE FUNCTION escalate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE api_keys SET scope = 'write'; RETURN NULL; END $$; " +
        'CREATE TRIGGER escalate AFTER UPDATE ON inventory FOR EACH STATEMENT EXECUTE FUNCTION escalate()', url)
      const named = /^petstore: the store's schema is not the one its migrations define \(version \d+\): trigger "inventory\.escalate" on table "inventory" is not defined by any migration/
      const migrate = await cli.run(['migrate'])
      assert.equal(migrate.code, 2, migrate.stderr)
      assert.match(migrate.stderr, named)
      const server = cli.start(['serve'], { PORT: '0', HOST: '127.0.0.1' })
      const exit = await within(30_000, server.exited, 'serve to refuse the store')
      assert.equal(exit.code, 2, server.output().stderr)
      assert.match(server.output().stderr, named)
      const imported = await cli.run(['import', DEMO])
      assert.equal(imported.code, 2, imported.stderr)
      const listed = await cli.run(['keys', 'list', '--json'])
      assert.equal(listed.code, 2)
      const scope = await adminRows(`SELECT scope FROM api_keys WHERE id = '${id}'`, url)
      assert.deepEqual(scope, [{ scope: 'read' }])
    })
  })

  describe('the CLI on PostgreSQL through PgBouncer (transaction pooling)', () => {
    test('when DATABASE_URL leads to PgBouncer without DATABASE_POOLER, then migrate and serve exit 2 saying to set DATABASE_POOLER=transaction; with it, both work', async (t) => {
      const bouncer = await startPgBouncer(t)
      if (bouncer === null) return
      const cli = cliFor(t, { DATABASE_URL: bouncer.url(await tempPostgresDatabase(t)) })
      for (const command of ['migrate', 'serve']) {
        const refused = await cli.run([command])
        assert.equal(refused.code, 2, `${command}: ${refused.stderr}`)
        assert.match(refused.stderr, /invalid configuration: DATABASE_URL leads to a connection pooler \(PgBouncer\) that refused the startup parameter "statement_timeout": set DATABASE_POOLER=transaction/)
        assert.doesNotMatch(refused.stderr, /\n\s+at /)
      }
      const pooled = { DATABASE_POOLER: 'transaction' }
      const migrated = await cli.run(['migrate'], pooled)
      assert.equal(migrated.code, 0, migrated.stderr)
      assert.match(migrated.stderr, new RegExp(`Applied ${MIGRATIONS.length} migration`))
      const created = await cli.run(['keys', 'create', '--plan', 'free', '--json'], pooled)
      assert.equal(created.code, 0, created.stderr)
      const { key } = JSON.parse(created.stdout) as { key: string }
      const { base } = await startServe(cli, ['--seed-demo'], pooled)
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
      const patched = await fetch(`${base}/v1/inventory/1`, { method: 'PATCH', headers, body: JSON.stringify({ quantity: 17 }) })
      assert.equal(patched.status, 200, await patched.clone().text())
      const entry = await (await fetch(`${base}/v1/inventory/1`, { headers })).json() as { quantity: number }
      assert.equal(entry.quantity, 17)
    })
  })
}
