/**
 * `petstore backup` and `petstore restore` as an operator runs them: against the store of a real server (the built
 * CLI's `serve` in a child process) under write load, then restored into a stopped one; and the files a restore must
 * refuse.
 */
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import Database from 'better-sqlite3'
import { checksum } from '../../src/store/migrations.js'
import { applyMigration, MIGRATIONS } from '../../src/store/sqlite/migrations.js'
import { buildSqlite, SQLITE_SCHEMAS } from '../fixtures/landed-schemas.js'
import { ROOT } from '../docs/pages.js'
import { receiver } from '../helpers/webhooks.js'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli } from './run.js'

const LATEST = Math.max(...MIGRATIONS.map((m) => m.version))

interface Report {
  path: string
  bytes: number
  integrity: string
  schemaVersion: number
  releaseSchemaVersion: number
  counts: Record<string, number>
  kept?: string | null
}

/** Imports `count` pets with stock 0 and creates a key with room for any load; returns the key. */
async function arrange (cli: Cli, count: number): Promise<string> {
  const pets = Array.from({ length: count }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available', quantity: 0 }))
  assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets }))])).code, 0)
  const created = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '1000000000', '--per-day', '1000000000', '--json'])
  assert.equal(created.code, 0, created.stderr)
  return (JSON.parse(created.stdout) as { key: string }).key
}

async function setQuantity (base: string, key: string, petId: number, quantity: number): Promise<number> {
  const res = await fetch(`${base}/v1/inventory/${petId}`, {
    method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ quantity })
  })
  await res.arrayBuffer()
  return res.status
}

async function quantityServed (base: string, key: string, petId: number): Promise<number> {
  const res = await fetch(`${base}/v1/inventory/${petId}`, { headers: { authorization: `Bearer ${key}` } })
  assert.equal(res.status, 200)
  return ((await res.json()) as { quantity: number }).quantity
}

/** A copy of the backup `valid` changed by `sql`, as anyone holding the file could change it. */
function tampered (cli: Cli, valid: string, sql: string): string {
  const path = join(cli.dir, 'tampered.db')
  writeFileSync(path, readFileSync(valid))
  const db = new Database(path)
  try {
    db.exec(sql)
  } finally {
    db.close()
  }
  return path
}

/** Reads a database file directly, read-only. */
function readDb<T> (path: string, work: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    return work(db)
  } finally {
    db.close()
  }
}

const quantityIn = (path: string, petId: number): number =>
  readDb(path, (db) => Number(db.prepare('SELECT quantity FROM inventory WHERE pet_id = ?').pluck().get(petId)))

const sha256 = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex')

/** The files of the test's directory a backup or restore may have left: kept stores and partial copies. */
const leftovers = (cli: Cli): string[] => readdirSync(cli.dir).filter((name) => name.includes('.before-restore-') || name.endsWith('.partial'))

async function stop (server: Awaited<ReturnType<typeof startServe>>['server']): Promise<void> {
  server.child.kill('SIGTERM')
  await within(EXIT_TIMEOUT_MS, server.exited, 'the server to stop')
}

