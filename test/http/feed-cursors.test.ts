/**
 * Cursors of the change feed are checked, not trusted, on the feed and on the stream (`after` and `Last-Event-ID`),
 * on both stores: a place past the feed's last change was never issued (400), and a place of a history the store no
 * longer has after it, or of an epoch it never had, is 410 `cursor_expired` with the Error body, never read as
 * whatever change has that place now. A place the store's history still holds keeps working across a new epoch.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { createClient, PetstoreError } from '../../client/index.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, pet, tempDir, tempStore } from '../helpers/app.js'
import { adminQuery, POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'

interface Change { changeId: number, petId: number, quantity: number, cursor: string }
interface App { app: FastifyInstance, key: string, store: Store, base: string }

const cursorOf = (text: string): string => Buffer.from(text).toString('base64url')

/** The place and epoch a feed cursor names (read here, not with the service's code). */
function feedPlace (cursor: string): { order: bigint, id: bigint, epoch: string | null } {
  const text = Buffer.from(cursor, 'base64url').toString()
  const match = /^(?:f2:([0-9a-f]{16}):|f1:)(\d+)\.(\d+)$/.exec(text)
  assert.ok(match !== null, `a feed cursor: ${text}`)
  return { epoch: match[1] ?? null, order: BigInt(match[2] as string), id: BigInt(match[3] as string) }
}

async function appOn (t: TestContext, store: Store): Promise<App> {
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0' }), { store, logger: false })
  t.after(() => app.close())
  const base = await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, store, base, key: await newKey(store, 'enterprise') }
}

