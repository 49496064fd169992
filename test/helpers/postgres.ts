/**
 * The real PostgreSQL the PostgreSQL tests run against (POSTGRES_TEST_URL overrides the local default). Each
 * test works in its own schema or database, dropped afterwards.
 */
import { randomBytes } from 'node:crypto'
import type { TestContext } from 'node:test'
import pg from 'pg'
import { PostgresStore, type PostgresOptions } from '../../src/store/postgres/index.js'
import { requireService } from './services.js'

export const POSTGRES_URL = process.env.POSTGRES_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

export async function postgresReachable (url: string = POSTGRES_URL): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 })
  client.on('error', () => {})
  try {
    await client.connect()
    await client.query('SELECT 1')
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => {})
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

/** A fresh, empty schema in the test database, dropped after the test (registered first, so it runs last). */
export async function tempSchema (t: TestContext): Promise<string> {
  const schema = `test_${randomBytes(6).toString('hex')}`
  await adminQuery(`CREATE SCHEMA ${schema}`)
  t.after(() => adminQuery(`DROP SCHEMA ${schema} CASCADE`))
  return schema
}

/** A migrated PostgresStore in a fresh schema of the test database; closed and dropped after the test. */
export async function tempPostgresStore (t: TestContext, options: PostgresOptions = {}): Promise<PostgresStore> {
  const schema = await tempSchema(t)
  const store = new PostgresStore(POSTGRES_URL, { ...options, schema })
  t.after(() => store.close())
  await store.migrate()
  return store
}

/** A fresh database for tests that run whole servers (child processes); dropped after the test. */
export async function tempPostgresDatabase (t: TestContext): Promise<string> {
  const name = `petstore_test_${randomBytes(6).toString('hex')}`
  await adminQuery(`CREATE DATABASE ${name}`)
  t.after(() => adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  const url = new URL(POSTGRES_URL)
  url.pathname = `/${name}`
  return url.toString()
}
