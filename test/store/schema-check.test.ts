/**
 * The schema check: a SQLite file, or a PostgreSQL schema, whose objects (tables, indexes, triggers, views, and on
 * PostgreSQL functions, rules, policies ...) are not exactly those its recorded migrations make is refused, naming
 * each object that differs, before anything is written; every form a landed release could have left a store in is
 * accepted.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { copyFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import pg from 'pg'
import { checksum, SchemaError } from '../../src/store/migrations.js'
import { migrateStore } from '../../src/store/open.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { PLAN } from '../../src/store/sqlite/migrations.js'
import { normalizeSql } from '../../src/store/sqlite/schema.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { PLAN as POSTGRES_PLAN } from '../../src/store/postgres/migrations.js'
import { buildPostgres, buildSqlite, POSTGRES_SCHEMAS, SQLITE_SCHEMAS } from '../fixtures/landed-schemas.js'
import { tempDir } from '../helpers/app.js'
import { adminQuery, POSTGRES_URL, requirePostgres, tempPostgresDatabase, tempSchema } from '../helpers/postgres.js'

/** A store of this release at its latest version, with a read-only key, as a file no process has open. */
async function storeFile (t: TestContext): Promise<string> {
  const path = join(tempDir(t), 'store.db')
  const store = new SqliteStore(path)
  await store.schema.migrate()
  await store.close()
  const db = new Database(path)
  db.exec("INSERT INTO pets (id, name, status) VALUES (1, 'Rex', 'available'); INSERT INTO inventory (pet_id, quantity) VALUES (1, 3)")
  db.prepare("INSERT INTO api_keys (id, key_hash, plan, created_at, scope) VALUES ('key_read', 'hash', 'free', '2026-11-01T00:00:00.000Z', 'read')").run()
  db.close()
  return path
}

/** Changes the file as someone with the file in hand could: any SQL, the schema table itself included. */
function tamper (path: string, sql: string): void {
  const db = new Database(path)
  // better-sqlite3 refuses writes to sqlite_master by default; the sqlite3 shell does not.
  db.unsafeMode(true)
  try {
    db.exec(sql)
  } finally {
    db.close()
  }
}

const writableSchema = (sql: string): string => `PRAGMA writable_schema = ON; ${sql}; PRAGMA writable_schema = OFF;`

/** What the store answers when asked its schema status, or the SchemaError it refuses with. */
async function statusOf (path: string): Promise<SchemaError | number> {
  const store = new SqliteStore(path)
  try {
    return (await store.schema.schemaStatus()).version
  } catch (error) {
    if (error instanceof SchemaError) return error
    throw error
  } finally {
    await store.close()
  }
}

