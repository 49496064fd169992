/**
 * The low-stock contract (./alerts.contract.ts) on SQLite (its writes on the event loop, and on a writer thread) and on PostgreSQL, each test on a fresh, migrated store,
 * with the ledger's rows read by SQL beside it (the event rows are what the feed, streams and webhooks serve).
 */
import Database from 'better-sqlite3'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import pg from 'pg'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { SqliteOptions } from '../../src/store/sqlite/database.js'
import { tempDir } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { alertsContract, type LedgerRow } from './alerts.contract.js'

const LEDGER_SQL = 'SELECT id, pet_id, event, quantity, previous_quantity, reason, reorder_point, key_id, request_id FROM stock_ledger ORDER BY id'

const sqliteAlerts = (options: SqliteOptions) => async (t: TestContext) => {
  const path = join(tempDir(t), 'store.db')
  const store = new SqliteStore(path, options)
  t.after(() => store.close())
  await store.schema.migrate()
  const read = <R>(sql: string): R[] => {
    const db = new Database(path, { readonly: true })
    db.defaultSafeIntegers(true)
    try {
      return db.prepare(sql).all() as R[]
    } finally {
      db.close()
    }
  }
  return {
    store,
    ledger: async () => read<LedgerRow>(LEDGER_SQL).map((row) => ({ ...row, quantity: Number(row.quantity), reorder_point: row.reorder_point === null ? null : Number(row.reorder_point) })),
    // SQLite chains a pet's changes: an event row must not be linked into the chain, nor be its head.
    chained: async () => read<{ id: bigint }>(`SELECT id FROM stock_ledger WHERE event IS NOT NULL AND (previous_id IS NOT NULL
      OR id IN (SELECT ledger_head FROM inventory) OR id IN (SELECT previous_id FROM stock_ledger WHERE previous_id IS NOT NULL))`).length
  }
}

alertsContract('SqliteStore', sqliteAlerts({}))
alertsContract('SqliteStore (writer thread)', sqliteAlerts({ writerThread: true }))

if (await requirePostgres('PostgreSQL low-stock contract tests')) {
  alertsContract('PostgresStore', async (t) => {
    const schema = await tempSchema(t)
    const store = new PostgresStore(POSTGRES_URL, { schema })
    t.after(() => store.close())
    await store.schema.migrate()
    const read = async <R extends pg.QueryResultRow>(sql: string): Promise<R[]> => {
      const client = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await client.connect()
      try {
        return (await client.query<R>(sql)).rows
      } finally {
        await client.end()
      }
    }
    return {
      store,
      ledger: async () => (await read<LedgerRow & { id: string, pet_id: string }>(LEDGER_SQL))
        .map((row) => ({ ...row, id: BigInt(row.id), pet_id: BigInt(row.pet_id) })),
      // No chain on PostgreSQL: a pet's history is its rows by pet (without events).
      chained: async () => 0
    }
  })
}
