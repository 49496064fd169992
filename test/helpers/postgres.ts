/**
 * The real PostgreSQL the PostgreSQL tests run against (POSTGRES_TEST_URL overrides the local default). Each
 * test works in its own schema or database, dropped afterwards, or in a database shared one test at a time and
 * reset before each (resettablePostgresDatabase).
 */
import { randomBytes } from 'node:crypto'
import { after, type TestContext } from 'node:test'
import pg from 'pg'
import { PostgresStore } from '../../src/store/postgres-store.js'
import type { PostgresOptions } from '../../src/store/postgres/options.js'
import { requireService } from './services.js'

export const POSTGRES_URL = process.env.POSTGRES_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

/**
 * Whether the test server answers. A server that is there but busy for a moment (all its connection slots taken by
 * the test files running beside this one, or starting up) is asked again, for up to about 20 s: only a server that
 * is not there, or stays full, reads as unreachable.
 */
export async function postgresReachable (url: string = POSTGRES_URL): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
    client.on('error', () => {})
    try {
      await client.connect()
      await client.query('SELECT 1')
      return true
    } catch (error) {
      const code = (error as { code?: string }).code
      const busy = code === '53300' || code === '57P03' || /timeout/i.test((error as Error).message)
      if (!busy || attempt === 4) return false
    } finally {
      await client.end().catch(() => {})
    }
    await new Promise((resolve) => setTimeout(resolve, 1000 * attempt))
  }
}

export function requirePostgres (what: string): Promise<boolean> {
  return requireService('PostgreSQL', POSTGRES_URL, () => postgresReachable(), what, 'POSTGRES_TEST_URL')
}

/** Runs one statement on the test server, outside any store. */
export async function adminQuery (sql: string, url: string = POSTGRES_URL): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

/** The schemas tempSchema made in this file (one process per test file), dropped once its tests are done. */
const schemas: string[] = []
after(async () => {
  // A few per statement: one DROP takes a lock on every table and index of its schemas.
  for (let i = 0; i < schemas.length; i += 5) await adminQuery(`DROP SCHEMA IF EXISTS ${schemas.slice(i, i + 5).join(', ')} CASCADE`)
})

/**
 * A fresh, empty schema in the test database, dropped when the file's tests are done. Not in the test's own after
 * hooks: node:test runs those in the order they were registered, so a drop registered before the stores and apps
 * on the schema ran while they still worked in it, and could deadlock with them (a webhook dispatcher's claim against
 * the DROP's exclusive locks); the failed hook then skipped the closes after it, and the apps kept the process alive.
 */
export async function tempSchema (_t: TestContext): Promise<string> {
  const schema = `test_${randomBytes(6).toString('hex')}`
  await adminQuery(`CREATE SCHEMA ${schema}`)
  schemas.push(schema)
  return schema
}

/**
 * A migrated PostgresStore in a fresh schema of the test database (or in `options.schema`, one of tempSchema's); closed
 * after the test (the schema is dropped with the file's).
 */
export async function tempPostgresStore (t: TestContext, options: PostgresOptions = {}): Promise<PostgresStore> {
  const schema = options.schema ?? await tempSchema(t)
  const store = new PostgresStore(POSTGRES_URL, { ...options, schema })
  t.after(() => store.close())
  await store.schema.migrate()
  return store
}

/** A connection of the test's own to `schema` (a transaction holding locks beside a store's), ended after the test. */
export async function schemaClient (t: TestContext, schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
  await client.connect()
  t.after(() => client.end())
  return client
}

/**
 * A fresh database for tests that run whole servers (child processes); dropped (connections and all) after the test,
 * or by whatever else registers it (`after`: a test's t.after, a run's cleanup).
 */
export async function tempPostgresDatabase (t: { after: (fn: () => Promise<unknown>) => void }): Promise<string> {
  const { url, drop } = await ownDatabase()
  t.after(drop)
  return url
}

/**
 * A fresh database for a test whose stores take advisory locks (imports, migrations): those are per database, so in a
 * schema of the shared test database another test's import holds them up. The caller drops it once everything on it
 * is closed (DROP ... WITH (FORCE) ends what is left).
 */
