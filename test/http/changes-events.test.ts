/**
 * The events of availability (holds placed, confirmed, released, expired; low stock) in the change feed, the change
 * stream and webhooks, on SQLite and on PostgreSQL: served only to who asks for them (`types`, a subscription's
 * `events`), in commit order among the stock changes, while what today's clients get stays exactly what it was. The
 * event rows are written with SQL, as the selling area writes them (src/store/selling/types.ts).
 */
import assert from 'node:assert/strict'
import { get as httpGet, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, test, type TestContext } from 'node:test'
import { createParser } from 'eventsource-parser'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, pet } from '../helpers/app.js'
import { holdEventSql, lowStockSql } from '../helpers/ledger-events.js'
import { requirePostgres } from '../helpers/postgres.js'
import { WAIT_TIMEOUT_MS } from '../helpers/wait.js'
import { receiver, type Receiver } from '../helpers/webhooks.js'
import { postgresHarness, sqliteHarness, type Open } from '../store/harness.js'

const HOLD = 'hold_AAAAAAAAAAAAAAAAAAAA'
const AT = new Date('2026-11-27T10:00:00.000Z')
const ALL_TYPES = 'inventory.changed,hold.placed,hold.confirmed,hold.released,hold.expired,inventory.low_stock'
/** The fields of a stock change as the feed has always shown it, in its order. */
const CHANGE_FIELDS = ['changeId', 'petId', 'previousQuantity', 'quantity', 'reason', 'note', 'reference', 'at', 'batchId', 'status', 'previousStatus', 'requestId', 'cursor']
const HOLD_FIELDS = ['type', 'changeId', 'petId', 'holdId', 'reference', 'quantity', 'held', 'available', 'at', 'cursor']
const LOW_STOCK_FIELDS = ['type', 'changeId', 'petId', 'quantity', 'reorderPoint', 'at', 'cursor']

type Entry = Record<string, unknown> & { cursor: string, type?: string }

interface Served {
  app: FastifyInstance
  store: Store
  /** Statements on the store's database, as another writer. */
  run: (sql: string) => Promise<void>
  key: string
  baseUrl: string
}

