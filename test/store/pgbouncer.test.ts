/**
 * The store contracts (./contract.ts) against PostgreSQL through PgBouncer in transaction mode
 * (DATABASE_POOLER=transaction), plus what the pooler changes: the store's start error when the pooler is not declared, and the statement timeout,
 * which cannot be a setting of the connection there.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import pg from 'pg'
import { ConfigError } from '../../src/errors.js'
import { importData } from '../../src/domain/import.js'
import { StoreUnavailableError } from '../../src/errors.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import type { PostgresOptions } from '../../src/store/postgres/options.js'
import { MIGRATIONS } from '../../src/store/postgres/migrations.js'
import { requirePgBouncer, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.js'
import { adminQuery, requirePostgres, resettablePostgresDatabase, tempPostgresDatabase } from '../helpers/postgres.js'
import { storeContract } from './contract.js'
import { sellingContract } from './selling.contract.js'
import { setStock } from './helpers.js'

const WHAT = 'PostgreSQL store tests through PgBouncer'

describe('PostgresStore with pooler transaction', () => {
  test('when given a schema too, then it refuses at once: a search_path would not outlast a transaction', () => {
    assert.throws(() => new PostgresStore('postgres://postgres@127.0.0.1:1/none', { pooler: 'transaction', schema: 'test_x' }),
      /a schema \(search_path\) is a session setting, which a pooler in transaction mode does not keep/)
  })
})

const pooler = await requirePostgres(WHAT) ? await requirePgBouncer(WHAT) : null
if (pooler !== null) await throughPgBouncer(pooler)

async function throughPgBouncer (bouncer: PgBouncer): Promise<void> {
  // One database for the contract and most tests below, put back as migrations left it before each test
  // (resettablePostgresDatabase): a database per test took 66 s for the contract here, against 44 s for the schemas of
  // the direct run; this takes 16-22 s.
  const shared = await resettablePostgresDatabase()
  let inUse = false
  /** The shared database (its URL on the test server), reset for this test, which must be the only one using it. */
  async function sharedDatabase (t: TestContext): Promise<string> {
    if (inUse) throw new Error('the tests through PgBouncer share one database: they must run one at a time')
    inUse = true
    t.after(() => { inUse = false })
    await shared.reset()
    return shared.url
  }

  storeContract('PostgresStore through PgBouncer (transaction mode)', async (t) => {
    const store = new PostgresStore(bouncer.url(await sharedDatabase(t)), { pooler: 'transaction' })
    t.after(() => store.close())
    return store
  })

  // Holds and orders: every write one transaction, no session state; two pools through the pooler for two instances.
  sellingContract('PostgresStore through PgBouncer (transaction mode)', async (t) => {
    const direct = await sharedDatabase(t)
    const open = (options: PostgresOptions = {}): PostgresStore => {
      const store = new PostgresStore(bouncer.url(direct), { ...options, pooler: 'transaction' })
      t.after(() => store.close())
      return store
    }
    const rows = async (sql: string): Promise<Array<Record<string, unknown>>> => {
      const client = new pg.Client({ connectionString: direct })
      await client.connect()
      try {
        return (await client.query<Record<string, unknown>>(sql)).rows
      } finally {
        await client.end()
      }
    }
    return {
      store: open(), peer: async (options) => open(options), rows, count: async (table) => Number((await rows(`SELECT count(*) AS n FROM ${table}`))[0]?.n),
      run: async (sql) => { await rows(sql) }
    }
  })

  describe('PostgresStore through PgBouncer', () => {
    /**
     * A migrated database's URLs on the test server and through the pooler: the shared one, or with `setting`, the
     * database's own default for new sessions (ALTER DATABASE ... SET, e.g. statement_timeout = '1s'), one of its own.
     */
    async function database (t: TestContext, setting?: string): Promise<{ direct: string, pooled: string }> {
      if (setting === undefined) {
        const direct = await sharedDatabase(t)
        return { direct, pooled: bouncer.url(direct) }
      }
      const direct = await tempPostgresDatabase(t)
      const store = new PostgresStore(direct)
      await store.schema.migrate().finally(() => store.close())
      await adminQuery(`ALTER DATABASE ${new URL(direct).pathname.slice(1)} SET ${setting}`)
      return { direct, pooled: bouncer.url(direct) }
    }

    /** A client of the test server itself (not through the pooler) that holds `lock` in an open transaction until the test ends. */
    async function holdLock (t: TestContext, direct: string, lock: string): Promise<void> {
      const locker = new pg.Client({ connectionString: direct })
      // The database is dropped (its sessions ended) after the test, maybe before this client is.
      locker.on('error', () => {})
      await locker.connect()
      t.after(() => locker.end().catch(() => {}))
      await locker.query('BEGIN')
      await locker.query(lock)
    }

    /** Runs `work`, which must fail as StoreUnavailableError because the server cancelled a statement at its timeout. */
    async function cancelledByServer (work: Promise<unknown>): Promise<number> {
      const started = Date.now()
      await assert.rejects(work, (error: unknown) => {
        assert.ok(error instanceof StoreUnavailableError, String(error))
        // 57014: the server's "canceling statement due to statement timeout", not the client giving up (no code).
        assert.equal((error.cause as { code?: unknown }).code, '57014', String(error.cause))
        return true
      })
      return Date.now() - started
    }

    test('when the store is opened through PgBouncer without the transaction pooler setting, then it fails with a configuration error naming DATABASE_POOLER=transaction', async (t) => {
      const { pooled } = await database(t)
      const store = new PostgresStore(pooled)
      t.after(() => store.close())
      for (const call of [() => store.schema.schemaStatus(), () => store.schema.migrate(), () => store.ping(), () => store.stock.listInventory()]) {
        await assert.rejects(call(), (error: unknown) => error instanceof ConfigError &&
          /refused the startup parameter "statement_timeout": set DATABASE_POOLER=transaction/.test(error.message))
      }
    })

    test('when instances migrate a new database through PgBouncer at once, then each version is applied exactly once', async (t) => {
      const url = bouncer.url(await tempPostgresDatabase(t))
      const stores = Array.from({ length: 5 }, () => new PostgresStore(url, { pooler: 'transaction', poolSize: 2 }))
      t.after(() => Promise.all(stores.map((s) => s.close())))
      const applied = await Promise.all(stores.map((s) => s.schema.migrate()))
      assert.equal(applied.reduce((a, b) => a + b, 0), MIGRATIONS.length)
      assert.equal((await stores[0]!.schema.schemaStatus()).version, MIGRATIONS.length)
    })

    test('when the server has no statement timeout of its own, then a single statement, a transaction and a listing that wait past the store\'s are cancelled by the server', async (t) => {
      const { direct, pooled } = await database(t)
      const store = new PostgresStore(pooled, { pooler: 'transaction', statementTimeoutMs: 300 })
      t.after(() => store.close())
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }], orders: [] })
      await holdLock(t, direct, 'LOCK TABLE inventory IN ACCESS EXCLUSIVE MODE')
      const waited = [
        await cancelledByServer(setStock(store, 1n, 5)),
        await cancelledByServer(store.stock.applyBatch({ changes: [{ petId: 1n, quantity: 6, expectedRevisions: null, reason: 'adjustment', note: null }],
          allowed: { min: 0, max: 1_000_000_000 }, batchId: 'b', keyId: null, requestId: null, at: new Date() })),
        await cancelledByServer((async () => { for await (const page of store.stock.inventoryPages(10)) assert.fail(`no page expected: ${String(page.version)}`) })())
      ]
      // The client-side timeout would have answered after 1300 ms (and without 57014).
      assert.ok(waited.every((ms) => ms < 1300), `waited ${waited.join(', ')} ms`)
    })

    test('when the server\'s own statement timeout is longer than the store\'s, then the store\'s still cuts a single statement off', async (t) => {
      const { direct, pooled } = await database(t, "statement_timeout = '60s'")
      const store = new PostgresStore(pooled, { pooler: 'transaction', statementTimeoutMs: 300 })
      t.after(() => store.close())
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }], orders: [] })
      await holdLock(t, direct, 'LOCK TABLE inventory IN ACCESS EXCLUSIVE MODE')
      const waited = await cancelledByServer(setStock(store, 1n, 5))
      assert.ok(waited < 1300, `waited ${waited} ms`)
    })

    test('when the server\'s own statement timeout is shorter than the store\'s, then it cuts single statements off, and the store\'s holds in transactions', async (t) => {
      const { direct, pooled } = await database(t, "statement_timeout = '200ms'")
      const store = new PostgresStore(pooled, { pooler: 'transaction', statementTimeoutMs: 1500 })
      t.after(() => store.close())
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }], orders: [] })
      await holdLock(t, direct, 'LOCK TABLE inventory IN ACCESS EXCLUSIVE MODE')
      const single = await cancelledByServer(setStock(store, 1n, 5))
      // The server's 200 ms, not the store's 1500 ms (both cancel with 57014): anything short of 1500 ms tells them apart,
      // however loaded the machine.
      assert.ok(single < 1450, `the single statement waited ${single} ms`)
      const batch = await cancelledByServer(store.stock.applyBatch({ changes: [{ petId: 1n, quantity: 6, expectedRevisions: null, reason: 'adjustment', note: null }],
        allowed: { min: 0, max: 1_000_000_000 }, batchId: 'b', keyId: null, requestId: null, at: new Date() }))
      assert.ok(batch >= 1400, `the transaction waited ${batch} ms, not the store's 1500`)
    })

    test('when the store has run a transaction, then the server connection it used is handed on with no setting of the store\'s left on it', async (t) => {
      const single = await startPgBouncer(t, { poolSize: 1 })
      if (single === null) return
      const direct = await sharedDatabase(t)
      const store = new PostgresStore(single.url(direct), { pooler: 'transaction', statementTimeoutMs: 1234 })
      t.after(() => store.close())
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }], orders: [] })
      const other = new pg.Client({ connectionString: single.url(direct) })
      other.on('error', () => {})
      await other.connect()
      t.after(() => other.end().catch(() => {}))
      // One server connection: the other client gets the very connection the store's transaction ran on.
      const { rows } = await other.query<{ statement_timeout: string }>('SHOW statement_timeout')
      assert.deepEqual(rows, [{ statement_timeout: '0' }])
    })

    test('when many changes arrive through a pooler with fewer server connections than the stores have clients, then every one lands once', async (t) => {
      const small = await startPgBouncer(t, { poolSize: 2 })
      if (small === null) return
      const url = small.url(await sharedDatabase(t))
      const [a, b] = [0, 1].map(() => new PostgresStore(url, { pooler: 'transaction', poolSize: 10 })) as [PostgresStore, PostgresStore]
      t.after(() => Promise.all([a.close(), b.close()]))
      await importData(a, { pets: [1, 2, 3].map((id) => ({ id: BigInt(id), name: `p${id}`, status: 'available' as const, quantity: 0 })), orders: [] })
      const changes = Array.from({ length: 120 }, (_, i) => (i % 2 === 0 ? a : b).stock.adjustQuantity({
        petId: BigInt(i % 3 + 1), delta: 1, expectedRevisions: null, reason: 'arrival', note: null, keyId: null, requestId: `r${i}`, at: new Date(),
        allowed: { min: 0, max: 1_000_000_000 }
      }))
      assert.deepEqual(new Set((await Promise.all(changes)).map((result) => result.status)), new Set(['updated']))
      assert.deepEqual((await b.stock.listInventory()).map((item) => item.quantity), [40, 40, 40])
      assert.equal((await a.stock.listChanges(null, 1000)).length, 3 + 120)
    })

    test('when two instances write stock concurrently through PgBouncer, then their writes are grouped in transactions, texts and keys intact', async (t) => {
      const { pooled } = await database(t)
      const [a, b] = [0, 1].map(() => new PostgresStore(pooled, { pooler: 'transaction' })) as [PostgresStore, PostgresStore]
      t.after(() => Promise.all([a.close(), b.close()]))
      await importData(a, { pets: [1, 2, 3, 4].map((id) => ({ id: BigInt(id), name: `p${id}`, status: 'available' as const, quantity: 0 })), orders: [] })
      const notes = ["it's", 'back\\slash \\\' end', '$1 $$ ; COMMIT; --', 'ünï 🐈']
      const claim = { scope: 'key_a', key: 'k-1', fingerprint: 'fp', expiresAt: new Date(Date.now() + 60_000) }
      const change = (petId: bigint, quantity: number, note: string | null, idempotency?: typeof claim) => ({
        petId, quantity, expectedRevisions: null, reason: 'adjustment' as const, note, keyId: null, requestId: null, at: new Date(), idempotency
      })
      const results = await Promise.all([
        ...notes.map((note, i) => (i % 2 === 0 ? a : b).stock.setQuantity(change(BigInt(i + 1), i + 1, note))),
        a.stock.setQuantity(change(1n, 50, null, claim)),
        a.stock.setQuantity(change(2n, 60, null, claim))
      ])
      assert.deepEqual(results.map((result) => result.status), ['updated', 'updated', 'updated', 'updated', 'updated', 'recorded'])
      assert.ok(a.stock.groupCommit.batchedWrites >= 4, JSON.stringify(a.stock.groupCommit))
      const feed = (await a.stock.listChanges(null, 100)).filter((c) => c.reason !== 'import')
      assert.deepEqual(feed.filter((c) => c.note !== null).map((c) => c.note).sort(), [...notes].sort())
      assert.deepEqual((await b.stock.listInventory()).map((item) => item.quantity), [50, 2, 3, 4])
    })
  })
}
