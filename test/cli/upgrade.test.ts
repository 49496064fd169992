/**
 * Upgrading as an operator does, through the real commands: only `petstore migrate` changes the schema of a store
 * that has one (and `serve` on the embedded SQLite file, after a backup copy); everything else refuses a store
 * that is behind, writes are refused on a store ahead of this release, and a store whose history was edited is
 * refused by every command, naming the migration.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { describe, test } from 'node:test'
import { PLAN } from '../../src/store/sqlite/migrations.js'
import { BIG, SQLITE_SCHEMAS, buildPostgres, buildSqlite, POSTGRES_SCHEMAS } from '../fixtures/landed-schemas.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within } from './run.js'

const LATEST = PLAN.migrations.length
const PREVIOUS_RELEASE = SQLITE_SCHEMAS.at(-1) as typeof SQLITE_SCHEMAS[number]
const ORIGINAL_LEDGER = SQLITE_SCHEMAS[3] as typeof SQLITE_SCHEMAS[number]

function schemaVersion (path: string): number {
  const db = new Database(path, { readonly: true })
  try {
    return Number((db.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number }).v)
  } finally {
    db.close()
  }
}

describe('upgrading a SQLite store', () => {
  test('when a store of the previous release is used by keys, import or history, then they exit 2 saying to run migrate, and change nothing', async (t) => {
    const cli = cliFor(t)
    buildSqlite(cli.db, PREVIOUS_RELEASE)
    const pets = cli.file('pets.json', '{"pets":[{"id":9,"name":"New","status":"available","quantity":1}]}')
    for (const args of [['keys', 'create', '--plan', 'free'], ['keys', 'list'], ['keys', 'revoke', 'key_banned'], ['keys', 'unban', 'key_banned'],
      ['import', pets], ['inventory', 'history', '1']]) {
      const res = await cli.run(args)
      assert.equal(res.code, 2, args.join(' '))
      assert.equal(res.stderr, `petstore: the store schema is at version 4 and this release needs version ${LATEST}: run \`npx petstore migrate\` first\n`)
    }
    assert.equal(schemaVersion(cli.db), 4)
  })

  test('when petstore migrate upgrades it, then it keeps a copy of the file as it was and the commands work again', async (t) => {
    const cli = cliFor(t)
    buildSqlite(cli.db, PREVIOUS_RELEASE)
    const res = await cli.run(['migrate'])
    assert.equal(res.code, 0, res.stderr)
    assert.equal(res.stderr, `Applied ${LATEST - 4} migration(s): version 4 to ${LATEST}. The file as it was is at ${cli.db}.backup-v4.\n`)
    assert.ok(existsSync(`${cli.db}.backup-v4`))
    assert.equal(schemaVersion(`${cli.db}.backup-v4`), 4, 'the copy is the store before the migration')
    assert.equal(schemaVersion(cli.db), LATEST)
    const history = await cli.run(['inventory', 'history', '1', '--json'])
    assert.equal(history.code, 0, history.stderr)
    assert.deepEqual((JSON.parse(history.stdout) as Array<{ quantity: number }>).map((e) => e.quantity), [1, 2, 3])
    assert.equal((await cli.run(['keys', 'create', '--plan', 'free'])).code, 0)
  })

  test('when serve starts on a store migrated by the original migration 4, then it migrates the file (with a copy), and writes and history work', async (t) => {
    const cli = cliFor(t)
    buildSqlite(cli.db, ORIGINAL_LEDGER)
    const { base, server } = await startServe(cli, [], { LOG_LEVEL: 'info' })
    assert.equal((await cli.run(['keys', 'create', '--plan', 'free'])).code, 0)
    const key = (await cli.run(['keys', 'create', '--plan', 'free'])).stdout.trim()
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    for (const quantity of [5, 6, 7]) {
      const res = await fetch(`${base}/v1/inventory/${BIG}`, { method: 'PATCH', headers, body: JSON.stringify({ quantity }) })
      assert.equal(res.status, 200, await res.text())
    }
    assert.equal((await fetch(`${base}/healthz`)).status, 200, 'the server is alive after writes')
    server.child.kill('SIGTERM')
    assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit'), { code: 0, signal: null })
    assert.match(server.output().stdout, new RegExp(`store migrated from version 4 to ${LATEST}; the file before it is at .*backup-v4`))
    const history = await cli.run(['inventory', 'history', String(BIG), '--json'])
    assert.deepEqual((JSON.parse(history.stdout) as Array<{ previousQuantity: number | null, quantity: number }>).map((e) => [e.previousQuantity, e.quantity]),
      [[null, 5], [5, 7], [7, 5], [5, 6], [6, 7]])
  })

  test('when the store is ahead of this release, then writes are refused, reads work, and serve answers reads only', async (t) => {
    const cli = cliFor(t)
    assert.equal((await cli.run(['migrate'])).code, 0)
    const key = (await cli.run(['keys', 'create', '--plan', 'free'])).stdout.trim()
    assert.equal((await cli.run(['import', cli.file('p.json', '{"pets":[{"id":1,"name":"A","status":"available","quantity":1}]}')])).code, 0)
    const db = new Database(cli.db)
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES (?, ?, ?, ?)').run(LATEST + 1, 'a newer release', 'now', 'f'.repeat(64))
    db.close()

    for (const args of [['keys', 'create', '--plan', 'free'], ['migrate']]) {
      const res = await cli.run(args)
      assert.equal(res.code, 2, args.join(' '))
      assert.match(res.stderr, new RegExp(`schema is at version ${LATEST + 1}, newer than this release \\(version ${LATEST}\\).*Refusing to write`))
    }
    assert.equal((await cli.run(['keys', 'list', '--json'])).code, 0)
    assert.equal((await cli.run(['inventory', 'history', '1'])).code, 0)

    const { base, server } = await startServe(cli, [], { LOG_LEVEL: 'info' })
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    assert.equal((await fetch(`${base}/v1/inventory`, { headers })).status, 200)
    const write = await fetch(`${base}/v1/inventory/1`, { method: 'PATCH', headers, body: '{"quantity":2}' })
    assert.equal(write.status, 503)
    assert.equal(write.headers.get('retry-after'), '60', 'every 503 says when to ask again, as the API document declares')
    assert.equal((await write.json() as { message: string }).message, 'This instance serves reads only: the store was migrated by a newer release. Writes are refused.')
    // Every other write too, whatever the operation (a list of writes once missed the adjustments).
    for (const [url, body] of [['/v1/inventory/1/adjustments', '{"delta":5}'], ['/v1/inventory/batch', '{"changes":[{"petId":1,"delta":5}]}']] as const) {
      const res = await fetch(`${base}${url}`, { method: 'POST', headers: { ...headers, 'idempotency-key': `ro-${url}` }, body })
      assert.equal(res.status, 503, url)
    }
    server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, server.exited, 'exit')
    assert.match(server.output().stdout, /newer than this release.*Serving reads only/)
    const after = new Database(cli.db, { readonly: true })
    t.after(() => after.close())
    assert.equal(after.prepare('SELECT quantity FROM inventory WHERE pet_id = 1').pluck().get(), 1)
    assert.equal(after.prepare('SELECT count(*) FROM idempotency_keys').pluck().get(), 0)
    assert.equal(after.prepare('SELECT count(*) FROM stock_ledger').pluck().get(), 1, 'the import only')
    // The key was used, but a read-only instance records no last use, and says nothing about it.
    assert.equal(after.prepare('SELECT count(*) FROM api_keys WHERE last_used_at IS NOT NULL').pluck().get(), 0)
    assert.doesNotMatch(server.output().stdout, /could not record the last use/)
  })

  test('when the store ran an edited migration, then serve and every command exit 2 naming it', async (t) => {
    const cli = cliFor(t)
    assert.equal((await cli.run(['migrate'])).code, 0)
    const db = new Database(cli.db)
    db.exec("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 4")
    db.close()
    for (const args of [['serve'], ['migrate'], ['keys', 'list']]) {
      const res = await cli.run(args)
      assert.equal(res.code, 2, args.join(' '))
      assert.match(res.stderr, /^petstore: migration 4 \("stock ledger and entry revisions"\) applied to this store \(checksum edited\) is not the one this release has/)
    }
  })
})

if (await requirePostgres('upgrading a PostgreSQL store')) {
  describe('upgrading a PostgreSQL store', () => {
    test('when serve starts on a PostgreSQL store of the previous release, then it exits 2 saying to migrate; after petstore migrate it serves', async (t) => {
      const url = await tempPostgresDatabase(t)
      await buildPostgres(url, 'public', POSTGRES_SCHEMAS.at(-1) as typeof POSTGRES_SCHEMAS[number])
      const cli = cliFor(t, { DATABASE_URL: url })
      const refused = await cli.run(['serve'])
      assert.equal(refused.code, 2)
      assert.match(refused.stderr, /schema is at version 4 and this release needs version \d+: run `npx petstore migrate` first/)
      assert.equal((await cli.run(['keys', 'create', '--plan', 'free'])).code, 2)

      const migrated = await cli.run(['migrate'])
      assert.equal(migrated.code, 0, migrated.stderr)
      assert.equal(migrated.stderr, `Applied ${LATEST - 4} migration(s): version 4 to ${LATEST}.\n`)
      const created = await cli.run(['keys', 'create', '--plan', 'free'])
      assert.equal(created.code, 0, created.stderr)
      const key = created.stdout.trim()
      const { base, server } = await startServe(cli)
      const res = await fetch(`${base}/v1/inventory/1`, { method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"quantity":4}' })
      assert.equal(res.status, 200, await res.text())
      server.child.kill('SIGTERM')
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit'), { code: 0, signal: null })
    })
  })
}