export async function ownDatabase (): Promise<{ url: string, drop: () => Promise<void> }> {
  const name = `petstore_test_${randomBytes(6).toString('hex')}`
  await adminQuery(`CREATE DATABASE ${name}`)
  const url = new URL(POSTGRES_URL)
  url.pathname = `/${name}`
  return { url: url.toString(), drop: () => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
}

export interface ResettableDatabase {
  /** The database's URL on the test server. */
  readonly url: string
  /** Puts it back as migrations left it: every table emptied, sequences restarted, the rows migrations wrote put back. */
  reset: () => Promise<void>
}

/**
 * A migrated database that tests running one after another share, each starting from reset(): for stores that
 * cannot work in a schema of their own (through a pooler in transaction mode), where a database per test would
 * cost about a second each (DROP DATABASE forces a checkpoint). The rows migrations wrote are copied aside once
 * (schema `pristine`); reset() deletes the rows of every table of the store's schema but schema_migrations
 * (referencing tables first), restarts its sequences and copies the pristine rows back, in one transaction, so
 * nothing a test wrote reaches the next one, whatever tables later migrations add. (DELETE, not TRUNCATE: a few
 * ms against 150.) Call it at a file's top level: it is dropped when the file's tests are done (node:test's after()
 * there).
 */
export async function resettablePostgresDatabase (): Promise<ResettableDatabase> {
  const name = `petstore_test_${randomBytes(6).toString('hex')}`
  await adminQuery(`CREATE DATABASE ${name}`)
  after(() => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const address = new URL(POSTGRES_URL)
  address.pathname = `/${name}`
  const url = address.toString()
  const store = new PostgresStore(url)
  try {
    await store.schema.migrate()
  } finally {
    await store.close()
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  let resetSql: string
  try {
    const { rows: tables } = await client.query<{ oid: number, name: string }>(
      `SELECT oid::integer, quote_ident(relname) AS name FROM pg_class
       WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') AND relname <> 'schema_migrations' ORDER BY relname`)
    const { rows: references } = await client.query<{ from: number, to: number }>(
      `SELECT conrelid::integer AS from, confrelid::integer AS to FROM pg_constraint
       WHERE contype = 'f' AND connamespace = 'public'::regnamespace AND conrelid <> confrelid`)
    const { rows: sequences } = await client.query<{ name: string, start: string }>(
      `SELECT quote_ident(sequencename) AS name, start_value::text AS start FROM pg_sequences WHERE schemaname = 'public'`)
    // Referencing tables before the tables they reference: a row is deleted before the row it points at.
    const order: string[] = []
    const placed = new Set<number>()
    const place = (oid: number): void => {
      if (placed.has(oid)) return
      placed.add(oid)
      for (const reference of references) if (reference.to === oid) place(reference.from)
      const table = tables.find((t) => t.oid === oid)
      if (table !== undefined) order.push(table.name)
    }
    for (const table of tables) place(table.oid)
    await client.query(['CREATE SCHEMA pristine', ...order.map((table) => `CREATE TABLE pristine.${table} AS TABLE public.${table}`)].join(';\n'))
    resetSql = [
      ...order.map((table) => `DELETE FROM public.${table}`),
      ...sequences.map((sequence) => `SELECT setval('public.${sequence.name}', ${sequence.start}, false)`),
      ...order.toReversed().map((table) => `INSERT INTO public.${table} OVERRIDING SYSTEM VALUE SELECT * FROM pristine.${table}`)
    ].join(';\n')
  } finally {
    await client.end()
  }
  return { url, reset: () => adminQuery(resetSql, url) }
}

/**
 * How many backends wait for a lock while holding one on a table of `schema`: a statement of the test's that has
 * reached the row or key another transaction holds. Tests wait for this, rather than sleep, before they go on as if
 * the statement were blocked (on a loaded machine it may not have left the client yet). Asked on a connection of
 * its own: a transaction sees pg_stat_activity as it was at its first look.
 */
export async function lockWaiters (schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: POSTGRES_URL })
  await client.connect()
  try {
    const { rows } = await client.query<{ waiting: number }>(`
      SELECT count(DISTINCT a.pid)::int AS waiting
      FROM pg_stat_activity a
      JOIN pg_locks l ON l.pid = a.pid
      JOIN pg_class c ON c.oid = l.relation
      JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE a.wait_event_type = 'Lock' AND n.nspname = $1`, [schema])
    return rows[0]?.waiting ?? 0
  } finally {
    await client.end()
  }
}