async function assertRefused (path: string, ...named: RegExp[]): Promise<SchemaError> {
  const outcome = await statusOf(path)
  assert.ok(outcome instanceof SchemaError, `refused, not accepted at version ${String(outcome)}`)
  assert.equal(outcome.problem, 'altered')
  assert.match(outcome.message, /^the store's schema is not the one its migrations define \(version \d+\): /)
  for (const name of named) assert.match(outcome.message, name)
  return outcome
}

const LATEST = PLAN.migrations.length

describe('a SQLite store whose schema objects are not the migrations\'', () => {
  const cases: Array<[string, string, RegExp[]]> = [
    ['a trigger is added (the one that made read keys write keys)',
      "create trigger escalate after update on inventory begin update api_keys set scope='write'; end",
      [/trigger "escalate" on table "inventory" is not defined by any migration/]],
    ['a view is added', 'CREATE VIEW key_hashes AS SELECT key_hash FROM api_keys', [/view "key_hashes" is not defined by any migration/]],
    ['an index is added', 'CREATE INDEX api_keys_scope ON api_keys (scope)', [/index "api_keys_scope" on table "api_keys" is not defined by any migration/]],
    ['a table is added', 'CREATE TABLE notes (text TEXT)', [/table "notes" is not defined by any migration/]],
    ['a virtual table is added', 'CREATE VIRTUAL TABLE search USING fts5(text)', [/table "search" is not defined by any migration/]],
    ['a trigger keeps its name and gets another body',
      'DROP TRIGGER inventory_updated; CREATE TRIGGER inventory_updated AFTER UPDATE ON inventory BEGIN UPDATE api_keys SET scope = \'write\'; END',
      [/trigger "inventory_updated" differs: its definition differs from the migrations'/]],
    ['a trigger keeps its name and body on another table',
      'DROP TRIGGER inventory_inserted; CREATE TRIGGER inventory_inserted AFTER INSERT ON pets BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END',
      [/trigger "inventory_inserted" differs: it is on table "pets", where the migrations put it on table "inventory"/]],
    ['a trigger is renamed only in case',
      'DROP TRIGGER inventory_updated; CREATE TRIGGER INVENTORY_UPDATED AFTER UPDATE ON inventory BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END',
      [/trigger "INVENTORY_UPDATED" on table "inventory" is not defined by any migration/, /trigger "inventory_updated" on table "inventory" is missing/]],
    ['an index the migrations define is dropped', 'DROP INDEX orders_status_id', [/index "orders_status_id" on table "orders" is missing/]],
    ['a trigger the migrations define is dropped', 'DROP TRIGGER pet_status_revision', [/trigger "pet_status_revision" on table "pets" is missing/]],
    ['a column is added', 'ALTER TABLE api_keys ADD COLUMN note TEXT', [/table "api_keys" differs: column "note" not defined by the migrations/]],
    ['a CHECK is widened in the schema table',
      writableSchema("UPDATE sqlite_master SET sql = replace(sql, 'scope IN (''read'', ''storefront'', ''write'')', 'scope IN (''read'', ''storefront'', ''write'', ''admin'')') WHERE name = 'api_keys'"),
      [/table "api_keys" differs: its columns are the migrations' but not the rest of its definition/]],
    ['a default is changed in the schema table',
      writableSchema("UPDATE sqlite_master SET sql = replace(sql, 'DEFAULT ''write''', 'DEFAULT ''read''') WHERE name = 'api_keys'"),
      [/table "api_keys" differs: column "scope" defined otherwise/]],
    ['a string in a CHECK differs only in case',
      writableSchema("UPDATE sqlite_master SET sql = replace(sql, '''write'')', '''WRITE'')') WHERE name = 'api_keys'"),
      [/table "api_keys" differs: its columns are the migrations' but not the rest of its definition/]],
    ['a string in a CHECK differs only in its spaces',
      writableSchema("UPDATE sqlite_master SET sql = replace(sql, '''read''', ''' read''') WHERE name = 'api_keys'"),
      [/table "api_keys" differs: its columns are the migrations' but not the rest of its definition/]],
    ['a TEMP trigger is written into the file\'s schema table',
      writableSchema("INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES ('trigger', 'escalate', 'inventory', 0, 'CREATE TEMP TRIGGER escalate AFTER UPDATE ON inventory BEGIN UPDATE api_keys SET scope = ''write''; END')"),
      [/trigger "escalate" on table "inventory" is not defined by any migration/]],
    ['ANALYZE left its statistics tables', 'ANALYZE', [/table "sqlite_stat1" is not defined by any migration/]],
    ['a name carries control characters', 'CREATE TABLE "notes\u001b[2J\nx" (text TEXT)', [/table "notes\\u001b\[2J\\u000ax" is not defined by any migration/]]
  ]
  for (const [what, sql, named] of cases) {
    test(`when ${what}, then the store is refused naming it, and nothing is written`, async (t) => {
      const path = await storeFile(t)
      tamper(path, sql)
      const refused = await assertRefused(path, ...named)
      assert.doesNotMatch(refused.message, /update api_keys|BEGIN|CREATE/i, 'no SQL found in the file is repeated')

      const store = new SqliteStore(path)
      t.after(() => store.close())
      await assert.rejects(store.schema.migrate(), (error: unknown) => error instanceof SchemaError && error.problem === 'altered')
      const db = new Database(path, { readonly: true })
      t.after(() => db.close())
      assert.equal(db.prepare('SELECT scope FROM api_keys').pluck().get(), 'read')
      assert.equal(db.prepare('SELECT count(*) FROM schema_migrations').pluck().get(), LATEST)
    })
  }

  test('when the recorded history names another landed migration 4 than the one the schema shows, then the store is refused', async (t) => {
    // A store left at version 4 (the chained ledger): from migration 12 on, every landed ledger is rebuilt alike.
    const path = join(tempDir(t), 'store.db')
    buildSqlite(path, SQLITE_SCHEMAS.find((schema) => schema.ledger === 'chained') as (typeof SQLITE_SCHEMAS)[number])
    const indexedLedger = PLAN.superseded.find((m) => m.detect !== undefined)
    assert.ok(indexedLedger !== undefined)
    // The landed store predates checksums: the claim is a checksum written into its history.
    tamper(path, `ALTER TABLE schema_migrations ADD COLUMN checksum TEXT; UPDATE schema_migrations SET checksum = '${checksum(indexedLedger)}' WHERE version = 4`)
    await assertRefused(path, /table "stock_ledger" differs/)
  })

  test('when a store has no migrations applied and holds an object, then it is refused rather than migrated around it', async (t) => {
    const path = join(tempDir(t), 'foreign.db')
    tamper(path, 'CREATE TABLE notes (text TEXT)')
    const store = new SqliteStore(path)
    t.after(() => store.close())
    await assert.rejects(store.schema.migrate(), (error: unknown) => error instanceof SchemaError &&
      /\(none applied\): table "notes" is not defined by any migration/.test(error.message))
  })
})

describe('a SQLite store whose schema is what its migrations made', () => {
  test('when the store is this release\'s, new or with data, then it is accepted', async (t) => {
    assert.equal(await statusOf(await storeFile(t)), LATEST)
  })

  test('when the schema\'s text has other line endings and indentation, then it is the same schema and accepted', async (t) => {
    const path = await storeFile(t)
    tamper(path, writableSchema("UPDATE sqlite_master SET sql = replace(replace(sql, char(10), char(13) || char(10) || '  '), ' ', char(9)) WHERE sql IS NOT NULL"))
    assert.equal(await statusOf(path), LATEST)
  })

  test('when ANALYZE\'s tables are dropped again, then it is accepted', async (t) => {
    const path = await storeFile(t)
    tamper(path, 'ANALYZE; DROP TABLE sqlite_stat1; DROP TABLE IF EXISTS sqlite_stat4')
    assert.equal(await statusOf(path), LATEST)
  })

  for (const schema of SQLITE_SCHEMAS) {
    test(`when a store was left in ${schema.name}, then it is accepted before and after this release migrates it`, async (t) => {
      const path = join(tempDir(t), 'landed.db')
      buildSqlite(path, schema)
      assert.equal(await statusOf(path), schema.migrations.at(-1)?.version)
      const copy = join(tempDir(t), 'copy.db')
      copyFileSync(path, copy)
      const store = new SqliteStore(copy)
      t.after(() => store.close())
      await store.schema.migrate()
      assert.equal((await store.schema.schemaStatus()).version, LATEST)
    })
  }
})

describe('normalizing SQL text', () => {
  test('when two texts differ in whitespace between tokens only, then they are equal', () => {
    assert.equal(normalizeSql('CREATE TABLE t (\r\n\ta INTEGER ,\n  b TEXT\n)'), 'CREATE TABLE t ( a INTEGER , b TEXT )')
  })

  test('when they differ inside a string, a quoted name or a comment, or by a line comment\'s end, then they differ', () => {
    for (const [a, b] of [
      ["CHECK (x IN ('a  b'))", "CHECK (x IN ('a b'))"],
      ["CHECK (x IN ('it''s  x'))", "CHECK (x IN ('it''s x'))"],
      ['"a  b"', '"a b"'],
      ['[a  b]', '[a b]'],
      ['`a  b`', '`a b`'],
      ['/* a  b */', '/* a b */'],
      ['x -- note\nDELETE', 'x -- note DELETE'],
      ["'Write'", "'write'"]
    ]) assert.notEqual(normalizeSql(a as string), normalizeSql(b as string), `${a} | ${b}`)
  })
})

/** The rows of one query on the database at `url`. */
async function adminRows (sql: string, url: string): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql)).rows
  } finally {
    await client.end()
  }
}

if (await requirePostgres('the schema check on PostgreSQL')) {
  /** A migrated store in a schema of its own, with a read-only key; `sql` (with `S` for the schema) changes it, as a dump's SQL could. */
  async function postgresStore (t: TestContext, sql?: string): Promise<{ schema: string, store: PostgresStore }> {
    const schema = await tempSchema(t)
    const store = new PostgresStore(POSTGRES_URL, { schema })
    t.after(() => store.close())
    await store.schema.migrate()
    await adminQuery(`INSERT INTO ${schema}.api_keys (id, key_hash, plan, created_at, scope) VALUES ('key_read', 'hash', 'free', now(), 'read')`)
    if (sql !== undefined) await adminQuery(sql.replaceAll('S.', `${schema}.`))
    return { schema, store }
  }

  describe('a PostgreSQL store whose schema objects are not the migrations\'', () => {
    const cases: Array<[string, string, RegExp]> = [
      ['a trigger is added (the one that made read keys write keys)',
        "CREATE FUNCTION S.escalate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE S.api_keys SET scope = 'write'; RETURN NULL; END $$; " +
        'CREATE TRIGGER escalate AFTER UPDATE ON S.inventory FOR EACH STATEMENT EXECUTE FUNCTION S.escalate()',
      /trigger "inventory\.escalate" on table "inventory" is not defined by any migration; function "escalate\(\)" is not defined by any migration/],
      ['a trigger of the migrations calls a function of another schema',
        'DROP TRIGGER inventory_updated ON S.inventory; CREATE TRIGGER inventory_updated AFTER UPDATE ON S.inventory REFERENCING NEW TABLE AS changed_rows ' +
        'FOR EACH STATEMENT EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()',
      /trigger "inventory\.inventory_updated" differs/],
      ['a trigger of the migrations is disabled', 'ALTER TABLE S.inventory DISABLE TRIGGER inventory_updated', /trigger "inventory\.inventory_updated" differs/],
      ['a function of the migrations gets another body',
        "CREATE OR REPLACE FUNCTION S.bump_inventory_version_if_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN UPDATE S.api_keys SET scope = 'write'; RETURN NULL; END $$",
        /function "bump_inventory_version_if_rows\(\)" differs/],
      ['a rule is added', "CREATE RULE escalate AS ON UPDATE TO S.inventory DO ALSO UPDATE S.api_keys SET scope = 'write'", /rule "inventory\.escalate" on table "inventory" is not defined by any migration/],
      ['row security and a policy are added', 'ALTER TABLE S.api_keys ENABLE ROW LEVEL SECURITY; CREATE POLICY everyone ON S.api_keys USING (true)',
        /table "api_keys" differs: its columns are the migrations' but not the rest of its definition; policy "api_keys\.everyone" on table "api_keys" is not defined by any migration/],
      ['a view is added', 'CREATE VIEW S.key_hashes AS SELECT key_hash FROM S.api_keys', /view "key_hashes" is not defined by any migration/],
      ['a default is changed', "ALTER TABLE S.api_keys ALTER COLUMN scope SET DEFAULT 'read'", /table "api_keys" differs: column "scope" defined otherwise/],
      ['a CHECK is dropped', 'ALTER TABLE S.api_keys DROP CONSTRAINT api_keys_scope_check', /constraint "api_keys\.api_keys_scope_check" on table "api_keys" is missing/],
      ['an index of the migrations is dropped', 'DROP INDEX S.orders_status_id', /index "orders_status_id" on table "orders" is missing/],
      ['an index is added', 'CREATE INDEX api_keys_scope ON S.api_keys (scope)', /index "api_keys_scope" on table "api_keys" is not defined by any migration/]
    ]
    test('when the database has an event trigger (one could make the scratch schema look like the store), then the store is refused naming it', async (t) => {
      // A database of its own: an event trigger fires for every schema of its database.
      const url = await tempPostgresDatabase(t)
      await adminQuery('CREATE FUNCTION public.on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN END $$; ' +
        "CREATE EVENT TRIGGER on_ddl ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION public.on_ddl()", url)
      const store = new PostgresStore(url)
      t.after(() => store.close())
      await assert.rejects(migrateStore(store, url), (error: unknown) => error instanceof SchemaError && error.problem === 'altered' &&
        error.message.includes('event trigger "on_ddl" is not defined by any migration'))
      assert.equal((await adminRows("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'", url))[0]?.n, 0, 'nothing was migrated')
    })

    test('when the operator names a database\'s event trigger as trusted (a managed PostgreSQL\'s own), then the store is accepted; an event trigger not named is still refused', async (t) => {
      const url = await tempPostgresDatabase(t)
      // The platform's function lives in a schema of its own, as a managed PostgreSQL's do, not in the store's.
      await adminQuery('CREATE SCHEMA platform; CREATE FUNCTION platform.on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN END $$; ' +
        "CREATE EVENT TRIGGER platform_audit ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION platform.on_ddl()", url)
      const trusting = new PostgresStore(url, { trustedEventTriggers: ['platform_audit'] })
      t.after(() => trusting.close())
      await migrateStore(trusting, url)
      assert.equal((await trusting.schema.schemaStatus()).version, POSTGRES_PLAN.migrations.length)

      await adminQuery("CREATE EVENT TRIGGER on_ddl ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION platform.on_ddl()", url)
      await assert.rejects(trusting.schema.schemaStatus(), (error: unknown) => error instanceof SchemaError && error.problem === 'altered' &&
        error.message.includes('event trigger "on_ddl" is not defined by any migration') && !error.message.includes('platform_audit'))
    })

    for (const [what, sql, named] of cases) {
      test(`when ${what}, then the store is refused naming it, and nothing is written`, async (t) => {
        const { schema, store } = await postgresStore(t, sql)
        await assert.rejects(store.schema.schemaStatus(), (error: unknown) => error instanceof SchemaError && error.problem === 'altered' &&
          /^the store's schema is not the one its migrations define \(version \d+\): /.test(error.message) && named.test(error.message) &&
          !/update S|BEGIN|RETURN/i.test(error.message))
        await assert.rejects(store.schema.migrate(), (error: unknown) => error instanceof SchemaError && error.problem === 'altered')
        const reader = new PostgresStore(POSTGRES_URL, { schema })
        t.after(() => reader.close())
        assert.equal((await reader.keys.listApiKeys()).find((key) => key.id === 'key_read')?.scope, 'read')
      })
    }
  })

  describe('a PostgreSQL store whose schema is what its migrations made', () => {
    test('when the store is this release\'s, then it is accepted, and the scratch schema of the check is left nowhere', async (t) => {
      const { store } = await postgresStore(t)
      const status = await store.schema.schemaStatus()
      assert.equal(status.version, POSTGRES_PLAN.migrations.length)
      assert.equal(status.objectsUnchecked, undefined)
      const admin = new pg.Client({ connectionString: POSTGRES_URL })
      await admin.connect()
      t.after(() => admin.end())
      const { rows } = await admin.query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'petstore\\_check\\_%'")
      assert.deepEqual(rows, [])
    })

    for (const schema of POSTGRES_SCHEMAS) {
      test(`when a store was left in ${schema.name}, then it is accepted before and after this release migrates it`, async (t) => {
        const name = await tempSchema(t)
        await buildPostgres(POSTGRES_URL, name, schema)
        const store = new PostgresStore(POSTGRES_URL, { schema: name })
        t.after(() => store.close())
        assert.equal((await store.schema.schemaStatus()).version, schema.migrations.at(-1)?.version)
        await store.schema.migrate()
        assert.equal((await store.schema.schemaStatus()).version, POSTGRES_PLAN.migrations.length)
      })
    }

    test('when the role may not create the scratch schema, then the status says the objects were not compared, and the store is usable', async (t) => {
      const { schema } = await postgresStore(t)
      const role = `${schema}_app`
      await adminQuery(`CREATE ROLE ${role} LOGIN; GRANT USAGE ON SCHEMA ${schema} TO ${role}; GRANT SELECT ON ALL TABLES IN SCHEMA ${schema} TO ${role}`)
      t.after(() => adminQuery(`DROP OWNED BY ${role}; DROP ROLE ${role}`))
      const url = new URL(POSTGRES_URL)
      url.username = role
      const store = new PostgresStore(url.toString(), { schema })
      t.after(() => store.close())
      const status = await store.schema.schemaStatus()
      assert.equal(status.version, POSTGRES_PLAN.migrations.length)
      assert.match(status.objectsUnchecked ?? '', /may not create the scratch schema/)
    })
  })
}
