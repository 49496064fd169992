/**
 * GET /v1/inventory/changes as a client keeping a copy in sync sees it: every change once, in order, resumable from a
 * stored cursor, others' request ids hidden; and on PostgreSQL, with two instances writing while a reader pages,
 * every change seen exactly once.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { auth, newKey, pet, testApp } from '../helpers/app.js'
import { nextPath } from '../helpers/links.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'

const BIG = 9007199254740993n // 2^53 + 1

interface Change {
  changeId: number, petId: number, previousQuantity: number | null, quantity: number, reason: string, note: string | null, at: string, batchId: string | null,
  status: string | null, previousStatus: string | null, requestId: string | null, cursor: string
}

describe('GET /v1/inventory/changes', () => {
  test('when stock changes every way, then the feed lists each change once, in order, with its cursor; others\' request ids stay hidden', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(BIG, { quantity: 2 })] })
    const other = await newKey(app.store)
    const json = { 'content-type': 'application/json' }
    await app.request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(app.key), ...json, 'x-request-id': 'mine-1' }, payload: { quantity: 7, note: 'recount' } })
    await app.request({ method: 'POST', url: `/v1/inventory/${BIG}/adjustments`, headers: { ...auth(other), ...json, 'x-request-id': 'theirs-1' }, payload: { delta: 3, reason: 'arrival' } })
    await app.request({ method: 'POST', url: '/v1/inventory/batch', headers: { ...auth(app.key), ...json, 'x-request-id': 'mine-2' }, payload: { changes: [{ petId: 1, delta: -1 }, { petId: 2, quantity: 0 }] } })
      .then((res) => assert.equal(res.statusCode, 409, 'pet 2 has no entry: the batch changes nothing'))
    const res = await app.request({ method: 'GET', url: '/v1/inventory/changes', headers: auth(app.key) })
    assert.equal(res.statusCode, 200)
    const changes = JSON.parse(res.body.replace(/"petId":(\d{16,})/g, '"petId":"$1"')) as Change[]
    assert.deepEqual(changes.map((c) => [String(c.petId), c.previousQuantity, c.quantity, c.reason, c.note, c.requestId]), [
      ['1', null, 5, 'import', null, null],
      [String(BIG), null, 2, 'import', null, null],
      ['1', 5, 7, 'adjustment', 'recount', 'mine-1'],
      [String(BIG), 2, 5, 'arrival', null, null]
    ])
    assert.ok(res.body.includes(`"petId":${BIG}`), 'ids digit for digit')
    assert.ok(changes.every((c) => /^\d{4}-\d\d-\d\dT.*Z$/.test(c.at) && c.batchId === null && c.cursor.length > 0))
    const link = String(res.headers.link)
    assert.equal(link, `<?limit=100&after=${changes[3]?.cursor}>; rel="next"`)
    // Resuming from a stored cursor: what came after, and at the end an empty page that keeps the place.
    const rest = await app.request({ method: 'GET', url: `/v1/inventory/changes?after=${changes[1]?.cursor}&limit=1`, headers: auth(app.key) })
    assert.deepEqual((rest.json() as Change[]).map((c) => c.quantity), [7])
    const caughtUp = await app.request({ method: 'GET', url: `/v1/inventory/changes?after=${changes[3]?.cursor}`, headers: auth(app.key) })
    assert.deepEqual(caughtUp.json(), [])
    assert.equal(caughtUp.headers.link, link, 'poll the same link later')
    await app.request({ method: 'POST', url: '/v1/inventory/batch', headers: { ...auth(app.key), ...json }, payload: { changes: [{ petId: 1, delta: 1 }] } })
    const later = await app.request({ method: 'GET', url: `/v1/inventory/changes?after=${changes[3]?.cursor}`, headers: auth(app.key) })
    const [batched] = later.json() as Change[]
    assert.deepEqual([batched?.quantity, typeof batched?.batchId], [8, 'string'])
  })

  test('when a shop takes the listing and follows the feed from its Changes-Cursor, then its copy stays equal to the listing, status changes by imports included', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 2, status: 'pending' }), pet(3, { quantity: undefined })] })
    const json = { 'content-type': 'application/json' }
    const list = async () => app.request({ method: 'GET', url: '/v1/inventory', headers: auth(app.key) })
    const snapshot = await list()
    const copy = new Map((snapshot.json() as Array<{ petId: number, quantity: number, status: string }>).map((e) => [e.petId, { ...e }]))
    let cursor = String(snapshot.headers['changes-cursor'])
    assert.match(cursor, /^[A-Za-z0-9_-]+$/)
    const follow = async (): Promise<Change[]> => {
      const res = await app.request({ method: 'GET', url: `/v1/inventory/changes?after=${cursor}`, headers: auth(app.key) })
      const changes = res.json() as Change[]
      for (const change of changes) {
        const entry = copy.get(change.petId) ?? { petId: change.petId, quantity: 0, status: '' }
        entry.quantity = change.quantity
        if (change.status !== null) entry.status = change.status
        copy.set(change.petId, entry)
        cursor = change.cursor
      }
      return changes
    }
    assert.deepEqual(await follow(), [], 'the listing holds every change up to its cursor')

    // The pet sold elsewhere is imported again with the status sold and the same quantity: a change of the listing.
    await importData(app.store, { pets: [pet(1, { quantity: 5, status: 'sold' })], orders: [] })
    // A pet without stock changes status: the listing does not show it, so neither does the feed.
    await importData(app.store, { pets: [pet(3, { quantity: undefined, status: 'sold' })], orders: [] })
    // Its first stock: an entry added, with its status.
    await importData(app.store, { pets: [pet(3, { quantity: 4, status: 'sold' })], orders: [] })
    await app.request({ method: 'PATCH', url: '/v1/inventory/2', headers: { ...auth(app.key), ...json }, payload: { quantity: 9 } })
    const changes = await follow()
    assert.deepEqual(changes.map((c) => [c.petId, c.previousQuantity, c.quantity, c.previousStatus, c.status]), [
      [1, 5, 5, 'available', 'sold'],
      [3, null, 4, null, 'sold'],
      [2, 2, 9, null, null]
    ])
    assert.deepEqual([...copy.values()].sort((a, b) => a.petId - b.petId), (await list()).json(), 'the copy equals the listing')
  })

  test('when the listing is paged, then the first page carries the feed cursor; none while the feed is empty', async (t) => {
    const empty = await testApp(t, {}, { pets: [pet(1, { quantity: undefined })] })
    const none = await empty.request({ method: 'GET', url: '/v1/inventory', headers: auth(empty.key) })
    assert.equal(none.headers['changes-cursor'], undefined)

    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 2 }), pet(3, { quantity: 1 })] })
    const whole = await app.request({ method: 'GET', url: '/v1/inventory', headers: auth(app.key) })
    const first = await app.request({ method: 'GET', url: '/v1/inventory?limit=2', headers: auth(app.key) })
    assert.equal(first.headers['changes-cursor'], whole.headers['changes-cursor'])
    // Later pages may come from newer snapshots: a follower must start from the first page's cursor, so they carry none.
    const next = nextPath(first.headers.link, '/v1/inventory?limit=2') ?? ''
    const second = await app.request({ method: 'GET', url: next, headers: auth(app.key) })
    assert.equal(second.statusCode, 200)
    assert.equal(second.headers['changes-cursor'], undefined)
    const feed = await app.request({ method: 'GET', url: '/v1/inventory/changes', headers: auth(app.key) })
    assert.equal(whole.headers['changes-cursor'], (feed.json() as Change[]).at(-1)?.cursor)
  })

  test('when the cursor is not one the feed issued, or the limit is out of bounds, then it answers 400', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const orderCursor = Buffer.from('o1:5').toString('base64url')
    for (const query of ['after=nonsense', `after=${orderCursor}`, `after=${Buffer.from('f1:1.2.3').toString('base64url')}`, `after=${Buffer.from('f1:-1.0').toString('base64url')}`, `after=${Buffer.from('f1:0.-1').toString('base64url')}`, 'limit=0', 'limit=1001', 'since=1']) {
      const res = await app.request({ method: 'GET', url: `/v1/inventory/changes?${query}`, headers: auth(app.key) })
      assert.equal(res.statusCode, 400, query)
      assert.equal(res.json().code, 'invalid_request')
    }
    assert.equal((await app.request({ method: 'GET', url: '/v1/inventory/changes' })).statusCode, 401)
  })
})

if (await requirePostgres('the change feed on PostgreSQL')) {
  describe('GET /v1/inventory/changes on PostgreSQL', () => {
    test('when two instances write concurrently while a reader pages the feed, then the reader sees every change exactly once', async (t) => {
      const schema = await tempSchema(t)
      const stores = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema, poolSize: 6 }))
      t.after(() => Promise.all(stores.map((s) => s.close())))
      const first = stores[0] as PostgresStore
      await first.schema.migrate()
      await importData(first, { pets: Array.from({ length: 8 }, (_, i) => pet(i + 1, { quantity: 1000 })), orders: [] })
      const key = await newKey(first, 'enterprise')
      const apps = await Promise.all(stores.map((store) => buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '60000' }), { store, logger: false })))
      t.after(() => Promise.all(apps.map((app) => app.close())))
      const headers = { ...auth(key), 'content-type': 'application/json' }
      let writing = true
      let written = 0
      const writers = apps.flatMap((app, a) => [0, 1, 2].map(async (w) => {
        for (let i = 0; i < 20; i++) {
          const petId = (a * 3 + w + i) % 8 + 1
          const res = i % 5 === 4
            ? await app.inject({ method: 'POST', url: '/v1/inventory/batch', headers, payload: { changes: [{ petId, delta: 1 }, { petId: petId % 8 + 1, delta: -1 }] } })
            : await app.inject({ method: 'POST', url: `/v1/inventory/${petId}/adjustments`, headers, payload: { delta: i % 2 === 0 ? 1 : -1 } })
          assert.equal(res.statusCode, 200, res.body)
          written += i % 5 === 4 ? 2 : 1
        }
      }))
      const seen: number[] = []
      const reader = (async () => {
        let next = '/v1/inventory/changes?limit=7'
        let deadline = Number.POSITIVE_INFINITY
        // Alternating instances, as a reader behind a load balancer would.
        for (let turn = 0; Date.now() < deadline; turn++) {
          const res = await (apps[turn % 2] as typeof apps[number]).inject({ method: 'GET', url: next, headers: auth(key) })
          assert.equal(res.statusCode, 200)
          const page = JSON.parse(res.body) as Change[]
          seen.push(...page.map((c) => c.changeId))
          next = nextPath(res.headers.link, next) as string
          if (!writing && deadline === Number.POSITIVE_INFINITY) deadline = Date.now() + 10_000
          if (!writing && seen.length === written + 8) break
          if (page.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
        }
      })()
      await Promise.all(writers)
      writing = false
      await reader
      assert.equal(new Set(seen).size, seen.length, 'no change twice')
      assert.equal(seen.length, written + 8, 'every change (and the eight imports), none missed')
    })
  })
}