async function patch ({ app, key }: App, petId: number, quantity: number): Promise<void> {
  const res = await app.inject({ method: 'PATCH', url: `/v1/inventory/${petId}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: { quantity } })
  assert.equal(res.statusCode, 200, res.body)
}

async function feed ({ app, key }: App, after?: string): Promise<Change[]> {
  const res = await app.inject({ method: 'GET', url: `/v1/inventory/changes?limit=1000${after === undefined ? '' : `&after=${after}`}`, headers: auth(key) })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

/** What the feed, the stream's `after` and its `Last-Event-ID` each answer for `cursor`: [status, code] three times. */
async function answers ({ base, key }: App, cursor: string): Promise<Array<[number, string, number]>> {
  // Over HTTP: a stream that wrongly accepted the cursor answers 200 and stays open, which fetch shows at once.
  return await Promise.all([
    [`/v1/inventory/changes?after=${cursor}`, {}],
    [`/v1/inventory/changes/stream?after=${cursor}`, {}],
    ['/v1/inventory/changes/stream', { 'last-event-id': cursor }]
  ].map(async ([path, headers]): Promise<[number, string, number]> => {
    const res = await fetch(`${base}${path as string}`, { headers: { ...auth(key), ...headers as Record<string, string> } })
    if (res.status === 200) {
      await res.body?.cancel()
      return [200, 'accepted', 200]
    }
    const body = await res.json() as { code: string, message: string, status: number }
    assert.equal(typeof body.message, 'string', 'the Error body')
    return [res.status, body.code, body.status]
  }))
}

const thrice = (status: number, code: string): Array<[number, string, number]> => [[status, code, status], [status, code, status], [status, code, status]]

/** The tests, on a fresh, migrated store made by `open`. */
function cursorChecks (name: string, open: (t: TestContext) => Promise<Store>) {
  describe(`feed cursors on ${name}`, () => {
    test('when a cursor points past the feed\'s last change (a forged f1:<order>.9223372036854775807 among them), then the feed and the stream (after and Last-Event-ID) answer 400', async (t) => {
      const app = await appOn(t, await open(t))
      await importData(app.store, { pets: [pet(1, { quantity: 1 }), pet(2, { quantity: 2 })], orders: [] })
      await patch(app, 1, 5)
      const changes = await feed(app)
      const last = changes.at(-1) as Change
      const head = feedPlace(last.cursor)
      const epoch = head.epoch as string
      for (const forged of [
        // On SQLite (order 0) the one of the report.
        cursorOf(`f1:${head.order}.9223372036854775807`),
        cursorOf(`f2:${epoch}:${head.order}.${head.id + 1n}`),
        cursorOf(`f2:${epoch}:${head.order + 1n}.0`),
        cursorOf(`f2:${epoch}:9223372036854775807.9223372036854775807`)
      ]) {
        assert.deepEqual(await answers(app, forged), thrice(400, 'invalid_request'), Buffer.from(forged, 'base64url').toString())
      }
      // The cursors the feed issued are good, the last one too (caught up).
      assert.deepEqual(await feed(app, last.cursor), [])
      assert.deepEqual((await feed(app, changes[0]?.cursor)).map((c) => c.quantity), [2, 5])
    })

    test('when a cursor names an epoch this store never had, then the feed and the stream answer 410 cursor_expired', async (t) => {
      const app = await appOn(t, await open(t))
      await importData(app.store, { pets: [pet(1, { quantity: 1 })], orders: [] })
      const [only] = await feed(app)
      const place = feedPlace(only?.cursor as string)
      const elsewhere = cursorOf(`f2:0123456789abcdef:${place.order}.${place.id}`)
      assert.deepEqual(await answers(app, elsewhere), thrice(410, 'cursor_expired'))
      const res = await app.app.inject({ method: 'GET', url: `/v1/inventory/changes?after=${elsewhere}`, headers: auth(app.key) })
      assert.match(res.json<{ message: string }>().message, /GET \/v1\/inventory .*Changes-Cursor/, 'it says how to resync')
    })
  })
}

cursorChecks('SQLite', tempStore)

describe('feed cursors across a restore (SQLite)', () => {
  test('when a copy of the store is put in service, then cursors up to the copy\'s last change keep working there and cursors past it are 410', async (t) => {
    const original = await appOn(t, await tempStore(t))
    await importData(original.store, { pets: [pet(1, { quantity: 1 }), pet(2, { quantity: 123 }), pet(4, { quantity: 2 })], orders: [] })
    await patch(original, 1, 3)
    const copyPath = join(tempDir(t), 'copy.db')
    await (original.store as SqliteStore).schema.copyTo(copyPath)
    await patch(original, 2, 127)
    const before = await feed(original)
    const atBackup = before.at(-2) as Change
    const pastBackup = before.at(-1) as Change

    const copy = new SqliteStore(copyPath)
    t.after(() => copy.close())
    const restored = await appOn(t, copy)
    await patch(restored, 4, 7)
    const after = await feed(restored)
    const made = after.at(-1) as Change
    assert.equal(made.changeId, pastBackup.changeId, 'the same change id as the change the restore undid')
    assert.ok(!before.some((c) => c.cursor === made.cursor), 'a cursor never issued before')
    assert.deepEqual(await answers(restored, pastBackup.cursor), thrice(410, 'cursor_expired'))
    assert.deepEqual((await feed(restored, atBackup.cursor)).map((c) => [c.petId, c.quantity]), [[4, 7]], 'from the backup\'s last change on: the new change, nothing lost')

    // The typed client throws the 410 (with its code) instead of retrying or reconnecting for ever.
    const client = createClient({ baseUrl: restored.base, apiKey: restored.key, sleep: async () => {} })
    const expired = (error: unknown): boolean => error instanceof PetstoreError && error.status === 410 && error.code === 'cursor_expired'
    await assert.rejects(client.listInventoryChanges({ after: pastBackup.cursor }), expired)
    await assert.rejects(async () => { for await (const change of client.streamChanges({ after: pastBackup.cursor })) void change }, expired)
  })
})

if (await requirePostgres('feed cursors on PostgreSQL')) {
  cursorChecks('PostgreSQL', async (t) => {
    const schema = await tempSchema(t)
    const store = new PostgresStore(POSTGRES_URL, { schema })
    t.after(() => store.close())
    await store.schema.migrate()
    return store
  })

  describe('feed cursors across a new epoch (PostgreSQL)', () => {
    test('when the store begins a new epoch (confirmed on another database), then cursors of the old one up to its end keep working, and past it are 410', async (t) => {
      const schema = await tempSchema(t)
      const store = new PostgresStore(POSTGRES_URL, { schema })
      t.after(() => store.close())
      await store.schema.migrate()
      await store.schema.confirmEpoch()
      const app = await appOn(t, store)
      await importData(store, { pets: [pet(1, { quantity: 1 })], orders: [] })
      await patch(app, 1, 2)
      const old = (await feed(app)).at(-1) as Change
      // As if the store were now on another database (what a pg_restore gives it): its recorded oid is another.
      await adminQuery(`UPDATE ${schema}.store_epochs SET database_oid = database_oid + 1`)
      assert.equal((await store.schema.confirmEpoch()).started, true)
      await patch(app, 1, 3)
      assert.deepEqual((await feed(app, old.cursor)).map((c) => c.quantity), [3], 'the old epoch\'s cursor up to its end')
      const place = feedPlace(old.cursor)
      const pastEnd = cursorOf(`f2:${place.epoch}:${place.order + 1n}.0`)
      assert.deepEqual(await answers(app, pastEnd), thrice(410, 'cursor_expired'), 'a place of the old epoch past where it ended')
    })
  })
}
