/**
 * A rolling upgrade: instances of the previous release keep running (or start) while this release's migrations
 * are applied. Each release's migrations must keep the previous release working (expand now, contract in a later
 * release). Here the previous release's own store code, built from its git commit (test/helpers/release.ts),
 * reads and writes a store that this release has migrated, and this release reads what it wrote.
 *
 * When a release adds a migration, PREVIOUS_RELEASE moves to the last commit before it: the test then checks the
 * expand step of that migration the same way.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, test } from 'node:test'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { Store } from '../../src/store/store.js'
import { tempDir } from '../helpers/app.js'
import { ownDatabase, requirePostgres } from '../helpers/postgres.js'
import { releaseFromGit } from '../helpers/release.js'
import { importData } from '../../src/domain/import.js'

/** 6344baa: the last release before migration 9. */
const PREVIOUS_RELEASE = '6344baadd31cf9cb3fda0b730fa01eee8384d779'

/**
 * What this test calls of the previous release's Store (its src/store/types.ts: one interface then), with the fields it reads. That
 * code is built while the test runs, out of the compiler's sight: a call it no longer accepts fails at run time.
 */
interface PreviousStore {
  schemaStatus (): Promise<{ pending: unknown[], ahead: Array<{ version: number }> }>
  listInventory (): Promise<Array<{ petId: bigint, quantity: number, status: string }>>
  inventoryVersion (): Promise<bigint>
  getStockEntry (petId: bigint): Promise<{ quantity: number, revision: bigint, status: string } | null>
  setQuantity (stockChange: ReturnType<typeof change>): Promise<{ status: string }>
  importData (data: { pets: object[], orders: object[] }, options: { stockChange: ImportRule }): Promise<unknown>
  createApiKey (key: { id: string, keyHash: string, name: string, plan: string, perMinute: null, perDay: null, createdAt: Date }): Promise<void>
  banApiKey (id: string, ban: { since: Date, until: Date, seconds: number }): Promise<boolean>
  findApiKeyByHash (keyHash: string): Promise<{ id: string } | null>
  listApiKeys (): Promise<Array<{ id: string }>>
  stockHistory (petId: bigint, limit: number): Promise<Array<{ previousQuantity: number | null, quantity: number }>>
  close (): Promise<void>
}
/** Which stock change an import makes of a pet (the previous release's rule: quantities only). */
type ImportRule = (pet: { quantity?: number }, current: number | null) => { previous: number | null, quantity: number } | null
interface PreviousRelease {
  SqliteStore: new (path: string) => PreviousStore
  PostgresStore: new (url: string, options: { schema: string }) => PreviousStore
  importedStockChange: ImportRule
}

/** The stores and the import rule of the release extracted to `dir`, loaded by tsx as this release's are. */
async function loadRelease (dir: string | undefined): Promise<PreviousRelease | undefined> {
  if (dir === undefined) return undefined
  const load = (path: string) => import(pathToFileURL(join(dir, path)).href)
  const [{ SqliteStore }, { PostgresStore }, { importedStockChange }] = await Promise.all([
    load('src/store/sqlite/index.ts'), load('src/store/postgres/index.ts'), load('src/domain/inventory.ts')])
  return { SqliteStore, PostgresStore, importedStockChange }
}

const WHAT = 'the previous release on this release\'s schema'
const previousRelease = await loadRelease(releaseFromGit(PREVIOUS_RELEASE, WHAT))

const AT = new Date('2026-11-23T10:00:00.000Z')
const change = (petId: bigint, quantity: number, expectedRevisions: bigint[] | null = null) =>
  ({ petId, quantity, expectedRevisions, reason: 'arrival' as const, note: 'old release', keyId: 'key_old', requestId: 'req-old', at: AT })

