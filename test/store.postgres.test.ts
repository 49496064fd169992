/**
 * The Store contract against the real PostgreSQL (each test in its own schema), plus what only the
 * PostgreSQL store does: concurrent migrations, connection trouble reported as StoreUnavailableError.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import pg from 'pg'
import { StoreUnavailableError } from '../src/errors.js'
import { PostgresStore } from '../src/store/postgres/index.js'
import { MIGRATIONS } from '../src/store/postgres/migrations.js'
import { freePort } from './cli/run.js'
import { POSTGRES_URL, requirePostgres, tempPostgresStore, tempSchema } from './helpers/postgres.js'
import { setStock, storeContract } from './store/contract.js'
import { importData } from '../src/domain/import.js'

if (await requirePostgres('PostgreSQL store tests')) {
  storeContract('PostgresStore', (t) => tempPostgresStore(t))

  describe('PostgresStore specifics', () => {
    test('when several instances migrate at once, then each version is applied exactly once', async (t) => {
      const schema = await tempSchema(t)
      const stores = Array.from({ length: 5 }, () => new PostgresStore(POSTGRES_URL, { schema, poolSize: 2 }))
      t.after(() => Promise.all(stores.map((s) => s.close())))
      const applied = await Promise.all(stores.map((s) => s.migrate()))
      assert.equal(applied.reduce((a, b) => a + b, 0), MIGRATIONS.length)
      assert.equal(await stores[0]!.migrate(), 0)
    })

    test('when another instance is committing the same idempotency key, then a change waits for it and applies nothing if it commits', async (t) => {
      const schema = await tempSchema(t)
      const store = new PostgresStore(POSTGRES_URL, { schema })
      t.after(() => store.close())
      await store.migrate()
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 5 }], orders: [] })
      const other = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await other.connect()
      t.after(() => other.end())
      const at = new Date('2026-11-23T12:00:00Z')
      const claim = { scope: 'key_a', key: 'k', fingerprint: 'fp', expiresAt: new Date(at.getTime() + 60_000) }
      const insert = `INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, created_at, expires_at)
        VALUES ('key_a', 'k', 'fp', '[]', $1, $2)`
      for (const [end, expected, quantity] of [['COMMIT', 'recorded', 5], ['ROLLBACK', 'updated', 6]] as const) {
        await other.query('DELETE FROM idempotency_keys')
        await other.query('BEGIN')
        await other.query(insert, [at, claim.expiresAt])
        let settled = false
        const change = store.adjustQuantity({ petId: 1n, delta: 1, expectedRevisions: null, reason: 'arrival', note: null, keyId: 'key_a',
          requestId: 'r', at, allowed: { min: 0, max: 1_000_000_000 }, idempotency: claim }).finally(() => { settled = true })
        await new Promise((resolve) => setTimeout(resolve, 300))
        assert.equal(settled, false, 'the change waits for the transaction holding the key')
        await other.query(end)
        assert.equal((await change).status, expected, end)
        assert.equal((await store.getStockEntry(1n))?.quantity, quantity, end)
      }
    })

    test('when the server cannot be reached, then calls fail fast with StoreUnavailableError', async (t) => {
      const port = await freePort()
      const store = new PostgresStore(`postgres://postgres@127.0.0.1:${port}/test`, { connectTimeoutMs: 500 })
      t.after(() => store.close())
      const started = Date.now()
      await assert.rejects(store.ping(), StoreUnavailableError)
      await assert.rejects(store.listInventory(), StoreUnavailableError)
      await assert.rejects(store.migrate(), StoreUnavailableError)
      assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`)
    })

    test('when a statement waits past the statement timeout, then it fails as StoreUnavailableError and changes nothing', async (t) => {
      const schema = await tempSchema(t)
      const store = new PostgresStore(POSTGRES_URL, { schema, statementTimeoutMs: 200 })
      t.after(() => store.close())
      await store.migrate()
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }], orders: [] })
      const locker = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await locker.connect()
      t.after(() => locker.end())
      await locker.query('BEGIN')
      await locker.query('LOCK TABLE inventory IN ACCESS EXCLUSIVE MODE')
      const started = Date.now()
      await assert.rejects(setStock(store, 1n, 5), StoreUnavailableError)
      assert.ok(Date.now() - started < 2000)
      await locker.query('ROLLBACK')
      assert.deepEqual(await store.listInventory(), [{ petId: 1n, quantity: 1, status: 'available' }])
    })
  })
}
