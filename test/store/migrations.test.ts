/**
 * Released migrations are frozen: their checksums are pinned here, so editing one fails this test (add a new
 * migration instead). And a store whose recorded history this release does not know is refused, naming the
 * migration, while the landed variants that a later migration converts are accepted.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { checksum, requireUsable, SchemaError, schemaStatus, type MigrationPlan } from '../../src/store/migrations.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { PLAN as POSTGRES } from '../../src/store/postgres/migrations.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { PLAN as SQLITE } from '../../src/store/sqlite/migrations.js'
import { SQLITE_SCHEMAS, buildSqlite } from '../fixtures/landed-schemas.js'
import { tempDir } from '../helpers/app.js'
import { POSTGRES_URL, adminQuery, requirePostgres, tempSchema } from '../helpers/postgres.js'

/** Every released migration's checksum. A new migration adds a line; an existing line never changes. */
const RELEASED = {
  sqlite: [
    [1, 'd746cfc94f21ee91a73a405635dfbcc6f886b66e0db631c7af011d759a583bee'],
    [2, 'e2e675fca01e8debd80a68c4953f0858cb5b6b3c8b95e6c9ef3673666a08020e'],
    [3, '887227c4166a0ba55cdd38af25ee5aedfd0d6aad831332c860d26c7d95613f7d'],
    [4, 'c4b5356118c3956daec44965b4b7d45ad26cae113fc4c67bbf4fafcb54bb25fc'],
    [5, 'd59cd1823fb04d11ecc311ace70ae8c5187aa4fce9cdd662ea461c8608e4f903'],
    [6, '37b4821b7ce8a8499236a10d547758487997576159f93952d029f0885317d1f7'],
    [7, '8e2fe77cf87509460ca2689e67693d921b668045461bd6b8871f2cec3528507b'],
    [8, 'aeb489d8c00855c682a205ece92393b17ad316f1f40120210b765c0abaa1c4c3'],
    [9, '7b9a7f0acf7bdf2cdb668037e02df093ae53be6d739755bcda03cb193d02bdd4']
  ],
  postgres: [
    [1, '89039f6195be2315b7ad2f2a4cf5c40417ef1e5f60c31b558466dd5652031e39'],
    [2, '7ad72b4ff1f04828ffa71ede05c39948e25491a4c2fa12afaa4f10ea7471f551'],
    [3, '861d07073f932789ccb437a732218be0ccad10390a954d7afdde3ce0fcc31c61'],
    [4, '9cc88ed54e3d99bdb664f647245df6eb4a7558c425ab78f7462e56006b58dfd0'],
    [5, '08cb6777143f107119939e7302dd8fde65500a887edaa93963c8d05820bc2e2a'],
    [6, 'b4095590277195d718de909f4381bd37cc5c31afda0470faacc03ebc614023a9'],
    [7, '13bf895f56292418902936d026d58042978ce60c3f10a92d1bad9cfaacae43bb'],
    [8, '0ceb92056b485dda15758bd6ee8c98626cba88ad14c5979bf05c845a7a572a13'],
    [9, '6bfda276f27e47bd0bc5e6b0e05af26a4b593a132ae44fbe45c49c43cff27998']
  ]
} as const

const LATEST = SQLITE.migrations.length

describe('released migrations are frozen', () => {
  for (const [dialect, plan] of [['sqlite', SQLITE], ['postgres', POSTGRES]] as const) {
    test(`when the ${dialect} migrations are read, then each released one has exactly its pinned checksum`, () => {
      const pinned = RELEASED[dialect]
      assert.deepEqual(plan.migrations.slice(0, pinned.length).map((m) => [m.version, checksum(m)]), pinned,
        'a released migration was edited: restore it, and add a new migration for the change')
      assert.deepEqual(plan.migrations.map((m) => m.version), plan.migrations.map((_, i) => i + 1), 'versions are 1, 2, 3, ... without gaps')
    })
  }

  test('when the landed variants that migration 5 converts are checksummed, then their statements are the ones that landed', () => {
    for (const plan of [SQLITE, POSTGRES]) {
      for (const variant of plan.superseded) assert.equal(checksum(variant), variant.checksum, `${variant.version} "${variant.name}"`)
    }
    assert.deepEqual(SQLITE.superseded.map((v) => v.checksum), [
      '52591a9aae7c7b3f8efedf3f5d1608a59ef7616cc0968640170d4f23210c8307', 'c8c4b29157603f383bd368777e5d83ad955d45cd09c649f616aafa486987b0bb'
    ])
    assert.deepEqual(POSTGRES.superseded.map((v) => v.checksum), ['7aae1c3890bc533bc9b0e2d4243e27cf9013f473bf295f042a8cb0d515a5befe'])
  })

  test('the PostgreSQL and SQLite migrations have the same numbering and names', () => {
    assert.deepEqual(POSTGRES.migrations.map((m) => [m.version, m.name]), SQLITE.migrations.map((m) => [m.version, m.name]))
  })
})

