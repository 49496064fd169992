/**
 * Store epochs: a store's history gets a new generation whenever it may have forked, so that a change made after a
 * restore never takes the event id or cursor of a change the restore undid. SQLite: a copy made by `petstore backup`
 * or `restore` (marked) opened as the store. PostgreSQL: another database (a real pg_dump and pg_restore here) or
 * another WAL timeline (a promoted replica). And a cursor is checked against the history it names.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import pg from 'pg'
import { importData } from '../../src/domain/import.js'
import { checkPlace, CursorAheadError, CursorExpiredError, feedCursor, feedPlace } from '../../src/domain/feed.js'
import { eventId } from '../../src/domain/webhooks.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { COPY_MARK } from '../../src/store/sqlite/database.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { FeedChange } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'
import { buildSqlite, SQLITE_SCHEMAS } from '../fixtures/landed-schemas.js'
import { pet, tempDir, tempStore } from '../helpers/app.js'
import { adminQuery, POSTGRES_URL, requirePostgres, tempPostgresDatabase, tempSchema } from '../helpers/postgres.js'
import { requireService } from '../helpers/services.js'
import { stockChange } from './helpers.js'

const place = (change: FeedChange) => ({ ...change.position, epoch: change.epoch })
const all = async (store: Store): Promise<FeedChange[]> => await store.stock.listChanges(null, 1000)

/** Sets pet 1's stock, and answers the change the feed then ends with. */
async function change (store: Store, quantity: number): Promise<FeedChange> {
  assert.equal((await store.stock.setQuantity(stockChange(1n, quantity))).status, 'updated')
  return (await all(store)).at(-1) as FeedChange
}

describe('SQLite store epochs', () => {
  test('when a copy made by backup is opened as the store, then a new epoch begins after its last change, once, and the original keeps its own', async (t) => {
    const original = await tempStore(t)
    await importData(original, { pets: [pet(1, { quantity: 1 }), pet(2), pet(3)], orders: [] })
    const [first] = (await original.stock.feedHistory()).epochs
    assert.equal(first?.reason, 'created')
    assert.deepEqual(first?.after, { order: 0n, id: 0n })
    const copyPath = join(tempDir(t), 'copy.db')
    await original.schema.copyTo(copyPath)
    const lost = await change(original, 10)

    const copy = new SqliteStore(copyPath)
    t.after(() => copy.close())
    const { epochs } = await copy.stock.feedHistory()
    assert.deepEqual(epochs.map((e) => [e.epoch === first?.epoch, e.reason, e.after.id]), [[true, 'created', 0n], [false, 'restored', 3n]])
    const confirmed = await copy.schema.confirmEpoch()
    assert.deepEqual([confirmed.started, confirmed.epoch.epoch], [true, epochs[1]?.epoch])
    assert.equal((await copy.schema.confirmEpoch()).started, false, 'reported once')
    const made = await change(copy, 20)
    assert.equal(made.id, lost.id, 'the restored ledger gives the next change the same id as the one the restore undid')
    assert.notEqual(eventId(made), eventId(lost))
    assert.notEqual(feedCursor(place(made)), feedCursor(place(lost)))
    assert.deepEqual((await all(copy)).slice(0, 3).map((c) => c.epoch), [first?.epoch, first?.epoch, first?.epoch], 'the changes before the copy keep their epoch')

    // Opened again, the copy is the store now: no further epoch.
    await copy.close()
    const reopened = new SqliteStore(copyPath)
    t.after(() => reopened.close())
    assert.equal((await reopened.stock.feedHistory()).epochs.length, 2)
    assert.equal((await original.stock.feedHistory()).epochs.length, 1)

    // The copy's history holds the original's first epoch up to the copy's last change, and no further.
    const history = await reopened.stock.feedHistory()
    checkPlace(history, place((await all(original))[2] as FeedChange))
    assert.throws(() => { checkPlace(history, place(lost)) }, CursorExpiredError)
    assert.throws(() => { checkPlace(history, { ...place(made), id: made.id + 1n }) }, CursorAheadError)
    assert.throws(() => { checkPlace(history, { order: 0n, id: 1n, epoch: 'ffffffffffffffff' }) }, CursorExpiredError)
  })

  test('when the operator says the store was restored (migrate --restored), then a new epoch begins even in an unmarked file', async (t) => {
    const store = await tempStore(t)
    await importData(store, { pets: [pet(1)], orders: [] })
    assert.equal((await store.schema.confirmEpoch()).started, false)
    const confirmed = await store.schema.confirmEpoch({ restored: true })
    assert.deepEqual([confirmed.started, confirmed.epoch.reason, confirmed.epoch.after.id], [true, 'restored', 1n])
  })

  test('when a marked copy of a store from before epochs is migrated, then it gets its first epoch and a new one after it, and its f1 cursors stay good', async (t) => {
    const path = join(tempDir(t), 'landed.db')
    buildSqlite(path, SQLITE_SCHEMAS.at(-1) as typeof SQLITE_SCHEMAS[number])
    const db = new Database(path)
    db.pragma(`user_version = ${COPY_MARK}`)
    db.close()
    const store = new SqliteStore(path)
    t.after(() => store.close())
    await store.schema.migrate()
    const { epochs, head } = await store.stock.feedHistory()
    assert.deepEqual(epochs.map((e) => [e.reason, e.after.id]), [['upgraded', 6n], ['restored', 6n]])
    const changes = await all(store)
    assert.ok(changes.every((c) => c.epoch === null), 'the changes from before epochs keep their earlier ids and cursors')
    assert.equal(eventId(changes[0] as FeedChange), 'evt_1')
    assert.match(Buffer.from(feedCursor(place(changes[5] as FeedChange)), 'base64url').toString(), /^f1:0\.6$/)
    checkPlace({ epochs, head }, feedPlace(feedCursor(place(changes[5] as FeedChange))))
    const made = await change(store, 9)
    assert.equal(made.epoch, epochs[1]?.epoch)
    assert.equal(eventId(made), `evt_${epochs[1]?.epoch}_7`)
  })
})

