/**
 * A shop's reasons (sale, loss, recount) and the reference of a stock write, on both stores: accepted by every write,
 * recorded, and shown as sent by the feed, the change stream, webhook payloads and the ledger history; bad references
 * refused with 400; a replay under the same Idempotency-Key with another reference refused as another request.
 */
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { describe, test, type TestContext } from 'node:test'
import { createClient, type InventoryChange, type StockReason } from '../../client/index.js'
import { buildApp } from '../../src/app.js'
import { historyTable } from '../../src/cli/history.js'
import { loadConfig } from '../../src/config.js'
import { feedCursor } from '../../src/domain/feed.js'
import { importData } from '../../src/domain/import.js'
import { stockHistory } from '../../src/domain/inventory.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, pet, tempStore, testApp } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { waitFor } from '../helpers/wait.js'
import { receiver } from '../helpers/webhooks.js'

const json = { 'content-type': 'application/json' }
const FAST = { AUTH_CACHE_TTL_MS: '0', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20', WEBHOOK_RETRY_BASE_MS: '50', WEBHOOK_RETRY_MAX_DELAY_MS: '200', WEBHOOK_TIMEOUT_MS: '2000' }

interface Shown { petId: number, reason: string, reference: string | null, note: string | null, quantity: number }
const shown = (c: Shown): [number, string, string | null, number] => [Number(c.petId), c.reason, c.reference, c.quantity]

/** What every store must show of the writes below: pet, reason, reference, quantity after. */
const EXPECTED: Array<[number, string, string | null, number]> = [
  [1, 'sale', 'order-10482', 9],
  [2, 'loss', null, 3],
  [1, 'recount', 'count sheet 2026-11 · shelf B', 7],
  [3, 'adjustment', null, 1]
]

function suite (name: string, makeStore: (t: TestContext) => Promise<Store>): void {
  test(`${name}: when writes send sale, loss and recount with references, then the feed, the stream, webhooks and the history show them as sent`, async (t) => {
    const store = await makeStore(t)
    await importData(store, { pets: [pet(1, { quantity: 10 }), pet(2, { quantity: 4 }), pet(3, { quantity: 2 })], orders: [] })
    const imported = (await store.stock.listChanges(null, 10)).at(-1)
    assert.ok(imported !== undefined)
    const app = await buildApp(loadConfig(FAST), { store, logger: false })
    t.after(() => app.close())
    await app.listen({ port: 0, host: '127.0.0.1' })
    const key = await newKey(store, 'enterprise')
    const hook = await receiver(t)
    const subscribed = await app.inject({ method: 'POST', url: '/v1/webhooks', headers: { ...auth(key), ...json }, payload: { url: hook.url, events: ['inventory.changed'] } })
    assert.equal(subscribed.statusCode, 201, subscribed.body)
    hook.secrets.push(subscribed.json<{ secret: string }>().secret)

    const write = async (method: 'PATCH' | 'POST', url: string, payload: object) => {
      const res = await app.inject({ method, url, headers: { ...auth(key), ...json }, payload })
      assert.equal(res.statusCode, 200, res.body)
      return res
    }
    const patched = await write('PATCH', '/v1/inventory/1', { quantity: 9, reason: 'sale', reference: 'order-10482' })
    assert.deepEqual(patched.json(), { petId: 1, quantity: 9, status: 'available' }, 'the answer keeps the specification\'s shape')
    await write('POST', '/v1/inventory/2/adjustments', { delta: -1, reason: 'loss', note: 'escaped' })
    await write('POST', '/v1/inventory/batch', {
      changes: [{ petId: 1, quantity: 7, reason: 'recount', reference: 'count sheet 2026-11 · shelf B' }, { petId: 3, delta: -1 }]
    })
    const listing = await app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.ok(listing.json<object[]>().every((entry) => !('reference' in entry)), 'the listing keeps the specification\'s shape')

    const after = feedCursor({ ...imported.position, epoch: imported.epoch })
    const feed = await app.inject({ method: 'GET', url: `/v1/inventory/changes?after=${after}`, headers: auth(key) })
    assert.equal(feed.statusCode, 200)
    const changes = feed.json<Shown[]>()
    assert.deepEqual(changes.map(shown), EXPECTED)
    assert.equal(changes[1]?.note, 'escaped')

    const { port } = app.server.address() as AddressInfo
    const client = createClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: key })
    const stop = new AbortController()
    const streamed: InventoryChange[] = []
    const reading = (async () => {
      for await (const change of client.streamChanges({ after, signal: stop.signal })) {
        streamed.push(change)
        if (streamed.length === EXPECTED.length) stop.abort()
      }
    })().catch(() => {})
    await waitFor('the stream\'s replay', () => streamed.length === EXPECTED.length)
    await reading
    const reasons: StockReason[] = ['sale', 'loss', 'recount', 'adjustment']
    assert.deepEqual(streamed.map((c) => c.reason), reasons)
    assert.deepEqual(streamed.map((c) => c.reference), EXPECTED.map(([, , reference]) => reference))

    await hook.until(() => new Set(hook.received.map((r) => r.id)).size === EXPECTED.length)
    const delivered = [...new Map(hook.received.map((r) => [r.id, r.event.data as unknown as Shown])).values()]
      .sort((a, b) => EXPECTED.findIndex((e) => e[1] === a.reason) - EXPECTED.findIndex((e) => e[1] === b.reason))
    assert.deepEqual(delivered.map(shown), EXPECTED)
    assert.ok(hook.received.every((r) => r.body.includes('"reference":')), 'every payload names its reference, null included')

    const history = await stockHistory(store, 1n, 10)
    assert.deepEqual(history?.map((e) => [e.reason, e.reference]), [['import', null], ['sale', 'order-10482'], ['recount', 'count sheet 2026-11 · shelf B']])
    const lines = historyTable(history ?? []).trimEnd().split('\n')
    assert.match(lines[0] ?? '', /\sREFERENCE\s+NOTE$/)
    assert.match(lines[2] ?? '', /\ssale\s.*\sorder-10482\s+-$/)
  })
}