describe('validating a store\'s migration history', () => {
  const plan: MigrationPlan = SQLITE
  const row = (version: number, sum: string | null, name = plan.migrations[version - 1]?.name ?? 'x') => ({ version, name, checksum: sum })
  const current = (version: number) => checksum(plan.migrations[version - 1] as never)
  const none = new Map<string, boolean>()

  test('when every applied migration is this release\'s, then nothing is pending', () => {
    const status = schemaStatus(plan.migrations.map((m) => row(m.version, checksum(m))), plan, none)
    assert.deepEqual([status.version, status.latest, status.pending.length, status.ahead.length], [LATEST, LATEST, 0, 0])
  })

  test('when an applied migration has another checksum, then the store is refused naming the migration', () => {
    const edited = [row(1, current(1)), row(2, current(2)), row(3, '0'.repeat(64))]
    assert.throws(() => schemaStatus(edited, plan, none), (error: unknown) => error instanceof SchemaError && error.problem === 'edited' &&
      /^migration 3 \("inventory version"\) applied to this store \(checksum 000000000000\) is not the one this release has \(887227c4166a/.test(error.message))
  })

  test('when rows predate checksums, then they are identified by name, and same-named variants by what the store holds', () => {
    const landedB = [row(1, null), row(2, null), row(3, null), row(4, null, 'stock ledger and entry revisions')]
    const query = SQLITE.superseded[1]?.detect as string
    assert.equal(schemaStatus(landedB, plan, new Map([[query, true]])).pending.length, LATEST - 4, 'the indexed ledger: accepted, converted by 5')
    assert.equal(schemaStatus(landedB, plan, new Map([[query, false]])).pending.length, LATEST - 4, 'the chained ledger: this release\'s own 4')
    const unknownName = [row(1, null), row(2, null, 'something else')]
    assert.throws(() => schemaStatus(unknownName, plan, none), /migration 2 \("something else"\).*checksum unknown/)
  })

  test('when the store has versions beyond this release\'s, then it is usable for reads only', () => {
    const ahead = schemaStatus([...plan.migrations.map((m) => row(m.version, checksum(m))), row(LATEST + 1, 'f'.repeat(64), 'future')], plan, none)
    assert.equal(ahead.ahead.length, 1)
    requireUsable(ahead, 'read')
    assert.throws(() => requireUsable(ahead, 'write'), (error: unknown) => error instanceof SchemaError && error.problem === 'ahead' &&
      error.message.includes(`newer than this release (version ${LATEST})`))
  })

  test('when a store with a schema is behind, then it must be migrated first; an empty one may be created', () => {
    const behind = schemaStatus([row(1, current(1)), row(2, current(2))], plan, none)
    assert.throws(() => requireUsable(behind, 'read'), new RegExp(`schema is at version 2 and this release needs version ${LATEST}: run \`petstore migrate\` first`))
    requireUsable(schemaStatus([], plan, none), 'write')
  })
})

describe('stores with a history this release does not know', () => {
  test('when a SQLite store ran an edited migration, then migrate and schemaStatus refuse it and change nothing', async (t) => {
    const path = join(tempDir(t), 'edited.db')
    buildSqlite(path, SQLITE_SCHEMAS[1] as never)
    const db = new Database(path)
    db.exec("ALTER TABLE schema_migrations ADD COLUMN checksum TEXT; UPDATE schema_migrations SET checksum = 'edited' WHERE version = 2")
    db.close()
    const store = new SqliteStore(path)
    t.after(() => store.close())
    await assert.rejects(store.schema.migrate(), (error: unknown) => error instanceof SchemaError && error.problem === 'edited' && /^migration 2 \("api key bans"\)/.test(error.message))
    await assert.rejects(store.schema.schemaStatus(), SchemaError)
    const after = new Database(path, { readonly: true })
    t.after(() => after.close())
    assert.equal((after.prepare('SELECT max(version) AS v FROM schema_migrations').get() as { v: number }).v, 3, 'nothing was applied')
  })

  test('when a SQLite store is ahead of this release, then migrate refuses it and leaves it as it is', async (t) => {
    const path = join(tempDir(t), 'ahead.db')
    const store = new SqliteStore(path)
    t.after(() => store.close())
    await store.schema.migrate()
    const db = new Database(path)
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES (?, ?, ?, ?)').run(LATEST + 1, 'from the future', 'now', 'f'.repeat(64))
    db.close()
    await assert.rejects(store.schema.migrate(), (error: unknown) => error instanceof SchemaError && error.problem === 'ahead')
    assert.equal((await store.schema.schemaStatus()).ahead.length, 1)
  })
})

if (await requirePostgres('PostgreSQL migration history tests')) {
  describe('PostgreSQL stores with a history this release does not know', () => {
    test('when a PostgreSQL store ran an edited migration, then migrate refuses it naming the migration', async (t) => {
      const schema = await tempSchema(t)
      const store = new PostgresStore(POSTGRES_URL, { schema })
      t.after(() => store.close())
      await store.schema.migrate()
      await adminQuery(`UPDATE ${schema}.schema_migrations SET checksum = 'edited' WHERE version = 3`)
      await assert.rejects(store.schema.migrate(), (error: unknown) => error instanceof SchemaError && /^migration 3 \("inventory version"\)/.test(error.message))
      await adminQuery(`UPDATE ${schema}.schema_migrations SET checksum = NULL WHERE version = 3`)
      assert.equal(await store.schema.migrate(), 0, 'a row without a checksum is identified and recorded')
    })
  })
}
