/**
 * How the contracts that need more than one instance (webhooks, streams) open a store: a fresh, migrated one for one
 * test, with a second store on the same database standing for another instance (a second process on the SQLite file,
 * a second pool on PostgreSQL), and a row count of a table (what a delete takes with it, which the interfaces do not
 * show).
 */
import Database from 'better-sqlite3'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import pg from 'pg'
import { PostgresStore } from '../../src/store/postgres-store.js'
import type { PostgresOptions } from '../../src/store/postgres/options.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { SqliteOptions } from '../../src/store/sqlite/database.js'
import type { Store } from '../../src/store/store.js'
import { tempDir } from '../helpers/app.js'
import { POSTGRES_URL, tempSchema } from '../helpers/postgres.js'

/** One store under test, with what the tests need around it. */
export interface Harness {
  store: Store
  /**
   * Another store on the same database: another instance, closed after the test. PostgreSQL takes the pool's
   * options (a test that queues more writes than a pool has connections gives them time to wait); SQLite has none.
   */
  peer: (options?: PostgresOptions) => Promise<Store>
  /** How many rows a table holds: what a delete takes with it, which the interface does not show. */
  count: (table: string) => Promise<number>
  /**
   * The rows of a query (its values written into its text), read beside the store: what a table
   * holds that the interface does not show (the ledger's event rows, an entry's chain head). Integers come back as
   * numbers or bigints depending on the driver; compare them through Number().
   */
  rows: (sql: string) => Promise<Array<Record<string, unknown>>>
  /**
   * Runs statements on the database directly, as another writer would (rows of another area, written here without
   * it): SQL both stores read alike, values written into it.
   */
  run: (sql: string) => Promise<void>
}

export type Open = (t: TestContext) => Promise<Harness>

/** A store on a temporary SQLite file (`options`: a serving store's, its writer thread, say). */
export const sqliteHarness = async (t: TestContext, options: SqliteOptions = {}): Promise<Harness> => {
  const path = join(tempDir(t), 'store.db')
  const store = new SqliteStore(path, options)
  t.after(() => store.close())
  await store.schema.migrate()
  return {
    store,
    peer: async () => {
      const other = new SqliteStore(path)
      t.after(() => other.close())
      return other
    },
    count: async (table) => {
      const db = new Database(path, { readonly: true })
      try {
        return Number(db.prepare(`SELECT count(*) FROM ${table}`).pluck().get())
      } finally {
        db.close()
      }
    },
    rows: async (sql) => {
      const db = new Database(path, { readonly: true })
      try {
        return db.prepare(sql).all() as Array<Record<string, unknown>>
      } finally {
        db.close()
      }
    },
    run: async (sql) => {
      const db = new Database(path)
      try {
        db.pragma('busy_timeout = 5000')
        db.exec(sql)
      } finally {
        db.close()
      }
    }
  }
}


/** A store on a temporary SQLite file whose writes run on its writer thread, as a serving process's do. */
export const threadedSqliteHarness: Open = (t) => sqliteHarness(t, { writerThread: true })

/** A store in a temporary schema of the test PostgreSQL database. */
export const postgresHarness: Open = async (t) => {
  const schema = await tempSchema(t)
  const store = new PostgresStore(POSTGRES_URL, { schema })
  t.after(() => store.close())
  await store.schema.migrate()
  return {
    store,
    peer: async (options = {}) => {
      const other = new PostgresStore(POSTGRES_URL, { ...options, schema })
      t.after(() => other.close())
      return other
    },
    count: async (table) => {
      const client = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await client.connect()
      try {
        const { rows } = await client.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`)
        return Number(rows[0]?.n)
      } finally {
        await client.end()
      }
    },
    rows: async (sql) => {
      const client = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await client.connect()
      try {
        return (await client.query<Record<string, unknown>>(sql)).rows
      } finally {
        await client.end()
      }
    },
    run: async (sql) => {
      const client = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await client.connect()
      try {
        await client.query(sql)
      } finally {
        await client.end()
      }
    }
  }
}
