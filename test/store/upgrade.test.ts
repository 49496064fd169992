/**
 * Upgrades from every landed schema: a store built by each landed release's migrations, with data written as
 * that release wrote it, is migrated by this release; then every row is there, the ledger is chained, reads and
 * writes work, and its schema is exactly the one this release creates. Both dialects; all three landed shapes of
 * SQLite's migration 4 and both of PostgreSQL's.
 *
 * The whole store contract also runs on a store upgraded from each landed state that ran a migration this release
 * does not have (a superseded migration 4, which migration 5 converts). From any other landed state the upgrade runs
 * this release's own migrations, the same statements a new store runs, which the contract suites already cover;
 * running the contract again there took most of this file's time and tested nothing new.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { checksum } from '../../src/store/migrations.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { MIGRATIONS as POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js'
import type { Store } from '../../src/store/store.js'
import type { Migration } from '../../src/store/migrations.js'
import { BIG, buildPostgres, buildSqlite, LANDED_DATA, POSTGRES_SCHEMAS, SQLITE_SCHEMAS, type LandedSchema } from '../fixtures/landed-schemas.js'
import { tempDir } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { storeContract } from './contract.js'
import { stockChange } from './helpers.js'
import { importData } from '../../src/domain/import.js'

const LATEST = SQLITE_MIGRATIONS.at(-1)?.version as number

/** Whether a landed schema ran a migration that is not this release's own (a superseded variant). */
function ranVariant (schema: LandedSchema, current: readonly Migration[]): boolean {
  return schema.migrations.some((m) => !current.includes(m))
}

/** What every upgraded store must show, whatever schema it came from. */
async function assertDataKept (store: Store, schema: LandedSchema): Promise<void> {
  assert.deepEqual(await store.stock.listInventory(), [
    { petId: 1n, quantity: 3, status: 'available' },
    { petId: 2n, quantity: 0, status: 'sold' },
    { petId: BIG, quantity: 7, status: 'pending' }
  ])
  assert.equal(await store.catalog.countPets(), LANDED_DATA.pets.length)
  assert.equal((await store.catalog.getPet(BIG))?.name, 'Big')
  assert.deepEqual((await store.catalog.listOrders({ afterId: null, limit: 10, status: null })).orders.map((o) => [o.id, o.petId, o.quantity]), [[BIG, 1n, 2]])
  const banned = await store.keys.findApiKeyByHash('hash-banned')
  assert.equal(banned?.ban?.until.toISOString(), LANDED_DATA.keys[0].bannedUntil)
  assert.equal((await store.keys.findApiKeyByHash('hash-revoked'))?.revokedAt?.toISOString(), LANDED_DATA.keys[1].revokedAt)

  // The ledger: each pet's changes, oldest first, with the quantities they replaced.
  const history = async (petId: bigint) => (await store.stock.stockHistory(petId, 100)).map((e) => [e.previousQuantity, e.quantity])
  if (schema.ledger === 'none') {
    assert.deepEqual(await history(1n), [])
  } else {
    assert.deepEqual(await history(1n), [[null, 1], [1, 2], [2, 3]])
    assert.deepEqual(await history(BIG), [[null, 5], [5, 7]])
    assert.deepEqual(await history(2n), [[null, 0]])
    assert.deepEqual((await store.stock.stockHistory(1n, 2)).map((e) => e.quantity), [2, 3], 'the newest N, oldest first')
  }
  const revision = (await store.stock.getStockEntry(1n))?.revision
  assert.equal(revision, schema.ledger === 'none' ? 1n : 4n, 'revisions (ETags) are kept')

  // A write appends to the pet's ledger, grows its revision and the inventory version, and reads back.
  const version = await store.stock.inventoryVersion()
  const result = await store.stock.setQuantity(stockChange(1n, 9, { expectedRevisions: [revision as bigint] }))
  assert.equal(result.status, 'updated')
  assert.ok(await store.stock.inventoryVersion() > version, 'the listing cache sees the change')
  assert.deepEqual((await history(1n)).at(-1), [3, 9])
  assert.equal((await store.stock.getStockEntry(1n))?.revision, (revision as bigint) + 1n)
  await importData(store, { pets: [{ id: 4n, name: 'No stock', status: 'sold', quantity: 2 }], orders: [] })
  assert.deepEqual(await history(4n), [[null, 2]])

  const status = await store.schema.schemaStatus()
  assert.deepEqual([status.version, status.pending.length, status.ahead.length], [LATEST, 0, 0])
  assert.equal(await store.schema.migrate(), 0)
}

test('the store contract runs on a store upgraded through each superseded migration: two of SQLite, one of PostgreSQL', () => {
  assert.deepEqual(SQLITE_SCHEMAS.filter((s) => ranVariant(s, SQLITE_MIGRATIONS)).map((s) => s.name),
    ['version 4 of beaad19 (no inventory_updated trigger)', 'version 4 of c42d664 (indexed ledger)'])
  assert.deepEqual(POSTGRES_SCHEMAS.filter((s) => ranVariant(s, POSTGRES_MIGRATIONS)).map((s) => s.name), ['version 4 of beaad19 (a no-op)'])
})