async function served (t: TestContext, open: Open, env: Record<string, string> = {}): Promise<Served> {
  const { store, run } = await open(t)
  await importData(store, { pets: [pet(1, { quantity: 10 }), pet(2, { quantity: 5 })], orders: [] })
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0', STREAM_POLL_MS: '50', ...env }), { store, logger: false })
  t.after(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  return { app, store, run, key: await newKey(store, 'enterprise'), baseUrl: `http://127.0.0.1:${port}` }
}

async function patch ({ app, key }: Served, petId: number, body: Record<string, unknown>): Promise<void> {
  const res = await app.inject({ method: 'PATCH', url: `/v1/inventory/${petId}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: body })
  assert.equal(res.statusCode, 200, res.body)
}

/** A sale, a hold placed, a low-stock crossing and the hold released, committed in that order (after the two imports). */
async function sellAndHold (served: Served): Promise<void> {
  await patch(served, 2, { quantity: 4, reason: 'sale', reference: 'order-1' })
  await served.run(holdEventSql({ petId: 1, event: 'hold.placed', holdId: HOLD, reference: 'cart 7', quantity: 10, held: 3, at: AT }))
  await served.run(lowStockSql({ petId: 2, quantity: 4, reorderPoint: 4, at: AT }))
  await served.run(holdEventSql({ petId: 1, event: 'hold.released', holdId: HOLD, reference: 'cart 7', quantity: 10, held: 0, at: AT }))
}

async function feedPage ({ app, key }: Served, query: string): Promise<{ status: number, body: string, entries: Entry[], next: string | null }> {
  const res = await app.inject({ method: 'GET', url: `/v1/inventory/changes?${query}`, headers: auth(key) })
  const link = /^<\?([^>]*)>; rel="next"$/.exec(String(res.headers.link ?? ''))
  return { status: res.statusCode, body: res.body, entries: res.statusCode === 200 ? res.json<Entry[]>() : [], next: link?.[1] ?? null }
}

/** Every entry from the start, following rel="next" until an empty page; with each page's entries. */
async function follow (served: Served, query: string): Promise<{ pages: Entry[][], last: string | null }> {
  const pages: Entry[][] = []
  let next: string | null = query
  for (let i = 0; i < 50 && next !== null; i++) {
    const page = await feedPage(served, next)
    assert.equal(page.status, 200, page.body)
    if (page.entries.length === 0) return { pages, last: new URLSearchParams(next).get('after') }
    pages.push(page.entries)
    next = page.next
  }
  assert.fail('the feed never reached an empty page')
}

interface SseEvent { id: string | undefined, event: string | undefined, data: string }

/** Opens a stream and collects its events until closed. */
async function openStream (t: TestContext, { baseUrl, key }: Served, query: string): Promise<{ status: number, text: string, events: SseEvent[], until: (count: number) => Promise<SseEvent[]> }> {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    httpGet(`${baseUrl}/v1/inventory/changes/stream?${query}`, { headers: auth(key), agent: false }, resolve).once('error', reject)
  })
  t.after(() => { response.destroy() })
  response.setEncoding('utf8')
  const events: SseEvent[] = []
  const opened = {
    status: response.statusCode ?? 0,
    text: '',
    events,
    until: async (count: number) => {
      const deadline = Date.now() + WAIT_TIMEOUT_MS
      while (events.length < count) {
        if (Date.now() > deadline) assert.fail(`${count} events expected, ${events.length} arrived: ${JSON.stringify(events)}`)
        await sleep(5)
      }
      return events
    }
  }
  if (opened.status !== 200) {
    for await (const text of response) opened.text += text as string
    return opened
  }
  const parser = createParser({ onEvent: (event) => { events.push({ id: event.id, event: event.event, data: event.data }) } })
  void (async () => {
    try {
      for await (const text of response) parser.feed(text as string)
    } catch {
      // Closed by the test.
    }
  })()
  return opened
}

function eventsContract (name: string, open: Open): void {
  describe(`${name}: the change feed and its events`, () => {
    test('when the ledger holds events, then the feed without types answers byte for byte what it answered before them, in full pages', async (t) => {
      const app = await served(t, open)
      await patch(app, 2, { quantity: 4, reason: 'sale', reference: 'order-1' })
      const before = await feedPage(app, 'limit=1000')
      await app.run(holdEventSql({ petId: 1, event: 'hold.placed', holdId: HOLD, quantity: 10, held: 3, at: AT }))
      await app.run(lowStockSql({ petId: 2, quantity: 4, reorderPoint: 4, at: AT }))
      const after = await feedPage(app, 'limit=1000')
      assert.equal(after.body, before.body, 'the same bytes: no event leaks into the feed of today\'s clients')
      assert.equal(after.next, before.next, 'and the same next link')

      await patch(app, 1, { quantity: 12, reason: 'arrival' })
      const { pages, last } = await follow(app, 'limit=2')
      assert.deepEqual(pages.map((page) => page.map((entry) => entry.reason)), [['import', 'import'], ['sale', 'arrival']], 'pages stay full')
      for (const entry of pages.flat()) assert.deepEqual(Object.keys(entry), CHANGE_FIELDS)
      assert.equal(last, pages.flat().at(-1)?.cursor, 'caught up: the next page starts after the last stock change')
    })

    test('when types are named, then the feed serves them in commit order among the stock changes, each with its type and fields, and pages never skip or repeat one', async (t) => {
      const app = await served(t, open)
      await sellAndHold(app)
      await patch(app, 1, { quantity: 12, reason: 'arrival' })
      const whole = await feedPage(app, `limit=1000&types=${ALL_TYPES}`)
      assert.equal(whole.status, 200, whole.body)
      assert.deepEqual(whole.entries.map((entry) => entry.type), [
        'inventory.changed', 'inventory.changed', 'inventory.changed', 'hold.placed', 'inventory.low_stock', 'hold.released', 'inventory.changed'
      ])
      const [,, sale, placed, low, released] = whole.entries
      assert.deepEqual(Object.keys(sale ?? {}), ['type', ...CHANGE_FIELDS])
      assert.deepEqual([sale?.reason, sale?.reference, sale?.quantity], ['sale', 'order-1', 4])
      assert.deepEqual(Object.keys(placed ?? {}), HOLD_FIELDS)
      assert.deepEqual({ ...placed, changeId: 0, cursor: '' }, {
        type: 'hold.placed', changeId: 0, petId: 1, holdId: HOLD, reference: 'cart 7', quantity: 10, held: 3, available: 7, at: AT.toISOString(), cursor: ''
      })
      assert.deepEqual([released?.held, released?.available], [0, 10])
      assert.deepEqual(Object.keys(low ?? {}), LOW_STOCK_FIELDS)
      assert.deepEqual({ ...low, changeId: 0, cursor: '' }, {
        type: 'inventory.low_stock', changeId: 0, petId: 2, quantity: 4, reorderPoint: 4, at: AT.toISOString(), cursor: ''
      })

      for (const size of [1, 2, 3]) {
        const { pages, last } = await follow(app, `limit=${size}&types=${ALL_TYPES}`)
        assert.deepEqual(pages.flat().map((entry) => entry.cursor), whole.entries.map((entry) => entry.cursor), `pages of ${size}`)
        assert.ok(pages.slice(0, -1).every((page) => page.length === size), 'every page but the last is full')
        assert.equal(last, whole.entries.at(-1)?.cursor)
      }
      const holds = await follow(app, 'limit=1&types=hold.released,hold.placed')
      assert.deepEqual(holds.pages.map((page) => page.map((entry) => entry.type)), [['hold.placed'], ['hold.released']])
      assert.equal(holds.last, released?.cursor, 'the cursor of a filtered page is its last entry served')
      const link = (await feedPage(app, 'limit=1&types=hold.released,hold.placed')).next
      assert.equal(new URLSearchParams(link ?? '').get('types'), 'hold.placed,hold.released', 'the next link keeps the types')
    })

    test('when a type is unknown or the list has an empty item, then the feed and the stream answer 400 naming its place, never quoting it', async (t) => {
      const app = await served(t, open)
      for (const types of ['hold.placed,psk_live_notatype', 'inventory.changed,,hold.placed', 'HOLD.PLACED']) {
        const page = await feedPage(app, `types=${encodeURIComponent(types)}`)
        assert.equal(page.status, 400, page.body)
        const error = JSON.parse(page.body) as { code: string, message: string }
        assert.equal(error.code, 'invalid_request')
        assert.match(error.message, /^querystring\.types: item \d is not a known type; known: inventory\.changed, hold\.placed, /)
        assert.ok(!error.message.includes('psk_live') && !error.message.includes('HOLD'), error.message)
      }
      assert.equal((await feedPage(app, 'types=')).status, 400)
      const stream = await openStream(t, app, 'types=hold.placed,stock.low')
      assert.equal(stream.status, 400, stream.text)
      assert.match(stream.text, /item 2 is not a known type/)
    })

    test('when a stream names types, then each entry is an event named by its type whose data is the entry as the typed feed shows it; without, only stock changes', async (t) => {
      const app = await served(t, open)
      const start = (await feedPage(app, 'limit=1000')).entries.at(-1)?.cursor as string
      const plain = await openStream(t, app, `after=${start}`)
      const typed = await openStream(t, app, `after=${start}&types=inventory.changed,hold.placed,inventory.low_stock`)
      await sellAndHold(app)
      await patch(app, 1, { quantity: 12, reason: 'arrival' })
      const feed = (await feedPage(app, `after=${start}&types=inventory.changed,hold.placed,inventory.low_stock`)).entries
      const events = await typed.until(4)
      assert.deepEqual(events.map((event) => event.event), ['inventory.changed', 'hold.placed', 'inventory.low_stock', 'inventory.changed'])
      assert.deepEqual(events.map((event) => event.id), feed.map((entry) => entry.cursor))
      assert.deepEqual(events.map((event) => JSON.parse(event.data) as unknown), feed)

      const stock = await plain.until(2)
      assert.deepEqual(stock.map((event) => event.event), ['inventory.changed', 'inventory.changed'])
      const plainFeed = (await feedPage(app, `after=${start}`)).entries
      assert.deepEqual(stock.map((event) => JSON.parse(event.data) as unknown), plainFeed)
      // One more stock change: had an event leaked into the plain stream, it would have come before this one.
      await patch(app, 2, { quantity: 9, reason: 'arrival' })
      const more = await plain.until(3)
      assert.deepEqual(more.map((event) => (JSON.parse(event.data) as Entry).reason), ['sale', 'arrival', 'arrival'])
      assert.ok(more.every((event) => !('type' in (JSON.parse(event.data) as Entry))))
    })

    test('when subscriptions name event types, then each endpoint is sent its types only, inventory.changed bodies as they were', async (t) => {
      const app = await served(t, open, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20' })
      const subscribe = async (hook: Receiver, events: string[]): Promise<void> => {
        const res = await app.app.inject({
          method: 'POST', url: '/v1/webhooks', headers: { ...auth(app.key), 'content-type': 'application/json' }, payload: { url: hook.url, events }
        })
        assert.equal(res.statusCode, 201, res.body)
        hook.secrets.push(res.json<{ secret: string }>().secret)
      }
      const stock = await receiver(t)
      const holds = await receiver(t)
      await subscribe(stock, ['inventory.changed'])
      await subscribe(holds, ['hold.placed', 'hold.released', 'inventory.low_stock'])
      await sellAndHold(app)
      await patch(app, 1, { quantity: 12, reason: 'arrival' })
      await holds.until(() => holds.received.length >= 3)
      await stock.until(() => stock.received.length >= 2)
      const feed = (await feedPage(app, `limit=1000&types=${ALL_TYPES}`)).entries.slice(2)
      // Deliveries may arrive out of order: put them in the feed's.
      const order = feed.map((entry) => entry.cursor)
      const byCursor = (hook: Receiver) => [...hook.received].sort((a, b) => order.indexOf(a.event.data.cursor) - order.indexOf(b.event.data.cursor))
      assert.deepEqual(byCursor(holds).map((r) => r.event.type), ['hold.placed', 'inventory.low_stock', 'hold.released'])
      for (const delivery of holds.received) {
        const entry = feed.find((e) => e.cursor === delivery.event.data.cursor) as Entry
        const { type, ...data } = entry
        assert.deepEqual(delivery.event, { type, timestamp: AT.toISOString(), data }, 'the envelope names the type; data is the entry without it')
      }
      const plain = (await feedPage(app, 'limit=1000')).entries.slice(2)
      assert.deepEqual(byCursor(stock).map((r) => r.event.data), plain, 'stock changes exactly as the feed shows them')
      assert.ok(stock.received.every((r) => r.event.type === 'inventory.changed' && !('type' in r.event.data)))
      // One more stock change reaches the stock endpoint: an event sent to it would have been fanned out before this one.
      await patch(app, 2, { quantity: 9, reason: 'arrival' })
      await stock.until(() => stock.received.length >= 3)
      assert.deepEqual(new Set(stock.received.map((r) => r.event.type)), new Set(['inventory.changed']))
      assert.equal(holds.received.length, 3, 'no stock change went to the holds endpoint')
    })
  })
}

eventsContract('SqliteStore', sqliteHarness)
if (await requirePostgres('PostgreSQL change feed event tests')) eventsContract('PostgresStore', postgresHarness)
