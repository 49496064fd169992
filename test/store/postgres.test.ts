/**
 * What only the PostgreSQL store does (the contracts of its areas run in ./<area>.contract.test.ts, each test in its
 * own schema): concurrent migrations, connection trouble reported as StoreUnavailableError.
 */
import assert from 'node:assert/strict'
import { setTimeout as pause } from 'node:timers/promises'
import { describe, test } from 'node:test'
import pg from 'pg'
import { StoreUnavailableError } from '../../src/errors.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { MIGRATIONS } from '../../src/store/postgres/migrations.js'
import { freePort } from '../cli/run.js'
import { adminQuery, lockWaiters, POSTGRES_URL, requirePostgres, schemaClient, tempPostgresDatabase, tempPostgresStore, tempSchema } from '../helpers/postgres.js'
import { waitFor } from '../helpers/wait.js'
import { setStock, stockChange } from './helpers.js'
import { importData } from '../../src/domain/import.js'

if (await requirePostgres('PostgreSQL store tests')) {
  describe('PostgresStore specifics', () => {
    test('when several instances migrate at once, then each version is applied exactly once', async (t) => {
      const schema = await tempSchema(t)
      const stores = Array.from({ length: 5 }, () => new PostgresStore(POSTGRES_URL, { schema, poolSize: 2 }))
      t.after(() => Promise.all(stores.map((s) => s.close())))
      const applied = await Promise.all(stores.map((s) => s.schema.migrate()))
      assert.equal(applied.reduce((a, b) => a + b, 0), MIGRATIONS.length)
      assert.equal(await stores[0]!.schema.migrate(), 0)
    })

    test('when another instance is committing the same idempotency key, then a change waits for it and applies nothing if it commits', async (t) => {
      const schema = await tempSchema(t)
      const store = await tempPostgresStore(t, { schema })
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 5 }], orders: [] })
      const other = await schemaClient(t, schema)
      const at = new Date('2026-11-23T12:00:00Z')
      const claim = { scope: 'key_a', key: 'k', fingerprint: 'fp', expiresAt: new Date(at.getTime() + 60_000) }
      const insert = `INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, created_at, expires_at)
        VALUES ('key_a', 'k', 'fp', '[]', $1, $2)`
      for (const [end, expected, quantity] of [['COMMIT', 'recorded', 5], ['ROLLBACK', 'updated', 6]] as const) {
        await other.query('DELETE FROM idempotency_keys')
        await other.query('BEGIN')
        await other.query(insert, [at, claim.expiresAt])
        let settled = false
        const change = store.stock.adjustQuantity({ petId: 1n, delta: 1, expectedRevisions: null, reason: 'arrival', note: null, keyId: 'key_a',
          requestId: 'r', at, allowed: { min: 0, max: 1_000_000_000 }, idempotency: claim }).finally(() => { settled = true })
        // Blocked in PostgreSQL on the key the other transaction holds (not merely not sent yet), and still waiting.
        await waitFor('the change waiting for the key', async () => await lockWaiters(schema) === 1, { intervalMs: 50 })
        assert.equal(settled, false, 'the change waits for the transaction holding the key')
        await other.query(end)
        assert.equal((await change).status, expected, end)
        assert.equal((await store.stock.getStockEntry(1n))?.quantity, quantity, end)
      }
    })

    test('when a writer that took its ledger id first commits last, then the feed serves both in commit order and misses neither', async (t) => {
      const schema = await tempSchema(t)
      const store = await tempPostgresStore(t, { schema })
      await importData(store, { pets: [1, 2].map((id) => ({ id: BigInt(id), name: `p${id}`, status: 'available' as const, quantity: 5 })), orders: [] })
      const before = await store.stock.listChanges(null, 100)
      assert.equal(before.length, 2)
      const slow = await schemaClient(t, schema)
      try {
        // A writer that takes its ledger row (and its identity value) first, and commits last.
        await slow.query('BEGIN')
        await slow.query(`INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, created_at) VALUES (1, 5, 6, 'arrival', now())`)
        await setStock(store, 2n, 9)
        const served = await store.stock.listChanges(before.at(-1)?.position ?? null, 100)
        assert.deepEqual(served.map((c) => [c.petId, c.quantity]), [[2n, 9]], 'a committed change is served at once, not held back by an open one')
        await slow.query('COMMIT')
        const next = await store.stock.listChanges(served.at(-1)?.position ?? null, 100)
        assert.deepEqual(next.map((c) => [c.petId, c.quantity]), [[1n, 6]], 'the lower id committed later comes later, and is not missed')
        assert.ok((next[0]?.id ?? 0n) < (served[0]?.id ?? 0n))
      } finally {
        await slow.query('ROLLBACK').catch(() => {})
      }
    })

    test('when a batch waits for a lock while another instance changes one of its pets, then the feed lists that pet\'s changes in the order they were made', async (t) => {
      const schema = await tempSchema(t)
      const [a, b] = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema })) as [PostgresStore, PostgresStore]
      t.after(() => Promise.all([a.close(), b.close()]))
      await a.schema.migrate()
      await importData(a, { pets: [1, 2, 3].map((id) => ({ id: BigInt(id), name: `p${id}`, status: 'available' as const, quantity: 0 })), orders: [] })
      const start = (await a.stock.listChanges(null, 100)).at(-1)?.position ?? null
      const locker = await schemaClient(t, schema)
      try {
        await locker.query('BEGIN')
        await locker.query('SELECT 1 FROM inventory WHERE pet_id = 2 FOR UPDATE')
        const set = (petId: bigint, quantity: number) => ({ petId, quantity, expectedRevisions: null, reason: 'adjustment' as const, note: null })
        // The batch locks pet 1, then waits for pet 2; meanwhile pet 3 is changed elsewhere and committed.
        const batch = a.stock.applyBatch({ changes: [set(1n, 11), set(2n, 12), set(3n, 13)], allowed: { min: 0, max: 1_000_000_000 }, batchId: 'b', keyId: null, requestId: null, at: new Date() })
        await waitFor('the batch waiting for pet 2', async () => await lockWaiters(schema) === 1, { intervalMs: 50 })
        await setStock(b, 3n, 99)
        await locker.query('COMMIT')
        assert.equal((await batch).status, 'updated')
      } finally {
        await locker.query('ROLLBACK').catch(() => {})
      }
      const feed = await a.stock.listChanges(start, 100)
      assert.deepEqual(feed.filter((c) => c.petId === 3n).map((c) => [c.previousQuantity, c.quantity]), [[0, 99], [99, 13]])
      // A copy that applies the feed in order ends where the store is.
      const copy = new Map<bigint, number>()
      for (const change of feed) copy.set(change.petId, change.quantity)
      for (const id of [1n, 2n, 3n]) assert.equal(copy.get(id), (await a.stock.getStockEntry(id))?.quantity)
    })

    test('when a second instance waited for the first one\'s write of the same batch key, then it answers recorded, not refused', async (t) => {
      const schema = await tempSchema(t)
      const [a, b] = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema })) as [PostgresStore, PostgresStore]
      t.after(() => Promise.all([a.close(), b.close()]))
      await a.schema.migrate()
      await importData(a, { pets: [1, 2].map((id) => ({ id: BigInt(id), name: `p${id}`, status: 'available' as const, quantity: 10 })), orders: [] })
      const revision = (await a.stock.getStockEntry(1n))?.revision ?? 0n
      const locker = await schemaClient(t, schema)
      await locker.query('BEGIN')
      await locker.query('SELECT 1 FROM inventory WHERE pet_id = 1 FOR UPDATE')
      const at = new Date('2026-11-23T12:00:00Z')
      const batch = {
        changes: [{ petId: 1n, delta: 1, expectedRevisions: [revision], reason: 'arrival' as const, note: null }, { petId: 2n, delta: 1, expectedRevisions: null, reason: 'arrival' as const, note: null }],
        allowed: { min: 0, max: 1_000_000_000 }, keyId: 'key_a', requestId: 'r', at,
        idempotency: { scope: 'key_a', key: 'same', fingerprint: 'fp', expiresAt: new Date(at.getTime() + 60_000) }
      }
      const first = a.stock.applyBatch({ ...batch, batchId: 'b-a' })
      await waitFor('the first batch waiting for pet 1', async () => await lockWaiters(schema) === 1, { intervalMs: 50 })
      const second = b.stock.applyBatch({ ...batch, batchId: 'b-b' })
      await waitFor('the second batch waiting too', async () => await lockWaiters(schema) === 2, { intervalMs: 50 })
      await locker.query('COMMIT')
      assert.equal((await first).status, 'updated')
      assert.deepEqual(await second, { status: 'recorded' }, 'its own batch applied, through the first instance')
      assert.equal((await a.stock.getStockEntry(1n))?.quantity, 11)
    })

    test('when a second import starts while a first one that created a pet has not committed, then the second records that pet\'s change of status', async (t) => {
      const schema = await tempSchema(t)
      const first = new PostgresStore(POSTGRES_URL, { schema })
      const second = new PostgresStore(POSTGRES_URL, { schema })
      t.after(() => Promise.all([first.close(), second.close()]))
      await first.schema.migrate()
      // Pet 1 (new, with stock) in the first chunk, then enough pets for the import to be still running when the
      // second import starts, from the first one's progress report after that chunk.
      const pets = [{ id: 1n, name: 'new', status: 'available' as const, quantity: 5 },
        ...Array.from({ length: 20_000 }, (_, i) => ({ id: BigInt(i + 100), name: `p${i}`, status: 'available' as const }))]
      let secondImport: Promise<unknown> | null = null
      await importData(first, { pets, orders: [] }, {
        onProgress: () => { secondImport ??= importData(second, { pets: [{ id: 1n, name: 'new', status: 'sold' }], orders: [] }) }
      })
      await secondImport
      assert.deepEqual((await first.stock.listChanges(null, 10)).map((c) => [c.petId, c.previousQuantity, c.quantity, c.previousStatus, c.status]), [
        [1n, null, 5, null, 'available'],
        [1n, 5, 5, 'available', 'sold']
      ])
    })

    test('when stock is changed while a large import writes the same pets, then neither deadlocks', async (t) => {
      // A long statement timeout: a PATCH may wait for the whole import (that is the point), never for a deadlock.
      const store = await tempPostgresStore(t, { poolSize: 6, statementTimeoutMs: 120_000 })
      // Pets in the third chunk (5,000 pets a chunk) with stock, changed in a loop while the import writes them.
      const pets = Array.from({ length: 12_000 }, (_, i) => ({ id: BigInt(i + 1), name: `p${i}`, status: 'available' as const, quantity: 1 }))
      await importData(store, { pets: pets.slice(11_000), orders: [] })
      let importing = true
      const writers = [11_001n, 11_002n, 11_003n].map(async (petId) => {
        let writes = 0
        while (importing || writes === 0) {
          const result = await store.stock.setQuantity(stockChange(petId, writes % 100))
          assert.equal(result.status, 'updated')
          writes++
        }
        return writes
      })
      try {
        for (let round = 0; round < 3; round++) await importData(store, { pets: pets.map((pet) => ({ ...pet, quantity: round + 2 })), orders: [] })
      } finally {
        importing = false
      }
      assert.ok((await Promise.all(writers)).every((writes) => writes > 0))
    })

    test('when an order placed through the API moves while an import bringing the same order id is under way, then neither deadlocks', async (t) => {
      const schema = await tempSchema(t)
      const store = await tempPostgresStore(t, { schema, poolSize: 6, statementTimeoutMs: 20_000 })
      await importData(store, { pets: [3, 4].map((id) => ({ id: BigInt(id), name: `p${id}`, status: 'available' as const, quantity: 5 })), orders: [] })
      const at = new Date()
      const placed = await store.selling.placeHold({
        id: 'hold_aaaaaaaaaaaaaaaaaaaa', lines: [{ petId: 3n, quantity: 1 }], reference: null, expiresAt: null, order: { shipDate: '2026-12-01T00:00:00Z' },
        caps: { activeHolds: 10, heldUnits: 100 }, quotaId: 'quota_a', keyId: 'key_a', requestId: 'r1', at
      })
      if (placed.status !== 'placed' || placed.order === undefined) assert.fail(`placed: ${placed.status}`)
      const orderId = placed.order.id
      // Another transaction holds pet 4's row: the import stops there, once it holds what it locks first.
      const other = await schemaClient(t, schema)
      await other.query('BEGIN')
      await other.query('SELECT id FROM pets WHERE id = 4 FOR UPDATE')
      const imported = importData(store, {
        pets: [3, 4].map((id) => ({ id: BigInt(id), name: `p${id}`, status: 'available' as const, quantity: 7 })),
        orders: [{ id: orderId, petId: 3n, quantity: 1, shipDate: '2026-12-01T00:00:00Z', status: 'placed', complete: false }]
      })
      await waitFor('the import waiting for pet 4', async () => await lockWaiters(schema) === 1, { intervalMs: 50 })
      const delivered = store.selling.moveOrder({ orderId, to: 'delivered', quotaId: 'quota_a', keyId: 'key_a', requestId: 'r2', at })
      await waitFor('the delivery waiting for the import', async () => await lockWaiters(schema) === 2, { intervalMs: 50 })
      await other.query('COMMIT')
      const [importResult, moved] = await Promise.all([imported, delivered])
      assert.deepEqual(importResult.keptOrders, [orderId], 'the order placed through the API is left as it is')
      assert.equal(moved.status, 'moved')
      assert.equal((await store.stock.getStockEntry(3n))?.quantity, 6, 'the import\'s 7, less the unit delivered after it')
    })

    test('when a lapsed hold\'s row is held by another transaction, then a placement counts its units as held and does not wait for it', async (t) => {
      const schema = await tempSchema(t)
      const store = await tempPostgresStore(t, { schema, statementTimeoutMs: 20_000 })
      await importData(store, { pets: [{ id: 1n, name: 'p1', status: 'available', quantity: 1 }], orders: [] })
      const at = new Date('2026-11-27T12:00:00Z')
      const hold = (id: string, placedAt: Date, expiresAt: Date) => ({
        id, lines: [{ petId: 1n, quantity: 1 }], reference: null, expiresAt, caps: { activeHolds: 10, heldUnits: 100 },
        quotaId: 'quota_a', keyId: 'key_a', requestId: 'r', at: placedAt
      })
      assert.equal((await store.selling.placeHold(hold('hold_aaaaaaaaaaaaaaaaaaaa', at, new Date(at.getTime() + 60_000)))).status, 'placed')
      // A confirmation of the lapsed hold that read its instant before the expiry, and holds its row while it waits.
      const other = await schemaClient(t, schema)
      await other.query('BEGIN')
      await other.query("SELECT id FROM holds WHERE id = 'hold_aaaaaaaaaaaaaaaaaaaa' FOR UPDATE")
      const later = new Date(at.getTime() + 120_000)
      const refused = await store.selling.placeHold(hold('hold_bbbbbbbbbbbbbbbbbbbb', later, new Date(later.getTime() + 60_000)))
      assert.deepEqual(refused, { status: 'insufficient', shortages: [{ petId: 1n, requested: 1, available: 0 }] }, 'its fate is not known yet')
      await other.query('ROLLBACK')
      const granted = await store.selling.placeHold(hold('hold_cccccccccccccccccccc', later, new Date(later.getTime() + 60_000)))
      assert.equal(granted.status, 'placed')
      assert.equal((await store.selling.getHold('hold_aaaaaaaaaaaaaaaaaaaa'))?.state, 'expired', 'recorded by the placement that took its unit')
    })

    test('when a placement records a lapsed hold that also holds other pets, then it writes their events under their locks, or leaves the hold counted', async (t) => {
      const schema = await tempSchema(t)
      const store = await tempPostgresStore(t, { schema, statementTimeoutMs: 20_000 })
      await importData(store, { pets: [{ id: 1n, name: 'p1', status: 'available', quantity: 1 }, { id: 2n, name: 'p2', status: 'available', quantity: 5 }], orders: [] })
      const at = new Date('2026-11-27T12:00:00Z')
      const later = new Date(at.getTime() + 120_000)
      const hold = (id: string, quotaId: string, petId: bigint) => ({
        id, lines: [{ petId, quantity: 1 }], reference: null, expiresAt: new Date(later.getTime() + 600_000), caps: { activeHolds: 10, heldUnits: 100 },
        quotaId, keyId: 'key_a', requestId: 'r', at: later
      })
      // A holds a unit of pets 1 and 2 and lapses a minute in.
      const a = await store.selling.placeHold({ ...hold('hold_aaaaaaaaaaaaaaaaaaaa', 'quota_a', 1n), lines: [{ petId: 1n, quantity: 1 }, { petId: 2n, quantity: 1 }],
        expiresAt: new Date(at.getTime() + 60_000), at })
      assert.equal(a.status, 'placed')
      const other = await schemaClient(t, schema)

      // Pet 2's entry held elsewhere: a placement on pet 1 cannot write A's pet-2 event with its figures, so it leaves A
      // unrecorded and counts its unit of pet 1 as held.
      await other.query('BEGIN')
      await other.query('SELECT pet_id FROM inventory WHERE pet_id = 2 FOR UPDATE')
      const refused = await store.selling.placeHold(hold('hold_bbbbbbbbbbbbbbbbbbbb', 'quota_b', 1n))
      assert.deepEqual(refused, { status: 'insufficient', shortages: [{ petId: 1n, requested: 1, available: 0 }] })
      await other.query('ROLLBACK')

      // Otherwise it takes pet 2's lock too: a write on pet 2 waits for it, and the feed's last figures of pet 2 are true.
      await other.query('BEGIN')
      await other.query('SELECT pg_advisory_xact_lock(726502, hashtext($1))', ['quota_x'])
      const placing = store.selling.placeHold(hold('hold_xxxxxxxxxxxxxxxxxxxx', 'quota_x', 1n))
      await waitFor('the placement waiting for its quota', async () =>
        (await other.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0]?.n === 1, { intervalMs: 50 })
      let written = false
      const write = store.stock.setQuantity(stockChange(2n, 9)).finally(() => { written = true })
      await pause(300)
      assert.equal(written, false, 'the write on pet 2 waits for the placement that recorded A')
      await other.query('COMMIT')
      assert.equal((await placing).status, 'placed')
      assert.equal((await write).status, 'updated')
      assert.equal((await store.selling.getHold('hold_aaaaaaaaaaaaaaaaaaaa'))?.state, 'expired')
      const feed = await store.stock.listChanges(null, 100, ['inventory.changed', 'hold.placed', 'hold.expired'])
      const last = feed.filter((change) => change.petId === 2n).at(-1)
      assert.deepEqual([last?.quantity, (last as { held?: number } | undefined)?.held ?? 0], [9, 0])
    })

    test('when the server cannot be reached, then calls fail fast with StoreUnavailableError', async (t) => {
      const port = await freePort()
      const store = new PostgresStore(`postgres://postgres@127.0.0.1:${port}/test`, { connectTimeoutMs: 500 })
      t.after(() => store.close())
      const started = Date.now()
      await assert.rejects(store.ping(), StoreUnavailableError)
      await assert.rejects(store.stock.listInventory(), StoreUnavailableError)
      await assert.rejects(store.schema.migrate(), StoreUnavailableError)
      // Refused at once (at worst three 500 ms connect timeouts); the bound allows a loaded machine, not a hang.
      assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`)
    })

    test('when a statement waits past the statement timeout, then it fails as StoreUnavailableError and changes nothing', async (t) => {
      const schema = await tempSchema(t)
      const store = await tempPostgresStore(t, { schema, statementTimeoutMs: 200 })
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }], orders: [] })
      const locker = await schemaClient(t, schema)
      await locker.query('BEGIN')
      await locker.query('LOCK TABLE inventory IN ACCESS EXCLUSIVE MODE')
      const started = Date.now()
      await assert.rejects(setStock(store, 1n, 5), StoreUnavailableError)
      // The lock is held until the ROLLBACK below: only the 200 ms statement timeout ends the wait (on a loaded machine,
      // within seconds).
      assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`)
      await locker.query('ROLLBACK')
      assert.deepEqual(await store.stock.listInventory(), [{ petId: 1n, quantity: 1, status: 'available' }])
    })

    test('when its connection is terminated while a listing waits between two pages, then the listing fails as StoreUnavailableError and the process and the store go on', async (t) => {
      // A database of its own: every connection to it is the store's, so terminating them touches no other test.
      const url = await tempPostgresDatabase(t)
      const store = new PostgresStore(url, { poolSize: 2 })
      t.after(() => store.close())
      await store.schema.migrate()
      await importData(store, { pets: [1n, 2n].map((id) => ({ id, name: 'a', status: 'available' as const, quantity: 1 })), orders: [] })
      const pages = store.stock.inventoryPages(1)
      assert.equal((await pages.next()).done, false)
      // The listing's client is checked out, idle in its transaction, no statement running: what chaos met (the
      // server's notice of the end then came as an 'error' event on the client, which nothing listened for).
      const database = new URL(url).pathname.slice(1)
      await adminQuery(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${database}' AND pid <> pg_backend_pid()`)
      const admin = new pg.Client({ connectionString: POSTGRES_URL })
      await admin.connect()
      t.after(() => admin.end())
      await waitFor('the terminated backends gone', async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE datname = $1', [database])).rowCount === 0)
      // The end has reached the client's socket by now; give its events a turn (the 'error' event is the point: it
      // must come before the next statement, and nothing outside the client shows that it came).
      await pause(100)
      await assert.rejects(pages.next(), StoreUnavailableError)
      assert.deepEqual((await store.stock.listInventory()).map((item) => item.petId), [1n, 2n], 'the store serves again on a new connection')
    })
  })
}