describe('upgrades of SQLite stores from every landed schema', () => {
  for (const schema of SQLITE_SCHEMAS) {
    test(`when a store in ${schema.name} is migrated, then every row is kept and reads and writes work`, async (t) => {
      const path = join(tempDir(t), 'landed.db')
      buildSqlite(path, schema)
      const store = new SqliteStore(path)
      t.after(() => store.close())
      const before = await store.schema.schemaStatus()
      assert.equal(before.version, schema.migrations.at(-1)?.version)
      assert.ok(before.pending.length > 0)
      assert.equal(await store.schema.migrate(), LATEST - (before.version === 4 ? 4 : before.version))
      await assertDataKept(store, schema)
      // The schema is this release's: the same tables, columns, indexes and triggers as a store it creates.
      const fresh = join(tempDir(t), 'fresh.db')
      const created = new SqliteStore(fresh)
      await created.schema.migrate()
      await created.close()
      assert.deepEqual(sqliteSchema(path), sqliteSchema(fresh))
      // Every applied migration's checksum is recorded: this release's, or the landed variant it converted.
      const db = new Database(path, { readonly: true })
      const rows = db.prepare('SELECT version, checksum FROM schema_migrations ORDER BY version').all() as Array<{ version: number, checksum: string | null }>
      db.close()
      assert.deepEqual(rows.map((r) => r.version), Array.from({ length: LATEST }, (_, i) => i + 1))
      for (const row of rows) {
        const landed = schema.migrations.find((m) => m.version === row.version) ?? SQLITE_MIGRATIONS.find((m) => m.version === row.version)
        assert.equal(row.checksum, checksum(landed as never), `migration ${row.version}`)
      }
    })

    if (ranVariant(schema, SQLITE_MIGRATIONS)) storeContract(`SqliteStore upgraded from ${schema.name}`, async (t) => {
      const path = join(tempDir(t), 'landed-empty.db')
      const db = new Database(path)
      db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)')
      for (const migration of schema.migrations) {
        db.exec(migration.sql ?? '')
        db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(migration.version, migration.name, '2026-11-22T10:00:00Z')
      }
      db.close()
      const store = new SqliteStore(path)
      t.after(() => store.close())
      await store.schema.migrate()
      return store
    })
  }
})

/** Tables, columns, indexes and triggers of a SQLite file, comparable between two files. */
function sqliteSchema (path: string): unknown {
  const db = new Database(path, { readonly: true })
  try {
    const objects = db.prepare("SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").all() as Array<{ type: string, name: string }>
    return objects.map((o) => o.type === 'table'
      ? { ...o, columns: (db.prepare(`SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info('${o.name}') ORDER BY name`).all()) }
      : o)
  } finally {
    db.close()
  }
}

if (await requirePostgres('upgrades of PostgreSQL stores')) {
  describe('upgrades of PostgreSQL stores from every landed schema', () => {
    for (const schema of POSTGRES_SCHEMAS) {
      test(`when a store in ${schema.name} is migrated, then every row is kept and reads and writes work`, async (t) => {
        const name = await tempSchema(t)
        await buildPostgres(POSTGRES_URL, name, schema)
        const store = new PostgresStore(POSTGRES_URL, { schema: name })
        t.after(() => store.close())
        const before = await store.schema.schemaStatus()
        assert.equal(before.version, schema.migrations.at(-1)?.version)
        await store.schema.migrate()
        await assertDataKept(store, schema)
        const fresh = await tempSchema(t)
        const created = new PostgresStore(POSTGRES_URL, { schema: fresh })
        await created.schema.migrate()
        await created.close()
        assert.deepEqual(await postgresSchema(name), await postgresSchema(fresh))
        const rows = await schemaMigrations(name)
        for (const row of rows) {
          const landed = schema.migrations.find((m) => m.version === row.version) ?? POSTGRES_MIGRATIONS.find((m) => m.version === row.version)
          assert.equal(row.checksum, checksum(landed as never), `migration ${row.version}`)
        }
      })

      if (ranVariant(schema, POSTGRES_MIGRATIONS)) storeContract(`PostgresStore upgraded from ${schema.name}`, async (t) => {
        const name = await tempSchema(t)
        const client = await pgClient(name)
        try {
          await client.query('CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)')
          for (const migration of schema.migrations) {
            await client.query(migration.sql ?? '')
            await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, now())', [migration.version, migration.name])
          }
        } finally {
          await client.end()
        }
        const store = new PostgresStore(POSTGRES_URL, { schema: name })
        t.after(() => store.close())
        await store.schema.migrate()
        return store
      })
    }
  })
}

async function pgClient (schema: string) {
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
  await client.connect()
  return client
}

async function schemaMigrations (schema: string): Promise<Array<{ version: number, checksum: string | null }>> {
  const client = await pgClient(schema)
  try {
    return (await client.query<{ version: number, checksum: string | null }>('SELECT version, checksum FROM schema_migrations ORDER BY version')).rows
  } finally {
    await client.end()
  }
}

/** Columns, indexes, triggers and functions of a PostgreSQL schema, comparable between two schemas. */
async function postgresSchema (schema: string): Promise<unknown> {
  const client = await pgClient(schema)
  try {
    const columns = await client.query(`SELECT table_name, column_name, data_type, is_nullable, column_default, is_identity
      FROM information_schema.columns WHERE table_schema = $1 ORDER BY table_name, column_name`, [schema])
    const indexes = await client.query('SELECT tablename, indexname, regexp_replace(indexdef, $1::text, \'\', \'g\') AS def FROM pg_indexes WHERE schemaname = $2 ORDER BY indexname', [`${schema}\\.`, schema])
    const triggers = await client.query(`SELECT event_object_table, trigger_name, event_manipulation, action_timing, action_orientation
      FROM information_schema.triggers WHERE trigger_schema = $1 ORDER BY trigger_name, event_manipulation`, [schema])
    return { columns: columns.rows, indexes: indexes.rows, triggers: triggers.rows }
  } finally {
    await client.end()
  }
}