/** The epochs' identity columns and the feed clock's timeline, read beside the store. */
async function identity (url: string, schema?: string): Promise<{ epochs: Array<{ reason: string, system_identifier: string | null, database_oid: string | null, timeline: string | null }>, clock: string | null }> {
  const client = new pg.Client({ connectionString: url, ...(schema === undefined ? {} : { options: `-c search_path=${schema}` }) })
  await client.connect()
  try {
    const { rows: epochs } = await client.query('SELECT reason, system_identifier, database_oid::text, timeline::text FROM store_epochs ORDER BY seq')
    const { rows: [clock] } = await client.query<{ timeline: string | null }>('SELECT timeline::text FROM feed_clock')
    return { epochs, clock: clock?.timeline ?? null }
  } finally {
    await client.end()
  }
}

function postgresTools (): boolean {
  return ['pg_dump', 'pg_restore'].every((tool) => spawnSync(tool, ['--version']).status === 0)
}

async function storeOn (t: TestContext, url: string): Promise<PostgresStore> {
  const store = new PostgresStore(url)
  t.after(() => store.close())
  return store
}

if (await requirePostgres('PostgreSQL store epochs')) {
  // Beside the server, its client tools (Debian's postgresql-client, which the server package brings).
  const dumpAndRestore = await requireService('pg_dump and pg_restore', 'PATH', async () => postgresTools(), 'the pg_dump and pg_restore test', 'PATH')
  describe('PostgreSQL store epochs', () => {
    test('when a store confirms its epoch, then it records what identifies the database, and confirming again starts nothing', async (t) => {
      const url = await tempPostgresDatabase(t)
      const store = await storeOn(t, url)
      await store.schema.migrate()
      const first = await store.schema.confirmEpoch()
      assert.deepEqual([first.started, first.epoch.reason, first.unreadable], [false, 'created', []])
      const recorded = await identity(url)
      const [epoch] = recorded.epochs
      assert.match(String(epoch?.system_identifier), /^\d+$/)
      assert.match(String(epoch?.database_oid), /^\d+$/)
      assert.equal(epoch?.timeline, recorded.clock)
      assert.ok(recorded.clock !== null, 'the commit trigger now checks the timeline')
      await importData(store, { pets: [pet(1)], orders: [] })
      assert.equal((await store.schema.confirmEpoch()).started, false)
      assert.equal((await store.stock.feedHistory()).epochs.length, 1)
    })

    test('when a store is restored with pg_dump and pg_restore into another database, then the first confirm there starts a new epoch after the dump\'s last change', { skip: !dumpAndRestore }, async (t) => {
      const url = await tempPostgresDatabase(t)
      const store = await storeOn(t, url)
      await store.schema.migrate()
      await store.schema.confirmEpoch()
      await importData(store, { pets: [pet(1, { quantity: 1 }), pet(2)], orders: [] })
      const dumped = await change(store, 5)
      const dump = join(tempDir(t), 'petstore.dump')
      const run = (tool: string, args: string[]): void => {
        const result = spawnSync(tool, args, { encoding: 'utf8' })
        assert.equal(result.status, 0, `${tool}: ${result.stderr}`)
      }
      run('pg_dump', ['--format=custom', `--file=${dump}`, `--dbname=${url}`])
      const lost = await change(store, 6)

      const restoredUrl = await tempPostgresDatabase(t)
      run('pg_restore', ['--no-owner', `--dbname=${restoredUrl}`, dump])
      const restored = await storeOn(t, restoredUrl)
      await restored.schema.migrate()
      const confirmed = await restored.schema.confirmEpoch()
      assert.deepEqual([confirmed.started, confirmed.epoch.reason], [true, 'new database'])
      assert.deepEqual(confirmed.epoch.after.order, dumped.position.order, 'after the dump\'s last change')
      assert.equal((await restored.schema.confirmEpoch()).started, false, 'once')
      const made = await change(restored, 7)
      assert.equal(made.epoch, confirmed.epoch.epoch)
      assert.notEqual(eventId(made), eventId(lost))
      const history = await restored.stock.feedHistory()
      checkPlace(history, place(dumped))
      assert.throws(() => { checkPlace(history, place(lost)) }, CursorExpiredError, 'a cursor from after the dump names a change this store never had')
      // The original goes on in its own epoch.
      assert.equal((await store.schema.confirmEpoch()).started, false)
      assert.equal((await change(store, 8)).epoch, dumped.epoch)

      // Restored once more, over the original, into the same database (pg_restore --clean): its tables are new ones.
      await store.close()
      run('pg_restore', ['--clean', '--if-exists', '--no-owner', `--dbname=${url}`, dump])
      const again = await storeOn(t, url)
      const overwritten = await again.schema.confirmEpoch()
      assert.deepEqual([overwritten.started, overwritten.epoch.reason], [true, 'new database'])
      assert.notEqual((await change(again, 9)).epoch, dumped.epoch)
    })

    test('when several instances start at once on a restored database, then one epoch begins, and every instance confirms that one', async (t) => {
      const schema = await tempSchema(t)
      const stores = Array.from({ length: 4 }, () => new PostgresStore(POSTGRES_URL, { schema }))
      t.after(() => Promise.all(stores.map((store) => store.close())))
      await stores[0]?.schema.migrate()
      await stores[0]?.schema.confirmEpoch()
      await importData(stores[0] as PostgresStore, { pets: [pet(1)], orders: [] })
      // As a pg_restore leaves it: the epoch recorded another database.
      await adminQuery(`UPDATE ${schema}.store_epochs SET database_oid = database_oid + 1`)
      const confirmed = await Promise.all(stores.map((store) => store.schema.confirmEpoch()))
      assert.equal(confirmed.filter((c) => c.started).length, 1)
      assert.equal(new Set(confirmed.map((c) => c.epoch.epoch)).size, 1)
      assert.deepEqual((await stores[0]?.stock.feedHistory())?.epochs.map((e) => e.reason), ['created', 'new database'])
    })

    test('when the operator says the store was restored (migrate --restored), then a new epoch begins even where nothing tells', async (t) => {
      const store = await storeOn(t, await tempPostgresDatabase(t))
      await store.schema.migrate()
      await store.schema.confirmEpoch()
      await importData(store, { pets: [pet(1)], orders: [] })
      const confirmed = await store.schema.confirmEpoch({ restored: true })
      assert.deepEqual([confirmed.started, confirmed.epoch.reason], [true, 'restored'])
      assert.equal((await store.stock.feedHistory()).epochs.length, 2)
    })

    test('when the store\'s data was written on another WAL timeline (a promoted replica), then the first commit on this one starts a new epoch in its own transaction', async (t) => {
      const schema = await tempSchema(t)
      const store = new PostgresStore(POSTGRES_URL, { schema })
      t.after(() => store.close())
      await store.schema.migrate()
      await store.schema.confirmEpoch()
      await importData(store, { pets: [pet(1, { quantity: 1 })], orders: [] })
      const before = await change(store, 2)
      // What a replica promoted to a new timeline holds: the timeline its old primary recorded, not the one it writes on.
      await adminQuery(`UPDATE ${schema}.feed_clock SET timeline = timeline + 1`)
      const after = await change(store, 3)
      const { epochs } = await store.stock.feedHistory()
      assert.deepEqual(epochs.map((e) => e.reason), ['created', 'new timeline'])
      assert.equal(after.epoch, epochs[1]?.epoch, 'the first change on the new timeline is of the new epoch')
      assert.equal(before.epoch, epochs[0]?.epoch)
      assert.deepEqual(epochs[1]?.after.order, before.position.order, 'it begins after the last position taken before it')
      assert.equal((await store.schema.confirmEpoch()).started, false, 'the commit recorded the timeline: nothing more to start')
      assert.equal((await change(store, 4)).epoch, epochs[1]?.epoch)
    })
  })
}