describe('petstore backup', () => {
  test('when a backup is taken while PATCHes keep arriving, then it holds every change acknowledged before it began and passes the integrity check', async (t) => {
    const cli = cliFor(t)
    // Many pets make a file of some size to copy; WRITTEN of them take the load, each from one writer at a time, so
    // its acknowledged quantities only grow.
    const key = await arrange(cli, 3000)
    const WRITTEN = 48
    const WRITERS = 8
    const { base, server } = await startServe(cli)
    const acknowledged = new Map<number, number>()
    let acknowledgedCount = 0
    let stopping = false
    const load = Promise.all(Array.from({ length: WRITERS }, async (_, writer) => {
      for (let round = 1; !stopping; round++) {
        for (let petId = writer + 1; petId <= WRITTEN && !stopping; petId += WRITERS) {
          assert.equal(await setQuantity(base, key, petId, round), 200)
          acknowledged.set(petId, round)
          acknowledgedCount++
        }
      }
    }))
    while (acknowledged.size < WRITTEN) await new Promise((resolve) => setTimeout(resolve, 20))

    const before = new Map(acknowledged)
    const countBefore = acknowledgedCount
    const file = join(cli.dir, 'under-load.db')
    const backup = await cli.run(['backup', file, '--json'])
    const duringBackup = acknowledgedCount - countBefore
    stopping = true
    await load
    await stop(server)

    assert.equal(backup.code, 0, backup.stderr)
    const report = JSON.parse(backup.stdout) as Report
    assert.equal(report.integrity, 'ok')
    assert.equal(report.schemaVersion, LATEST)
    assert.equal(report.counts.pets, 3000)
    assert.ok(duringBackup > 0, 'the load went on while the backup ran')
    assert.deepEqual(readDb(file, (db) => db.prepare('PRAGMA integrity_check').pluck().all()), ['ok'])
    for (const [petId, quantity] of before) {
      const copied = quantityIn(file, petId)
      assert.ok(copied >= quantity, `pet ${petId}: ${quantity} was acknowledged before the backup began, the copy holds ${copied}`)
      assert.ok(copied <= (acknowledged.get(petId) ?? 0) + 1, `pet ${petId}: the copy holds ${copied}, more than was ever sent`)
      const ledger = readDb(file, (db) => Number(db.prepare("SELECT count(*) FROM stock_ledger WHERE pet_id = ? AND reason <> 'import'").pluck().get(petId)))
      assert.equal(ledger, copied, `pet ${petId}: one ledger row per change in the copy`)
    }
    assert.equal(report.counts.stock_ledger, readDb(file, (db) => Number(db.prepare('SELECT count(*) FROM stock_ledger').pluck().get())))
    assert.deepEqual(leftovers(cli), [], 'no partial copy is left')
  })

  test('when FILE exists, then backup refuses it and leaves it as it was; --force replaces it', async (t) => {
    const cli = cliFor(t)
    await arrange(cli, 3)
    const file = cli.file('existing.db', 'an earlier backup')
    const refused = await cli.run(['backup', file])
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /existing\.db exists: name a new file, or replace it with --force/)
    assert.equal(readFileSync(file, 'utf8'), 'an earlier backup')

    const forced = await cli.run(['backup', file, '--force'])
    assert.equal(forced.code, 0, forced.stderr)
    assert.match(forced.stdout, new RegExp(`^Backed up .* to .*existing\\.db in [0-9.]+ s: \\d+ KB, schema version ${LATEST}, integrity check ok\\.\\n`))
    assert.match(forced.stdout, /\n {2}pets +3\n/)
    assert.equal(quantityIn(file, 1), 0)
    assert.deepEqual(leftovers(cli), [])
  })

  test('when FILE names the store\'s write-ahead log or another file SQLite keeps beside it, then backup refuses it, --force or not, and the store stays readable', async (t) => {
    const cli = cliFor(t)
    const key = await arrange(cli, 2)
    const { base, server } = await startServe(cli)
    assert.equal(await setQuantity(base, key, 1, 5), 200)
    assert.ok(existsSync(`${cli.db}-wal`), 'the serving store has its write-ahead log')
    for (const suffix of ['-wal', '-shm', '-journal']) {
      for (const args of [[], ['--force']]) {
        // Relative to the working directory (the store's), as an operator would type it.
        const res = await cli.run(['backup', `petstore.db${suffix}`, ...args])
        assert.equal(res.code, 1, `backup petstore.db${suffix} ${args.join(' ')}: ${res.stdout}`)
        assert.match(res.stderr, new RegExp(`petstore\\.db${suffix} is a file SQLite keeps beside the store .*: name a file of its own`))
      }
    }
    const listed = await cli.run(['keys', 'list', '--json'])
    assert.equal(listed.code, 0, listed.stderr)
    assert.equal(await quantityServed(base, key, 1), 5)
    await stop(server)
    assert.equal(existsSync(`${cli.db}-journal`), false)
    assert.equal(quantityIn(cli.db, 1), 5, 'the write is in the store once the server has stopped')
    assert.deepEqual(leftovers(cli), [])
  })

  test('when FILE is a directory, or in a directory that does not exist, then backup and restore say so and write nothing', async (t) => {
    const cli = cliFor(t)
    await arrange(cli, 1)
    mkdirSync(join(cli.dir, 'backups'))
    for (const args of [['backup', 'backups'], ['backup', 'backups', '--force'], ['restore', 'backups']]) {
      const res = await cli.run(args)
      assert.equal(res.code, 1, args.join(' '))
      assert.match(res.stderr, /^petstore: backups is a directory/, args.join(' '))
    }
    const missing = await cli.run(['backup', 'nightly/petstore.db'])
    assert.equal(missing.code, 1)
    assert.equal(missing.stderr, 'petstore: the directory nightly does not exist: create it first\n')
    assert.equal(existsSync(join(cli.dir, 'nightly')), false)
    assert.deepEqual(readdirSync(join(cli.dir, 'backups')), [])
    assert.deepEqual(leftovers(cli), [])
  })

  test('when the store is not a database, then backup fails naming it and writes no file', async (t) => {
    const cli = cliFor(t)
    writeFileSync(cli.db, 'x'.repeat(4096))
    const res = await cli.run(['backup', 'copy.db'])
    assert.equal(res.code, 1)
    assert.match(res.stderr, /petstore\.db is not a SQLite database/)
    assert.equal(existsSync(join(cli.dir, 'copy.db')), false)
    assert.deepEqual(leftovers(cli), [])
  })

  test('when there is no store yet, then backup says so and creates none', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['backup', 'copy.db'])
    assert.equal(res.code, 1)
    assert.match(res.stderr, /there is no store at .*petstore\.db to back up/)
    assert.equal(existsSync(cli.db), false)
  })

  test('when DATABASE_URL names PostgreSQL, then backup and restore point to its own tools and exit 2 without connecting', async (t) => {
    const cli = cliFor(t, { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' })
    const backup = await cli.run(['backup', 'copy.db'])
    assert.equal(backup.code, 2)
    assert.match(backup.stderr, /DATABASE_URL names PostgreSQL: back it up with pg_dump, or with base backups and WAL archiving for point-in-time recovery/)
    const restore = await cli.run(['restore', 'copy.db'])
    assert.equal(restore.code, 2)
    assert.match(restore.stderr, /restore it with pg_restore/)
  })
})