describe('the reasons of a shop and the reference of a write', () => {
  suite('SQLite', tempStore)

  test('when a reference is empty, too long or holds control characters, then the write is 400 invalid_request naming the field, and nothing is recorded', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 })] })
    const cases: Array<[string, object, RegExp]> = [
      ['/v1/inventory/1', { quantity: 4, reference: 'x'.repeat(129) }, /^body\.reference must be a non-empty string of at most 128 characters\.$/],
      ['/v1/inventory/1', { quantity: 4, reference: '' }, /^body\.reference must be a non-empty string of at most 128 characters\.$/],
      ['/v1/inventory/1/adjustments', { delta: -1, reference: 'order\u001b[2J' }, /^body\.reference must hold no control characters/],
      ['/v1/inventory/1/adjustments', { delta: -1, reference: 'order\n1' }, /^body\.reference must hold no control characters/],
      ['/v1/inventory/batch', { changes: [{ petId: 1, delta: -1, reference: 'a\u202eb' }] }, /^body\.changes\[0\]\.reference must hold no control characters/],
      ['/v1/inventory/1', { quantity: 4, reason: 'stolen' }, /^body\.reason must be one of arrival, return, adjustment, sale, loss, recount\.$/]
    ]
    for (const [url, payload, message] of cases) {
      const res = await app.request({ method: url === '/v1/inventory/1' ? 'PATCH' : 'POST', url, headers: { ...auth(app.key), ...json }, payload })
      assert.equal(res.statusCode, 400, `${url} ${JSON.stringify(payload)}`)
      const error = res.json<{ code: string, message: string }>()
      assert.equal(error.code, 'invalid_request')
      assert.match(error.message, message)
    }
    const ok = await app.request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(app.key), ...json }, payload: { quantity: 4, reference: 'x'.repeat(128) } })
    assert.equal(ok.statusCode, 200, '128 characters is the bound, included')
    assert.deepEqual((await app.store.stock.stockHistory(1n, 10)).map((e) => e.reference), [null, 'x'.repeat(128)], 'only the valid write was recorded')
  })

  test('when a write is replayed under its Idempotency-Key with another reference, then it is refused as another request; with the same one it is replayed', async (t) => {
    const app = await testApp(t, {}, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 5 })] })
    const send = async (key: string, url: string, payload: object) =>
      await app.request({ method: url.endsWith('/1') ? 'PATCH' : 'POST', url, headers: { ...auth(app.key), ...json, 'idempotency-key': key }, payload })
    const writes: Array<[string, object, object]> = [
      ['/v1/inventory/1', { quantity: 3, reason: 'sale', reference: 'order-1' }, { quantity: 3, reason: 'sale', reference: 'order-2' }],
      ['/v1/inventory/2/adjustments', { delta: -1, reason: 'sale', reference: 'order-1' }, { delta: -1, reason: 'sale' }],
      ['/v1/inventory/batch', { changes: [{ petId: 1, delta: 1, reason: 'recount' }] }, { changes: [{ petId: 1, delta: 1, reason: 'recount', reference: 'sheet-9' }] }]
    ]
    for (const [index, [url, first, other]] of writes.entries()) {
      const key = `key-${index}`
      assert.equal((await send(key, url, first)).statusCode, 200)
      const replayed = await send(key, url, first)
      assert.equal(replayed.statusCode, 200)
      assert.equal(replayed.headers['idempotent-replayed'], 'true')
      const refused = await send(key, url, other)
      assert.equal(refused.statusCode, 422, `${url}: ${refused.body}`)
      assert.equal(refused.json<{ code: string }>().code, 'idempotency_key_reused')
    }
    assert.equal((await app.store.stock.listChanges(null, 100)).length, 2 + writes.length, 'each write applied once')
  })
})

if (await requirePostgres('the reasons of a shop on PostgreSQL')) {
  describe('the reasons of a shop and the reference of a write on PostgreSQL', () => {
    suite('PostgreSQL', tempPostgresStore)
  })
}
