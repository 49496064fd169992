/**
 * What only the SQLite store does (the contracts of its areas run in ./<area>.contract.test.ts): its durability
 * pragmas, the file surviving a close, a locked file, and the group commit.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { StoreUnavailableError } from '../../src/errors.js'
import { MIGRATIONS } from '../../src/store/sqlite/migrations.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { tempDir, tempStore } from '../helpers/app.js'
import { setStock } from './helpers.js'
import { importData } from '../../src/domain/import.js'

describe('SqliteStore specifics', () => {
  function newStore (path: string, t: { after: (fn: () => unknown) => void }): SqliteStore {
    const store = new SqliteStore(path)
    t.after(() => store.close())
    return store
  }

  test('a new file is migrated once: the first migrate applies every version, the second none', async (t) => {
    const store = newStore(join(tempDir(t), 'fresh.db'), t)
    assert.equal(await store.schema.migrate(), MIGRATIONS.length)
    assert.equal(await store.schema.migrate(), 0)
  })

  test('the database file is in WAL mode', async (t) => {
    const path = join(tempDir(t), 'wal.db')
    const store = newStore(path, t)
    await store.schema.migrate()
    // journal_mode=WAL is stored in the file, so a separate connection sees it.
    const other = new Database(path, { readonly: true })
    t.after(() => other.close())
    assert.equal(other.pragma('journal_mode', { simple: true }), 'wal')
  })

  test('when opened, then the connection runs in WAL mode with synchronous=FULL', async (t) => {
    const store = await tempStore(t)
    assert.deepEqual(store.schema.durability(), { journalMode: 'wal', synchronous: 'FULL' })
  })

  test('data persists after close and reopen', async (t) => {
    const path = join(tempDir(t), 'persist.db')
    const first = newStore(path, t)
    await first.schema.migrate()
    await importData(first, {
      pets: [{ id: 2n ** 63n - 1n, name: 'big', status: 'sold', quantity: 5, tags: [{ id: -(2n ** 63n), name: 'min' }] }],
      orders: [{ id: 2n ** 53n + 1n, petId: 1n, quantity: 3, shipDate: '2026-11-20T10:00:00Z', status: 'approved', complete: true }]
    })
    await setStock(first, 2n ** 63n - 1n, 6)
    await first.keys.createApiKey({
      id: 'key_1', keyHash: 'h1', name: null, plan: 'free', perMinute: null, perDay: null, createdAt: new Date('2026-11-22T12:00:00Z')
    })
    await first.keys.revokeApiKey('key_1', new Date('2026-11-23T12:00:00Z'))
    await first.close()

    const second = newStore(path, t)
    assert.equal(await second.schema.migrate(), 0)
    assert.deepEqual(await second.stock.listInventory(), [{ petId: 2n ** 63n - 1n, quantity: 6, status: 'sold' }])
    assert.deepEqual(await second.catalog.getPet(2n ** 63n - 1n), { id: 2n ** 63n - 1n, name: 'big', status: 'sold', tags: [{ id: -(2n ** 63n), name: 'min' }] })
    assert.deepEqual(await second.catalog.listOrders({ afterId: null, limit: 10, status: null }), {
      orders: [{ id: 2n ** 53n + 1n, petId: 1n, quantity: 3, shipDate: '2026-11-20T10:00:00Z', status: 'approved', complete: true }],
      hasMore: false
    })
    assert.deepEqual(await second.keys.findApiKeyByHash('h1'), {
      id: 'key_1', name: null, plan: 'free', perMinute: null, perDay: null,
      createdAt: new Date('2026-11-22T12:00:00Z'), revokedAt: new Date('2026-11-23T12:00:00Z'), ban: null, scope: 'write', expiresAt: null,
      quotaId: 'key_1', replacedBy: null, lastUsedAt: null, lastDeprecatedUseAt: null
    })
  })

  test('close is idempotent', async (t) => {
    const store = newStore(join(tempDir(t), 'close.db'), t)
    await store.schema.migrate()
    await store.close()
    await store.close()
  })

  test('a second store on the same file sees committed writes', async (t) => {
    const path = join(tempDir(t), 'shared.db')
    const server = newStore(path, t)
    await server.schema.migrate()
    const cli = newStore(path, t)
    assert.equal(await cli.schema.migrate(), 0)
    await importData(cli, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 2 }], orders: [] })
    assert.deepEqual(await server.stock.listInventory(), [{ petId: 1n, quantity: 2, status: 'available' }])
    assert.deepEqual(await setStock(server, 1n, 3), { petId: 1n, quantity: 3, status: 'available' })
    assert.deepEqual(await cli.stock.listInventory(), [{ petId: 1n, quantity: 3, status: 'available' }])
  })
})

describe('SqliteStore when the database is locked', () => {
  test('when another connection holds the write lock past the busy timeout, then writes fail as StoreUnavailableError', async (t) => {
    const path = join(tempDir(t), 'locked.db')
    const store = new SqliteStore(path, { busyTimeoutMs: 50 })
    t.after(() => store.close())
    await store.schema.migrate()
    await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }], orders: [] })
    const other = new Database(path)
    t.after(() => other.close())
    other.exec('BEGIN IMMEDIATE')
    await assert.rejects(setStock(store, 1n, 5), StoreUnavailableError)
    other.exec('ROLLBACK')
    assert.equal((await setStock(store, 1n, 5))?.quantity, 5)
  })
})

describe('SqliteStore group commit', () => {
  test('when many updates arrive together, then each is answered after commit and all survive a reopen', async (t) => {
    const path = join(tempDir(t), 'group.db')
    const store = new SqliteStore(path)
    await store.schema.migrate()
    const pets = Array.from({ length: 50 }, (_, i) => ({ id: BigInt(i + 1), name: `p${i}`, status: 'available' as const, quantity: 0 }))
    await importData(store, { pets, orders: [] })
    const results = await Promise.all(pets.map((p, i) => setStock(store, p.id, i + 100)))
    assert.deepEqual(results.map((r) => r?.quantity), pets.map((_, i) => i + 100))
    await store.close()
    const reopened = new SqliteStore(path)
    t.after(() => reopened.close())
    assert.deepEqual((await reopened.stock.listInventory()).map((item) => item.quantity), pets.map((_, i) => i + 100))
  })

  test('when one update in a group fails, then only that caller gets the error', async (t) => {
    const store = await tempStore(t)
    await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 1 }, { id: 2n, name: 'b', status: 'available', quantity: 1 }], orders: [] })
    const [bad, good, missing] = await Promise.allSettled([setStock(store, 1n, -5), setStock(store, 2n, 7), setStock(store, 3n, 1)])
    assert.equal(bad.status, 'rejected')
    assert.deepEqual(good, { status: 'fulfilled', value: { petId: 2n, quantity: 7, status: 'available' } })
    assert.deepEqual(missing, { status: 'fulfilled', value: null })
    assert.deepEqual((await store.stock.listInventory()).map((item) => item.quantity), [1, 7])
    // The commit ran again without the failing update: the ledger holds each applied change once, the refused none.
    assert.deepEqual((await store.stock.stockHistory(2n, 10)).map((row) => row.quantity), [1, 7])
    assert.deepEqual((await store.stock.stockHistory(1n, 10)).map((row) => row.quantity), [1])
    const version = await store.stock.inventoryVersion()
    assert.equal((await setStock(store, 2n, 8))?.quantity, 8)
    assert.equal(await store.stock.inventoryVersion(), version + 1n, 'the version moved once per applied change')
  })
})