describe('petstore restore', () => {
  test('when a server holds the store, then restore refuses and changes nothing; once it is stopped, restore replaces the store, keeps the old one, and a new server serves the backed-up stock', async (t) => {
    const cli = cliFor(t)
    const key = await arrange(cli, 3)
    const first = await startServe(cli)
    assert.equal(await setQuantity(first.base, key, 1, 7), 200)
    const file = join(cli.dir, 'at-seven.db')
    assert.equal((await cli.run(['backup', file])).code, 0)
    assert.equal(await setQuantity(first.base, key, 1, 9), 200)

    const refused = await cli.run(['restore', file])
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /cannot restore: .*petstore\.db is open in another process \(a running server, or another command\)\. Stop the service/)
    assert.equal(await quantityServed(first.base, key, 1), 9, 'the server goes on serving its store')
    assert.deepEqual(leftovers(cli), [])
    await stop(first.server)

    const restored = await cli.run(['restore', file, '--json'])
    assert.equal(restored.code, 0, restored.stderr)
    const report = JSON.parse(restored.stdout) as Report
    assert.equal(report.integrity, 'ok')
    assert.equal(report.counts.pets, 3)
    assert.match(String(report.kept), /petstore\.db\.before-restore-\d{8}T\d{6}Z$/)
    assert.equal(quantityIn(String(report.kept), 1), 9, 'the replaced store is kept whole, its last write included')
    assert.equal(existsSync(`${cli.db}-wal`), false, 'no write-ahead log of the old store is left for the new one')

    const second = await startServe(cli)
    assert.equal(await quantityServed(second.base, key, 1), 7)
    await stop(second.server)
  })

  test('when the server was killed, then restore is not held up by what it left, and the kept store holds its acknowledged writes', async (t) => {
    const cli = cliFor(t)
    const key = await arrange(cli, 2)
    const file = join(cli.dir, 'backup.db')
    assert.equal((await cli.run(['backup', file])).code, 0)
    const { base, server } = await startServe(cli)
    assert.equal(await setQuantity(base, key, 2, 42), 200)
    server.child.kill('SIGKILL')
    await within(EXIT_TIMEOUT_MS, server.exited, 'the server to die')
    assert.ok(existsSync(`${cli.db}-wal`), 'the killed server left its write-ahead log')

    const restored = await cli.run(['restore', file])
    assert.equal(restored.code, 0, restored.stderr)
    const kept = /kept at (.+)\.\n/.exec(restored.stdout)?.[1]
    assert.ok(kept !== undefined, restored.stdout)
    assert.equal(quantityIn(kept, 2), 42, 'the write acknowledged before the crash is in the kept store')
    assert.equal(quantityIn(cli.db, 2), 0)
  })

  test('when the backup is at an older schema version, then it is restored and migrate brings it up to date', async (t) => {
    const cli = cliFor(t)
    const file = join(cli.dir, 'old.db')
    const db = new Database(file)
    db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL, checksum TEXT)')
    for (const migration of MIGRATIONS.filter((m) => m.version < LATEST)) {
      applyMigration(db, migration)
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?, ?)').run(migration.version, migration.name, new Date().toISOString(), checksum(migration))
    }
    db.close()

    const restored = await cli.run(['restore', file])
    assert.equal(restored.code, 0, restored.stderr)
    assert.match(restored.stdout, new RegExp(`schema version ${LATEST - 1}, integrity check ok\\. It is at schema version ${LATEST - 1}: the next npx petstore serve \\(or npx petstore migrate\\) brings it to ${LATEST}\\.`))
    assert.match(restored.stdout, /There was no store to replace\./)
    const migrated = await cli.run(['migrate'])
    assert.equal(migrated.code, 0, migrated.stderr)
    assert.match(migrated.stderr, new RegExp(`version ${LATEST - 1} to ${LATEST}`))
  })

  describe('a file that cannot be restored is refused with the reason, and the store stays as it was', () => {
    const cases: Array<[string, (cli: Cli, valid: string) => string, RegExp]> = [
      ['a file that is not SQLite', (cli) => cli.file('notes.txt', 'these are notes, not a database\n'.repeat(100)), /notes\.txt is not a SQLite database/],
      ['a damaged database', (cli, valid) => {
        const bytes = readFileSync(valid)
        // Every page after the first two overwritten: the schema is still readable, its tables are not.
        const pageSize = bytes.readUInt16BE(16)
        for (let at = 2 * pageSize; at < bytes.length; at++) bytes[at] = (at * 7) & 0xff
        return cli.file('damaged.db', bytes)
      }, /damaged\.db (fails SQLite's integrity check|is damaged)/],
      ['a store of a newer release', (cli, valid) => {
        const newer = join(cli.dir, 'newer.db')
        writeFileSync(newer, readFileSync(valid))
        const db = new Database(newer)
        db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?, ?)').run(LATEST + 1, 'from the future', new Date().toISOString(), 'f'.repeat(64))
        db.close()
        return newer
      }, new RegExp(`newer\\.db is at schema version ${LATEST + 1}, newer than this release's \\(${LATEST}\\): restore it with the release that wrote it`)],
      ['a backup with a trigger added (one that makes every key a write key at the next write)',
        (cli, valid) => tampered(cli, valid, "create trigger escalate after update on inventory begin update api_keys set scope='write'; end"),
        /tampered\.db: the store's schema is not the one its migrations define \(version \d+\): trigger "escalate" on table "inventory" is not defined by any migration/],
      ['a backup with a view added', (cli, valid) => tampered(cli, valid, 'CREATE VIEW key_hashes AS SELECT key_hash FROM api_keys'),
        /tampered\.db: .*view "key_hashes" is not defined by any migration/],
      ['a backup with an index added', (cli, valid) => tampered(cli, valid, 'CREATE INDEX api_keys_scope ON api_keys (scope)'),
        /tampered\.db: .*index "api_keys_scope" on table "api_keys" is not defined by any migration/],
      ['a backup with a trigger of the migrations given another body', (cli, valid) => tampered(cli, valid,
        "DROP TRIGGER inventory_updated; CREATE TRIGGER inventory_updated AFTER UPDATE ON inventory BEGIN UPDATE api_keys SET scope = 'write'; END"),
        /tampered\.db: .*trigger "inventory_updated" differs: its definition differs from the migrations'/],
      ['a backup with an index of the migrations dropped', (cli, valid) => tampered(cli, valid, 'DROP INDEX orders_status_id'),
        /tampered\.db: .*index "orders_status_id" on table "orders" is missing/],
      ['a SQLite database of something else', (cli) => {
        const other = join(cli.dir, 'other.db')
        const db = new Database(other)
        db.exec('CREATE TABLE notes (text TEXT)')
        db.close()
        return other
      }, /other\.db is a SQLite database, but not a store of this service/]
    ]
    for (const [what, make, message] of cases) {
      test(`when it is ${what}`, async (t) => {
        const cli = cliFor(t)
        await arrange(cli, 2)
        const valid = join(cli.dir, 'valid.db')
        assert.equal((await cli.run(['backup', valid])).code, 0)
        const file = make(cli, valid)
        const store = sha256(cli.db)
        const res = await cli.run(['restore', file])
        assert.equal(res.code, 1)
        assert.match(res.stderr, message)
        assert.equal(sha256(cli.db), store, 'the store is unchanged')
        assert.deepEqual(leftovers(cli), [], 'nothing kept, no partial copy')
      })
    }
  })
})

describe('a store whose schema was tampered with', () => {
  test('when the store file holds a trigger no migration made, then serve, migrate and the CLI refuse it at start with exit 2 naming it, and write nothing', async (t) => {
    const cli = cliFor(t)
    await arrange(cli, 2)
    const created = await cli.run(['keys', 'create', '--plan', 'free', '--scope', 'read', '--json'])
    assert.equal(created.code, 0, created.stderr)
    const readKey = (JSON.parse(created.stdout) as { id: string }).id
    const db = new Database(cli.db)
    db.exec("create trigger escalate after update on inventory begin update api_keys set scope='write'; end")
    db.close()
    const before = sha256(cli.db)

    const server = cli.start(['serve'], { PORT: '0', HOST: '127.0.0.1' })
    const exit = await within(30_000, server.exited, 'serve to refuse the store')
    assert.equal(exit.code, 2, server.output().stderr)
    assert.match(server.output().stderr, /^petstore: the store's schema is not the one its migrations define \(version \d+\): trigger "escalate" on table "inventory" is not defined by any migration/)
    for (const args of [['migrate'], ['keys', 'create', '--plan', 'free'], ['keys', 'list'], ['import', cli.file('more.json', '{"pets":[{"id":9,"name":"x","status":"sold","quantity":1}]}')]]) {
      const refused = await cli.run(args)
      assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stdout}`)
      assert.match(refused.stderr, /trigger "escalate" on table "inventory" is not defined by any migration/, args.join(' '))
    }
    assert.equal(sha256(cli.db), before, 'the store file is as it was')
    assert.equal(readDb(cli.db, (file) => file.prepare('SELECT scope FROM api_keys WHERE id = ?').pluck().get(readKey)), 'read')
  })

  test('when the serving store holds an index no migration made, then backup refuses to copy it, naming it, and writes no file', async (t) => {
    const cli = cliFor(t)
    await arrange(cli, 2)
    const db = new Database(cli.db)
    db.exec('CREATE INDEX api_keys_scope ON api_keys (scope)')
    db.close()
    const res = await cli.run(['backup', 'copy.db'])
    assert.equal(res.code, 1)
    assert.match(res.stderr, /petstore\.db: the store's schema is not the one its migrations define .*index "api_keys_scope" on table "api_keys" is not defined by any migration/)
    assert.equal(existsSync(join(cli.dir, 'copy.db')), false)
    assert.deepEqual(leftovers(cli), [])
  })

  test('when a backup of a release from before checksums (the indexed ledger) is restored, then it is accepted and serve migrates and serves it', async (t) => {
    const cli = cliFor(t)
    const file = join(cli.dir, 'landed.db')
    const landed = SQLITE_SCHEMAS.find((schema) => schema.ledger === 'indexed')
    assert.ok(landed !== undefined)
    buildSqlite(file, landed)
    const restored = await cli.run(['restore', file])
    assert.equal(restored.code, 0, restored.stderr)
    assert.match(restored.stdout, /schema version 4, integrity check ok\. It is at schema version 4: the next (npx )?petstore serve/)
    const { server } = await startServe(cli)
    await stop(server)
    assert.equal(readDb(cli.db, (db) => Number(db.prepare('SELECT max(version) FROM schema_migrations').pluck().get())), LATEST)
  })
})

/**
 * The environment the serve command of a drill section of docs/backup.md sets: its `NAME=value` words before
 * `npx petstore serve`.
 */
function drillServeEnv (heading: string): Record<string, string> {
  const page = readFileSync(join(ROOT, 'docs/backup.md'), 'utf8')
  const start = page.indexOf(`### ${heading}\n`)
  assert.ok(start >= 0, `docs/backup.md has a section "${heading}"`)
  const end = page.slice(start + 4).search(/\n#{2,3} /)
  const section = page.slice(start, end < 0 ? undefined : start + 4 + end)
  const command = /`([^`]*npx petstore serve)`/.exec(section)?.[1]
  assert.ok(command !== undefined, `the section "${heading}" starts a server with npx petstore serve`)
  return Object.fromEntries(command.split(/\s+/).flatMap((word) => {
    const assignment = /^([A-Z_]+)=(.*)$/.exec(word)
    return assignment === null ? [] : [[assignment[1] as string, assignment[2] as string]]
  }))
}

describe('the restore drill of docs/backup.md', () => {
  test('when the drill\'s server runs on a restored backup that holds an undelivered event, then it sends nothing to the live receiver', async (t) => {
    const env = drillServeEnv('A restore drill (SQLite)')
    assert.equal(env.WEBHOOK_DELIVERY, 'false', 'the SQLite drill starts its server with deliveries off')
    assert.equal(drillServeEnv('A restore drill (PostgreSQL)').WEBHOOK_DELIVERY, 'false', 'so does the PostgreSQL drill')
    const hook = await receiver(t)
    const cli = cliFor(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '50' })
    const key = await arrange(cli, 2)

    // The live service: a subscription, and a change not delivered yet when the backup is taken.
    const live = await startServe(cli, [], { WEBHOOK_DELIVERY: 'false' })
    const created = await fetch(`${live.base}/v1/webhooks`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ url: hook.url, events: ['inventory.changed'] })
    })
    assert.equal(created.status, 201, await created.text())
    assert.equal(await setQuantity(live.base, key, 1, 5), 200)
    await stop(live.server)
    const backup = join(cli.dir, 'drill.db')
    assert.equal((await cli.run(['backup', backup])).code, 0)

    // What a server that delivers does with that backup: it sends the event, within `took` of being ready.
    const control = join(cli.dir, 'control-store.db')
    assert.equal((await cli.run(['restore', backup], { DATABASE_URL: control })).code, 0)
    const sending = await startServe(cli, [], { DATABASE_URL: control })
    const ready = performance.now()
    await hook.until(() => hook.requests > 0, 30_000)
    const took = performance.now() - ready
    await stop(sending.server)
    const sent = hook.requests

    // The drill, with the page's settings (on a port of its own, and its own scratch store).
    const drillEnv = Object.fromEntries(Object.entries(env).filter(([name]) => name !== 'PORT'))
    const scratch = join(cli.dir, 'drill-store.db')
    assert.equal((await cli.run(['restore', backup], { DATABASE_URL: scratch })).code, 0)
    const drill = await startServe(cli, [], { ...drillEnv, DATABASE_URL: scratch })
    assert.equal(await quantityServed(drill.base, key, 1), 5, 'the drill server serves the restored stock')
    // Nothing to wait for when nothing is to happen: ten times what the sending server took, and at least 2 s.
    await new Promise((resolve) => setTimeout(resolve, Math.max(2000, 10 * took)))
    assert.equal(hook.requests, sent, 'the drill server sent nothing to the live receiver')
    await stop(drill.server)
  })
})