/** The previous release's read and write paths on the migrated store, then this release reading the result. */
async function exercise (current: Store, previous: PreviousStore, previousImportRule: ImportRule): Promise<void> {
  await importData(current, { pets: [{ id: 1n, name: 'Rex', status: 'available', quantity: 2 }], orders: [] })
  // An instance of the previous release that was running when the store was migrated goes on reading and writing (one
  // started afterwards sees the store ahead of it and serves reads only).
  const status = await previous.schemaStatus()
  assert.deepEqual([status.pending.length, status.ahead.map((m) => m.version)], [0, [9, 10, 11, 12, 13]])

  // Reads.
  assert.deepEqual(await previous.listInventory(), [{ petId: 1n, quantity: 2, status: 'available' }])
  const version = await previous.inventoryVersion()
  const entry = await previous.getStockEntry(1n)
  assert.equal(entry?.quantity, 2)

  // Writes: a stock change with If-Match, an import, a key and its ban.
  const updated = await previous.setQuantity(change(1n, 5, [entry?.revision as bigint]))
  assert.equal(updated.status, 'updated')
  assert.ok(await previous.inventoryVersion() > version)
  await previous.importData({ pets: [{ id: 2n, name: 'Tom', status: 'pending', quantity: 1 }], orders: [] }, { stockChange: previousImportRule })
  await previous.createApiKey({ id: 'key_old', keyHash: 'hash-old', name: 'old', plan: 'free', perMinute: null, perDay: null, createdAt: AT })
  assert.equal(await previous.banApiKey('key_old', { since: AT, until: new Date('2030-01-01T00:00:00Z'), seconds: 900 }), true)
  // A key this release made (a scope, an expiry, a rotation) reads as a plain key there: the previous release enforces
  // none of it (docs/operating.md, "Upgrading"), but it reads and lists such keys without error.
  await current.keys.createApiKey({ id: 'key_new', keyHash: 'hash-new', name: 'new', plan: 'pro', perMinute: null, perDay: null, createdAt: AT, scope: 'read',
    expiresAt: new Date('2030-01-01T00:00:00Z') })
  assert.equal(await current.keys.rotateApiKey('key_new', { id: 'key_next', keyHash: 'hash-next', name: 'new', plan: 'pro', perMinute: null, perDay: null,
    createdAt: AT, scope: 'read', quotaId: 'key_new' }, new Date('2026-11-24T10:00:00.000Z')), 'rotated')
  assert.equal((await previous.findApiKeyByHash('hash-next'))?.id, 'key_next')
  assert.deepEqual((await previous.listApiKeys()).map((k) => k.id).sort(), ['key_new', 'key_next', 'key_old'])
  assert.deepEqual((await previous.stockHistory(1n, 10)).map((e) => [e.previousQuantity, e.quantity]), [[null, 2], [2, 5]])

  // This release reads what the previous one wrote, and carries on from it.
  assert.deepEqual((await current.stock.stockHistory(1n, 10)).map((e) => [e.previousQuantity, e.quantity, e.note]), [[null, 2, null], [2, 5, 'old release']])
  const result = await current.stock.setQuantity({ ...change(1n, 6), note: 'new release' })
  assert.equal(result.status, 'updated')
  assert.deepEqual((await previous.stockHistory(1n, 10)).map((e) => e.quantity), [2, 5, 6], 'and the previous release reads what this one wrote')
  const old = await current.keys.findApiKeyByHash('hash-old')
  assert.equal(old?.ban?.seconds, 900)
  assert.deepEqual([old?.scope, old?.expiresAt, old?.quotaId], ['write', null, 'key_old'], 'a key the previous release made has full access, as before')
  assert.deepEqual((await current.stock.listInventory()).map((i) => [i.petId, i.quantity]), [[1n, 6], [2n, 1]])

  // Migration 9: this release records an import's change of status in the ledger; the previous release reads that row
  // as a change of quantity that kept it, and its own rows read here with no status.
  await importData(current, { pets: [{ id: 2n, name: 'Tom', status: 'sold', quantity: 1 }], orders: [] })
  assert.deepEqual((await previous.stockHistory(2n, 10)).map((e) => [e.previousQuantity, e.quantity]), [[null, 1], [1, 1]])
  assert.deepEqual((await current.stock.stockHistory(2n, 10)).map((e) => [e.previousStatus, e.status]), [[null, null], ['pending', 'sold']])
  assert.deepEqual(await previous.getStockEntry(2n).then((e) => e?.status), 'sold')
}

if (previousRelease !== undefined) {
  describe(WHAT, () => {
    test('when the previous release\'s SQLite store reads and writes a file this release migrated, then both see the same, consistent data', async (t) => {
      const path = join(tempDir(t), 'shared.db')
      const current = new SqliteStore(path)
      await current.schema.migrate()
      const previous = new previousRelease.SqliteStore(path)
      t.after(async () => {
        await previous.close()
        await current.close()
      })
      await exercise(current, previous, previousRelease.importedStockChange)
    })
  })
}

if (previousRelease !== undefined && await requirePostgres('the previous release on this release\'s PostgreSQL schema')) {
  describe('the previous release on this release\'s PostgreSQL schema', () => {
    test('when the previous release\'s PostgreSQL store reads and writes a schema this release migrated, then both see the same data', async (t) => {
      // A database of its own, not a schema of the shared one: advisory locks are per database, and both releases
      // take their import lock under one key, so another test's import in the shared database held this one up.
      const { url, drop } = await ownDatabase()
      const schema = 'public'
      const current = new PostgresStore(url, { schema })
      await current.schema.migrate()
      const previous = new previousRelease.PostgresStore(url, { schema })
      t.after(async () => {
        await previous.close()
        await current.close()
        await drop()
      })
      await exercise(current, previous, previousRelease.importedStockChange)
    })
  })
}
