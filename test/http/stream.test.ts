/**
 * GET /v1/inventory/changes/stream over real HTTP, as a follower sees it: a replay from its cursor and then each change
 * as it commits (also a change made on another instance), heartbeats while idle, the connect counted once, the limits
 * per quota, streams that end when the instance stops, and a slow reader that holds its stream back. Then the typed
 * client's iterator, which reconnects after a stream ends or drops without missing or repeating a change.
 */
import assert from 'node:assert/strict'
import { get as httpGet, type IncomingMessage } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, test, type TestContext } from 'node:test'
import { createParser } from 'eventsource-parser'
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import { createClient, type InventoryChange } from '../../client/index.js'
import { createKey, revokeKey, rotateKey } from '../../src/access/keys.js'
import { buildApp, type AppDeps } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { feedCursor } from '../../src/domain/feed.js'
import { importData } from '../../src/domain/import.js'
import type { PetImport } from '../../src/model.js'
import { Lifecycle } from '../../src/lifecycle.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, pet, tempDir, tempStore } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { waitFor, within, WAIT_TIMEOUT_MS } from '../helpers/wait.js'

const BIG = 9007199254740993n // 2^53 + 1
const JSON_BODY = { 'content-type': 'application/json' }
/**
 * A change committed on another instance reaches a stream within a poll (STREAM_POLL_MS, 250 ms) on a quiet machine;
 * this bound allows a loaded one and stays far below what a stream that missed it would take (a reconnect).
 */
const CROSS_INSTANCE_MS = 3000

interface Served {
  app: FastifyInstance
  store: Store
  baseUrl: string
  key: string
  /** The server side of every connection, to drop them. */
  sockets: Set<Socket>
}

/** An app listening on a loopback port, on the given store (a temp SQLite store by default). */
async function served (t: TestContext, options: { env?: Record<string, string>, store?: Store, pets?: PetImport[], deps?: Partial<AppDeps> } = {}): Promise<Served> {
  const store = options.store ?? await tempStore(t)
  if (options.pets !== undefined) await importData(store, { pets: options.pets, orders: [] })
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0', ...options.env }), { store, logger: false, ...options.deps })
  t.after(() => app.close())
  const sockets = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  return { app, store, baseUrl: `http://127.0.0.1:${port}`, key: await newKey(store), sockets }
}

interface SseEvent { id: string | undefined, event: string | undefined, data: string }

/** One stream as a test reads it: what arrived so far, and waits for more. */
interface OpenedStream {
  status: number
  headers: Headers
  /** The body of an answer that is not a stream. */
  text: string
  events: SseEvent[]
  comments: string[]
  retry: number | null
  /** Settles when the body ends, however it ends. */
  ended: Promise<void>
  isEnded: () => boolean
  /** When the body ended (performance.now()), null while it has not. */
  endedAt: () => number | null
  /** Resolves once `count` events have arrived; fails after `ms`. */
  waitFor: (count: number, ms?: number) => Promise<SseEvent[]>
  close: () => void
}

/** Opens a stream on a connection of its own (no pool keeps a spare connection open past the test). */
async function openStream (baseUrl: string, headers: Record<string, string>, query = ''): Promise<OpenedStream> {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    httpGet(`${baseUrl}/v1/inventory/changes/stream${query}`, { headers, agent: false }, resolve).once('error', reject)
  })
  let done = false
  let endedAt: number | null = null
  const opened: OpenedStream = {
    status: response.statusCode ?? 0,
    headers: new Headers(Object.entries(response.headers).map(([name, value]) => [name, String(value)] as [string, string])),
    text: '',
    events: [],
    comments: [],
    retry: null,
    ended: Promise.resolve(),
    isEnded: () => done,
    endedAt: () => endedAt,
    waitFor: async (count, ms = WAIT_TIMEOUT_MS) => {
      const deadline = Date.now() + ms
      while (opened.events.length < count) {
        if (Date.now() > deadline) assert.fail(`${count} events expected, ${opened.events.length} arrived: ${JSON.stringify(opened.events.map((e) => e.data))}`)
        await sleep(5)
      }
      return opened.events
    },
    close: () => { response.destroy() }
  }
  response.setEncoding('utf8')
  if (opened.status !== 200) {
    for await (const text of response) opened.text += text as string
    done = true
    return opened
  }
  const parser = createParser({
    onEvent: (event) => { opened.events.push({ id: event.id, event: event.event, data: event.data }) },
    onComment: (comment) => { opened.comments.push(comment) },
    onRetry: (retry) => { opened.retry = retry }
  })
  opened.ended = (async () => {
    try {
      for await (const text of response) parser.feed(text as string)
    } catch {
      // Closed by the test, or dropped.
    } finally {
      done = true
      endedAt = performance.now()
    }
  })()
  return opened
}

/**
 * Opens a stream on a raw connection whose client stops reading once the first change has come: what the server writes
 * after it piles up in the connection's buffers. `reading` settles when the client stops.
 */
async function unreadStream (s: Served, key: string): Promise<{ socket: Socket, reading: Promise<void> }> {
  const { port } = s.app.server.address() as AddressInfo
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write(`GET /v1/inventory/changes/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`)
  let text = ''
  const reading = new Promise<void>((resolve) => {
    const read = (chunk: Buffer): void => {
      text += chunk.toString()
      if (!text.includes('event: ')) return
      socket.off('data', read)
      socket.pause()
      resolve()
    }
    socket.on('data', read)
  })
  return { socket, reading }
}

/** Resolves once `check` holds; fails after a deadline generous enough for a loaded machine. */
async function until (check: () => boolean | Promise<boolean>, what = 'condition'): Promise<void> {
  await waitFor(what, check, { intervalMs: 5 })
}

async function patch (target: Served | FastifyInstance, key: string, petId: bigint | number, quantity: number) {
  const app = 'app' in target ? target.app : target
  const res = await app.inject({ method: 'PATCH', url: `/v1/inventory/${petId}`, headers: { ...auth(key), ...JSON_BODY }, payload: { quantity } })
  assert.equal(res.statusCode, 200, res.body)
  return res
}

/** The cursor of the feed's n-th change (from 0). */
async function cursorAt (store: Store, index: number): Promise<string> {
  const change = (await store.stock.listChanges(null, index + 1))[index]
  assert.ok(change !== undefined)
  return feedCursor({ ...change.position, epoch: change.epoch })
}

const quantityOf = (event: SseEvent): number => (JSON.parse(event.data) as { quantity: number }).quantity

describe('GET /v1/inventory/changes/stream', () => {
  test('when following from ?after, then the missed changes are replayed, then each new one arrives as it commits, written as the feed writes it', async (t) => {
    const s = await served(t, { pets: [pet(1, { quantity: 5 }), pet(BIG, { quantity: 2 }), pet(3, { quantity: 1 })] })
    const stream = await openStream(s.baseUrl, auth(s.key), `?after=${await cursorAt(s.store, 0)}`)
    t.after(() => { stream.close() })
    assert.equal(stream.status, 200)
    assert.equal(stream.headers.get('content-type'), 'text/event-stream')
    assert.equal(stream.headers.get('cache-control'), 'no-store')
    assert.equal(stream.headers.get('x-ratelimit-remaining'), '59', 'the rate-limit fields come with the 200')
    assert.ok(stream.headers.get('x-request-id'))
    const replayed = await stream.waitFor(2)
    assert.equal(stream.retry, 1000)
    assert.deepEqual(replayed.map(quantityOf), [2, 1])
    assert.ok(replayed[0]?.data.includes(`"petId":${BIG}`), 'int64 digit for digit, as the feed writes them')
    await patch(s, s.key, 1, 9)
    const [, , live] = await stream.waitFor(3)
    assert.ok(live !== undefined)
    assert.equal(live.event, 'inventory.changed')
    // The same bytes the feed answers for that change.
    const feed = await s.app.inject({ method: 'GET', url: `/v1/inventory/changes?after=${replayed[1]?.id}`, headers: auth(s.key) })
    assert.equal(feed.body, `[${live.data}]`)
    const change = JSON.parse(live.data) as { cursor: string, requestId: string | null }
    assert.equal(live.id, change.cursor, 'each event\'s id is its cursor')
    assert.ok(change.requestId !== null, 'the caller\'s own change shows its request id')
  })

  test('when neither Last-Event-ID nor after is sent, then the stream starts from now; an empty Last-Event-ID is none', async (t) => {
    const s = await served(t, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 2 })] })
    const stream = await openStream(s.baseUrl, { ...auth(s.key), 'last-event-id': '' })
    t.after(() => { stream.close() })
    assert.equal(stream.status, 200)
    await patch(s, s.key, 2, 7)
    // Events come in feed order: had the stream replayed what was committed before the connect, those would come
    // first. Waiting for the change made after the connect shows whatever came before it.
    await until(() => stream.events.map(quantityOf).includes(7), 'the change made after the connect')
    assert.deepEqual(stream.events.map(quantityOf), [7], 'nothing committed before the connect')
  })

  test('when Last-Event-ID is sent, then the stream resumes after it, and it wins over after', async (t) => {
    const s = await served(t, { pets: [pet(1, { quantity: 1 }), pet(2, { quantity: 2 }), pet(3, { quantity: 3 })] })
    const stream = await openStream(s.baseUrl, { ...auth(s.key), 'last-event-id': await cursorAt(s.store, 1) }, `?after=${await cursorAt(s.store, 0)}`)
    t.after(() => { stream.close() })
    assert.deepEqual((await stream.waitFor(1)).map(quantityOf), [3])
    await sleep(50)
    assert.equal(stream.events.length, 1)
  })

  test('when the cursor is not one the feed issued, then it answers 400 like the feed, counted; without a key 401', async (t) => {
    const s = await served(t, { pets: [pet(1)] })
    const bad = Buffer.from('o1:5').toString('base64url')
    for (const [headers, query] of [[{ 'last-event-id': 'nonsense' }, ''], [{}, `?after=${bad}`], [{ 'last-event-id': bad }, `?after=${await cursorAt(s.store, 0)}`], [{}, '?since=1']] as const) {
      const stream = await openStream(s.baseUrl, { ...auth(s.key), ...headers }, query)
      assert.equal(stream.status, 400, query)
      assert.equal((JSON.parse(stream.text) as { code: string }).code, 'invalid_request')
      assert.ok(stream.headers.get('x-ratelimit-remaining'))
    }
    assert.equal((await openStream(s.baseUrl, {})).status, 401)
    const head = await s.app.inject({ method: 'HEAD', url: '/v1/inventory/changes/stream', headers: auth(s.key) })
    assert.equal(head.statusCode, 405, 'a HEAD would open a stream for nothing')
  })

  test('when the stream is idle, then a heartbeat comment comes every heartbeat interval; the connect is counted once', async (t) => {
    const s = await served(t, { env: { STREAM_HEARTBEAT_MS: '100' }, pets: [pet(1)] })
    const stream = await openStream(s.baseUrl, auth(s.key))
    t.after(() => { stream.close() })
    assert.equal(stream.headers.get('x-ratelimit-remaining'), '59')
    const opened = performance.now()
    await until(() => stream.comments.length >= 3, 'three heartbeats')
    // Every 100 ms here (by default 15 s): three within 5 s even on a loaded machine.
    assert.ok(performance.now() - opened < 5000, `three heartbeats after ${Math.round(performance.now() - opened)} ms`)
    assert.ok(stream.comments.every((comment) => comment.trim() === 'heartbeat'))
    const next = await s.app.inject({ method: 'GET', url: '/v1/inventory', headers: auth(s.key) })
    assert.equal(next.headers['x-ratelimit-remaining'], '58', 'the open stream cost one request, not one per heartbeat')
  })

  test('when a read-only key streams, then it is served', async (t) => {
    const s = await served(t, { pets: [pet(1)] })
    const { key } = await createKey(s.store, 'production', { plan: 'free', name: 'reader', perMinute: null, perDay: null, scope: 'read' })
    const stream = await openStream(s.baseUrl, auth(key), `?after=${await cursorAt(s.store, 0)}`)
    t.after(() => { stream.close() })
    assert.equal(stream.status, 200)
    await patch(s, s.key, 1, 4)
    assert.deepEqual((await stream.waitFor(1)).map(quantityOf), [4])
  })

  test('when the key expires, then its stream ends', async (t) => {
    const s = await served(t, { pets: [pet(1)] })
    const { key } = await createKey(s.store, 'production', { plan: 'free', name: 'short', perMinute: null, perDay: null, expiresAt: new Date(Date.now() + 300) })
    const stream = await openStream(s.baseUrl, auth(key))
    t.after(() => { stream.close() })
    assert.equal(stream.status, 200)
    await until(() => stream.isEnded(), 'the stream to end')
    assert.equal((await openStream(s.baseUrl, auth(key))).status, 401, 'and it cannot be opened again')
  })

  test('when the key is revoked, then its open stream ends, and the other keys\' streams go on', async (t) => {
    const s = await served(t, { pets: [pet(1)], env: { STREAM_HEARTBEAT_MS: '200' } })
    const { key, record } = await createKey(s.store, 'production', { plan: 'free', name: 'revoked', perMinute: null, perDay: null })
    const revoked = await openStream(s.baseUrl, auth(key))
    const kept = await openStream(s.baseUrl, auth(s.key))
    t.after(() => { revoked.close(); kept.close() })
    assert.deepEqual([revoked.status, kept.status], [200, 200])
    await revokeKey(s.store, record.id)
    await until(() => revoked.isEnded(), 'the revoked key\'s stream to end')
    // The other stream lives on through its own key checks, not a guessed pause: two more heartbeats on it.
    const heartbeats = kept.comments.length
    await until(() => kept.comments.length >= heartbeats + 2 || kept.isEnded(), 'two more heartbeats on the other stream')
    assert.equal(kept.isEnded(), false)
    assert.equal((await openStream(s.baseUrl, auth(key))).status, 401, 'and it cannot be opened again')
  })

  test('when a quota has five streams open, then the sixth is refused 429 too_many_streams; a closed one frees its place', async (t) => {
    const s = await served(t, { pets: [pet(1)] })
    const streams = await Promise.all([1, 2, 3, 4, 5].map(() => openStream(s.baseUrl, auth(s.key))))
    t.after(() => { for (const stream of streams) stream.close() })
    assert.deepEqual(streams.map((stream) => stream.status), [200, 200, 200, 200, 200])
    const sixth = await openStream(s.baseUrl, auth(s.key))
    assert.equal(sixth.status, 429)
    assert.equal(sixth.headers.get('content-type'), 'application/json; charset=utf-8')
    assert.deepEqual(JSON.parse(sixth.text), {
      code: 'too_many_streams', status: 429, message: 'This key\'s quota has 5 change streams open, the most it may have at once; close one first.'
    })
    assert.equal(sixth.headers.get('x-ratelimit-remaining'), '54', 'counted like any request')
    const other = await openStream(s.baseUrl, auth(await newKey(s.store)))
    t.after(() => { other.close() })
    assert.equal(other.status, 200, 'another quota has its own count')
    streams[0]?.close()
    let again: OpenedStream | undefined
    await until(async () => {
      again = await openStream(s.baseUrl, auth(s.key))
      return again.status === 200
    }, 'a free place')
    t.after(() => { again?.close() })
  })

  test('when more streams are open than the instance serves, then it answers 503 with Retry-After', async (t) => {
    const s = await served(t, { env: { STREAM_MAX_PER_INSTANCE: '1' }, pets: [pet(1)] })
    const first = await openStream(s.baseUrl, auth(s.key))
    t.after(() => { first.close() })
    const second = await openStream(s.baseUrl, auth(await newKey(s.store)))
    assert.equal(second.status, 503)
    assert.equal((JSON.parse(second.text) as { code: string }).code, 'service_unavailable')
    assert.equal(second.headers.get('retry-after'), '5')
  })

  test('when a client leaves, cleanly or with a reset, then the access line and the request metrics are written and the open-streams gauge goes back', async (t) => {
    const lines: Array<Record<string, unknown>> = []
    const logger = pino({ level: 'info' }, new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>); done() } }))
    const s = await served(t, { env: { STREAM_HEARTBEAT_MS: '100' }, pets: [pet(1)], deps: { logger } })
    const metrics = async () => (await s.app.inject({ method: 'GET', url: '/metrics' })).body
    const streamLines = () => lines.filter((line) => line.operation === 'streamInventoryChanges')
    const stream = await openStream(s.baseUrl, auth(s.key))
    assert.equal(stream.status, 200)
    assert.match(await metrics(), /^petstore_change_streams_open 1$/m)
    stream.close()
    await until(async () => /^petstore_change_streams_open 0$/m.test(await metrics()), 'the gauge at 0')
    await until(() => streamLines().length === 1, 'the access line')
    const [line] = streamLines()
    assert.equal(line?.msg, 'request completed')
    assert.equal(line?.status, 200)
    assert.equal(typeof line?.keyId, 'string')

    // A client that stops reading and then drops the connection with data unread resets it: no FIN, no 'finish'.
    const { port } = s.app.server.address() as AddressInfo
    const stalled = await new Promise<IncomingMessage>((resolve) => {
      httpGet({ host: '127.0.0.1', port, path: '/v1/inventory/changes/stream', headers: auth(s.key), agent: false }, resolve)
    })
    stalled.pause()
    // Data unread: heartbeats (every 100 ms) waiting in the paused answer.
    await until(() => stalled.readableLength > 0, 'data unread by the stalled client')
    stalled.socket.resetAndDestroy()
    await until(() => streamLines().length === 2, 'the access line of the reset stream')
    await until(async () => /^petstore_change_streams_open 0$/m.test(await metrics()), 'the gauge at 0 again')
    assert.match(await metrics(), /^petstore_http_requests_total\{operation="streamInventoryChanges",method="GET",status="200"\} 2$/m)
  })

  test('when clients drop streams they stopped reading while changes flow, then nothing is logged at warn or above, and each stream still gets its access line', async (t) => {
    const lines: Array<Record<string, unknown>> = []
    const logger = pino({ level: 'debug' }, new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>); done() } }))
    const s = await served(t, { pets: [pet(1)], deps: { logger } })
    const streams = await Promise.all([1, 2, 3, 4, 5].map(async () => await unreadStream(s, s.key)))
    await until(async () => /^petstore_change_streams_open 5$/m.test((await s.app.inject({ method: 'GET', url: '/metrics' })).body), 'five streams open')
    // Changes the streams send and the clients stop reading, piling up in the connections' buffers.
    await importData(s.store, { pets: Array.from({ length: 5000 }, (_, i) => pet(i + 2, { quantity: i })), orders: [] })
    await Promise.all(streams.map((stream) => stream.reading))
    streams.forEach(({ socket }, i) => { if (i % 2 === 0) socket.destroy(); else socket.resetAndDestroy() })
    await until(() => lines.filter((line) => line.operation === 'streamInventoryChanges' && line.msg === 'request completed').length === 5, 'the five access lines')
    await until(async () => /^petstore_change_streams_open 0$/m.test((await s.app.inject({ method: 'GET', url: '/metrics' })).body), 'no stream open')
    assert.deepEqual(lines.filter((line) => (line.level as number) >= 40), [])
  })

  test('when the app closes while clients read nothing of their streams, then nothing is logged at warn or above', async (t) => {
    const lines: Array<Record<string, unknown>> = []
    const logger = pino({ level: 'debug' }, new Writable({ write (chunk: Buffer, _encoding, done) { lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>); done() } }))
    const s = await served(t, { pets: [pet(1)], deps: { logger } })
    const streams = await Promise.all([1, 2, 3].map(async () => await unreadStream(s, s.key)))
    t.after(() => { for (const { socket } of streams) socket.destroy() })
    await until(async () => /^petstore_change_streams_open 3$/m.test((await s.app.inject({ method: 'GET', url: '/metrics' })).body), 'three streams open')
    // More than the connections' buffers hold: the streams cannot hand everything over before the close.
    await importData(s.store, { pets: Array.from({ length: 20_000 }, (_, i) => pet(i + 2, { quantity: i })), orders: [] })
    await Promise.all(streams.map((stream) => stream.reading))
    await until(() => [...s.sockets].every((socket) => socket.writableLength > 0), 'the connections\' buffers full')
    // Each stream gets a moment to hand over what is queued; a client that reads nothing then loses its connection.
    await s.app.close()
    // The close returns once the connections are gone; their answers' last events come just after.
    await until(() => lines.filter((line) => line.operation === 'streamInventoryChanges' && line.msg === 'request completed').length === 3, 'the three access lines')
    assert.deepEqual(lines.filter((line) => (line.level as number) >= 40), [])
  })

  test('when the app closes, then open streams end at once and the close does not wait for them', async (t) => {
    const s = await served(t, { pets: [pet(1)] })
    const streams = await Promise.all([s.key, await newKey(s.store)].map((key) => openStream(s.baseUrl, auth(key))))
    assert.deepEqual(streams.map((stream) => stream.status), [200, 200])
    // The streams never end by themselves (a heartbeat every 15 s): a close that waited for them would not return.
    // The bound allows a loaded machine and stays far below that.
    const started = Date.now()
    await s.app.close()
    assert.ok(Date.now() - started < 5000, `closed in ${Date.now() - started} ms`)
    await Promise.all(streams.map((stream) => stream.ended))
  })

  test('when a client also holds a connection that has sent nothing yet (a pool\'s spare) as the app closes, then the close does not wait for it', async (t) => {
    const s = await served(t, { pets: [pet(1)] })
    const stream = await openStream(s.baseUrl, auth(s.key))
    assert.equal(stream.status, 200)
    const { port } = s.app.server.address() as AddressInfo
    const spare = connect(port, '127.0.0.1')
    spare.on('error', () => {})
    const spareClosed = new Promise((resolve) => spare.once('close', resolve))
    spare.resume()
    await until(() => s.sockets.size === 2, 'the spare connection accepted')
    // Node 22 and 24 do not count such a connection idle: the close waited until the client dropped it.
    const started = Date.now()
    await within(20_000, s.app.close(), 'the close').catch((error: unknown) => {
      // Lets the close, and the test's teardown after it, finish.
      spare.destroy()
      throw error
    })
    assert.ok(Date.now() - started < 5000, `closed in ${Date.now() - started} ms`)
    await stream.ended
    await within(WAIT_TIMEOUT_MS, spareClosed, 'the spare connection closed by the server')
  })

  test('when the instance drains (SIGTERM), then open streams end and their connection closes; a stream opened while draining is served until the close', async (t) => {
    const lifecycle = new Lifecycle()
    const s = await served(t, { pets: [pet(1)], deps: { lifecycle } })
    const stream = await openStream(s.baseUrl, auth(s.key))
    assert.equal(stream.status, 200)
    const connections = s.sockets.size
    lifecycle.drain()
    await stream.ended
    await until(() => s.sockets.size < connections, 'its connection closed')
    const late = await openStream(s.baseUrl, auth(s.key))
    assert.equal(late.status, 200)
    assert.equal(late.headers.get('connection'), 'close')
    await patch(s, s.key, 1, 3)
    assert.deepEqual((await late.waitFor(1)).map(quantityOf), [3])
    await s.app.close()
    await late.ended
  })

  test('when a reader stops reading, then the stream stops reading the feed; once it reads again, every change arrives in order', async (t) => {
    const total = 30_000
    const store = await tempStore(t)
    const s = await served(t, { store, pets: Array.from({ length: total }, (_, i) => pet(i + 1, { quantity: i })) })
    let read = 0
    const listChanges = store.stock.listChanges.bind(store.stock)
    store.stock.listChanges = async (after, limit) => {
      const changes = await listChanges(after, limit)
      read += changes.length
      return changes
    }
    const { port } = s.app.server.address() as AddressInfo
    const response = await new Promise<IncomingMessage>((resolve) => {
      httpGet({ host: '127.0.0.1', port, path: `/v1/inventory/changes/stream?after=${Buffer.from('f1:0.0').toString('base64url')}`, headers: auth(s.key) }, resolve)
    })
    t.after(() => { response.destroy() })
    assert.equal(response.statusCode, 200)
    response.pause()
    // The socket's buffers fill; then nothing more is read from the store.
    let before = -1
    await until(async () => {
      const now = read
      await sleep(100)
      const stable = now === read && now === before
      before = read
      return stable
    }, 'reading to stop')
    assert.ok(read < total, `read ${read} of ${total} changes while the reader was stalled`)
    const quantities: number[] = []
    const parser = createParser({ onEvent: (event) => { quantities.push(quantityOf(event as SseEvent)) } })
    response.setEncoding('utf8')
    response.on('data', (text: string) => { parser.feed(text) })
    response.resume()
    await until(() => quantities.length === total, 'every change')
    assert.deepEqual(quantities, Array.from({ length: total }, (_, i) => i), 'all, in order, once')
  })
})

/** The key cache's lifetime in the tests of a stream following its key: short, and far below their heartbeat. */
const KEY_TTL_MS = 500
/**
 * A stream ends within KEY_TTL_MS of its key's refusal on a quiet machine; this allows a loaded one and stays far below
 * what a stream that does not follow its key would take (the heartbeat, a minute here, or never).
 */
const KEY_FOLLOW_SLACK_MS = 2500
/** The tests of a stream following its key: a short key cache, a heartbeat so rare that nothing else ends the stream. */
const FOLLOWING = { AUTH_CACHE_TTL_MS: String(KEY_TTL_MS), STREAM_HEARTBEAT_MS: '60000' }

interface Refusal {
  name: string
  /** What a new request with the key gets from then on (status and code). */
  answer: string
  /** Refuses the key (as the CLI or another instance does, in the store); resolves with the instant it takes effect (ms). */
  refuse: (store: Store, keyId: string) => Promise<number>
}

const REFUSALS: Refusal[] = [
  { name: 'revoked', answer: '401 unauthorized', refuse: async (store, id) => { await revokeKey(store, id); return Date.now() } },
  { name: 'rotated with no overlap', answer: '401 unauthorized', refuse: async (store, id) => { await rotateKey(store, 'production', id, { overlapMs: 0 }); return Date.now() } },
  {
    name: 'expired at the end of a rotation\'s overlap',
    answer: '401 unauthorized',
    refuse: async (store, id) => (await rotateKey(store, 'production', id, { overlapMs: 800 })).previousEndsAt.getTime()
  },
  {
    name: 'banned',
    answer: '429 key_banned',
    refuse: async (store, id) => {
      const now = Date.now()
      await store.keys.banApiKey(id, { since: new Date(now), until: new Date(now + 900_000), seconds: 900 })
      return now
    }
  }
]

/** A key of its own for a stream, with room for the polling of a test (an enterprise key). */
async function streamKey (store: Store): Promise<{ key: string, id: string }> {
  const { key, record } = await createKey(store, 'production', { plan: 'enterprise', name: 'streamer', perMinute: 100_000, perDay: 1_000_000 })
  return { key, id: record.id }
}

/** What a new request with `key` gets now from `app` (a cheap read): its status, and its error code if any. */
async function answerTo (app: FastifyInstance, key: string): Promise<string> {
  const res = await app.inject({ method: 'GET', url: '/v1/inventory/changes?limit=1', headers: auth(key) })
  return res.statusCode === 200 ? '200' : `${res.statusCode} ${(res.json() as { code: string }).code}`
}

/** Sends requests with `key` to `app` until it is banned for its strikes (a limit and a strike threshold set low). */
async function banByStrikes (app: FastifyInstance, key: string): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const res = await app.inject({ method: 'GET', url: '/v1/inventory/changes?limit=1', headers: auth(key) })
    if (res.statusCode === 429 && (res.json() as { code: string }).code === 'key_banned') return
  }
  assert.fail('the key was not banned after 20 requests')
}

describe('a stream follows its key', () => {
  for (const { name, answer, refuse } of REFUSALS) {
    test(`when the key is ${name}, then its stream ends within AUTH_CACHE_TTL_MS, and nothing committed once a request with the key is refused reaches it`, async (t) => {
      const s = await served(t, { env: FOLLOWING, pets: [pet(1, { quantity: 1 })] })
      const { key, id } = await streamKey(s.store)
      const stream = await openStream(s.baseUrl, auth(key))
      t.after(() => { stream.close() })
      assert.equal(stream.status, 200)
      await patch(s, s.key, 1, 2)
      await stream.waitFor(1)
      const effective = await refuse(s.store, id)
      const refusedAt = performance.now() + (effective - Date.now())
      // What a request with the key meets on this instance within the cache's lifetime.
      await until(async () => await answerTo(s.app, key) === answer, `a request with the key answered ${answer}`)
      await patch(s, s.key, 1, 3)
      await until(() => stream.isEnded(), 'the stream to end')
      const ended = (stream.endedAt() ?? 0) - refusedAt
      assert.ok(ended < KEY_TTL_MS + KEY_FOLLOW_SLACK_MS, `ended ${Math.round(ended)} ms after the key was refused`)
      assert.deepEqual(stream.events.map(quantityOf), [2], 'nothing committed after the refusal')
      assert.equal((await openStream(s.baseUrl, auth(key))).status, Number(answer.slice(0, 3)), 'and its reconnect is refused as any request is')
    })
  }

  test('when the key is revoked and nothing else happens (no request, no change), then its idle stream still ends within AUTH_CACHE_TTL_MS', async (t) => {
    const s = await served(t, { env: FOLLOWING, pets: [pet(1)] })
    const { key, id } = await streamKey(s.store)
    const stream = await openStream(s.baseUrl, auth(key))
    t.after(() => { stream.close() })
    assert.equal(stream.status, 200)
    const revokedAt = performance.now()
    await revokeKey(s.store, id)
    await until(() => stream.isEnded(), 'the stream to end')
    const ended = (stream.endedAt() ?? 0) - revokedAt
    assert.ok(ended < KEY_TTL_MS + KEY_FOLLOW_SLACK_MS, `ended ${Math.round(ended)} ms after the revocation`)
  })

  test('when the key is banned on this instance while its stream is open, then the next change is not written and the stream ends, before the key cache would have expired', async (t) => {
    // A ban imposed here drops the key's cached lookup: the check before the next write reads the ban.
    const s = await served(t, { env: { AUTH_CACHE_TTL_MS: '60000', STREAM_HEARTBEAT_MS: '60000', RATE_LIMIT_FREE: '2/1000', BAN_STRIKES: '1' }, pets: [pet(1, { quantity: 1 })] })
    const { key } = await createKey(s.store, 'production', { plan: 'free', name: 'striker', perMinute: null, perDay: null })
    const writer = await newKey(s.store, 'enterprise')
    const stream = await openStream(s.baseUrl, auth(key))
    t.after(() => { stream.close() })
    assert.equal(stream.status, 200)
    await banByStrikes(s.app, key)
    await patch(s, writer, 1, 5)
    await until(() => stream.isEnded(), 'the stream to end')
    assert.deepEqual(stream.events, [], 'the change committed after the ban was not written')
  })

  test('when the key\'s lookup is cached, then an open stream asks the store about it about once per AUTH_CACHE_TTL_MS, not per change', async (t) => {
    const store = await tempStore(t)
    let lookups = 0
    const find = store.keys.findApiKeyByHash.bind(store.keys)
    store.keys.findApiKeyByHash = async (hash) => { lookups++; return await find(hash) }
    const s = await served(t, { store, env: { AUTH_CACHE_TTL_MS: '60000' }, pets: [pet(1, { quantity: 0 })] })
    const { key } = await streamKey(s.store)
    const stream = await openStream(s.baseUrl, auth(key))
    t.after(() => { stream.close() })
    const before = lookups
    for (let quantity = 1; quantity <= 20; quantity++) await patch(s, s.key, 1, quantity)
    await stream.waitFor(20)
    // The writer's key was looked up once (on its first PATCH); the stream's key not at all: its lookup is cached.
    assert.equal(lookups - before, 1)
  })
})

describe('the stream across instances', () => {
  test('when a change is committed on another instance (two SQLite stores on one file), then it reaches the stream within a second', async (t) => {
    const file = join(tempDir(t), 'shared.db')
    const stores = [new SqliteStore(file), new SqliteStore(file)]
    t.after(() => Promise.all(stores.map((store) => store.close())))
    await stores[0]?.schema.migrate()
    const [a, b] = await Promise.all(stores.map((store) => served(t, { store })))
    assert.ok(a !== undefined && b !== undefined)
    await importData(a.store, { pets: [pet(1, { quantity: 1 })], orders: [] })
    const stream = await openStream(a.baseUrl, auth(a.key))
    t.after(() => { stream.close() })
    const sent = Date.now()
    await patch(b, a.key, 1, 8)
    assert.deepEqual((await stream.waitFor(1)).map(quantityOf), [8])
    // Seen within a poll (250 ms) on a quiet machine; the bound allows a loaded one, and stays far below a reconnect.
    assert.ok(Date.now() - sent < CROSS_INSTANCE_MS, `seen after ${Date.now() - sent} ms`)
  })
})

if (await requirePostgres('the change stream on PostgreSQL')) {
  describe('the stream on PostgreSQL', () => {
    test('when a change is committed on another instance, then it reaches the stream within a second; a quota\'s streams are counted across instances', async (t) => {
      const schema = await tempSchema(t)
      const stores = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema, poolSize: 4 }))
      t.after(() => Promise.all(stores.map((store) => store.close())))
      await stores[0]?.schema.migrate()
      await importData(stores[0] as Store, { pets: [pet(1, { quantity: 1 }), pet(BIG, { quantity: 2 })], orders: [] })
      const [a, b] = await Promise.all(stores.map((store) => served(t, { store, env: { STREAM_MAX_PER_QUOTA: '2' } })))
      assert.ok(a !== undefined && b !== undefined)
      const stream = await openStream(a.baseUrl, auth(a.key))
      t.after(() => { stream.close() })
      assert.equal(stream.status, 200)
      for (const [i, quantity] of [[0, 8], [1, 9]] as const) {
        const sent = Date.now()
        await patch(b, a.key, BIG, quantity)
        const events = await stream.waitFor(i + 1)
        assert.ok(Date.now() - sent < CROSS_INSTANCE_MS, `seen after ${Date.now() - sent} ms`)
        assert.equal(quantityOf(events[i] as SseEvent), quantity)
      }
      const second = await openStream(b.baseUrl, auth(a.key))
      t.after(() => { second.close() })
      assert.equal(second.status, 200)
      const third = await openStream(a.baseUrl, auth(a.key))
      assert.equal(third.status, 429, 'two open, one on each instance: the quota is full')
    })

    test('when a key is revoked through another instance\'s store, or banned by another instance, then its streams here end within AUTH_CACHE_TTL_MS and get nothing committed after', async (t) => {
      const schema = await tempSchema(t)
      const stores = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema, poolSize: 4 }))
      t.after(() => Promise.all(stores.map((store) => store.close())))
      await stores[0]?.schema.migrate()
      await importData(stores[0] as Store, { pets: [pet(1, { quantity: 1 })], orders: [] })
      // The ban is imposed by b alone: a keeps the default limits, and its checks below stay far within them.
      const [a, b] = await Promise.all(stores.map((store, i) => served(t, { store, env: i === 0 ? FOLLOWING : { ...FOLLOWING, RATE_LIMIT_FREE: '2/1000', BAN_STRIKES: '1' } })))
      assert.ok(a !== undefined && b !== undefined)
      const revoked = await streamKey(a.store)
      const banned = await createKey(a.store, 'production', { plan: 'free', name: 'striker', perMinute: null, perDay: null })
      const writer = await newKey(a.store, 'enterprise')
      const streams = await Promise.all([revoked.key, banned.key].map((key) => openStream(a.baseUrl, auth(key))))
      t.after(() => { for (const stream of streams) stream.close() })
      assert.deepEqual(streams.map((stream) => stream.status), [200, 200])
      await patch(b, writer, 1, 2)
      await Promise.all(streams.map((stream) => stream.waitFor(1)))
      const refusedAt = performance.now()
      await revokeKey(b.store, revoked.id)
      await banByStrikes(b.app, banned.key)
      // Refused on this instance too once its cached lookups expire; a change committed then reaches neither stream.
      await waitFor('both keys refused here', async () => await answerTo(a.app, revoked.key) === '401 unauthorized' && await answerTo(a.app, banned.key) === '429 key_banned',
        { intervalMs: 100 })
      await patch(b, writer, 1, 3)
      await until(() => streams.every((stream) => stream.isEnded()), 'both streams to end')
      for (const stream of streams) {
        const ended = (stream.endedAt() ?? 0) - refusedAt
        assert.ok(ended < KEY_TTL_MS + KEY_FOLLOW_SLACK_MS, `ended ${Math.round(ended)} ms after the refusals began`)
        assert.deepEqual(stream.events.map(quantityOf), [2], 'nothing committed after the refusal')
      }
    })
  })
}

describe('client: streamChanges', () => {
  /** Real fetch, recording each stream connect's Last-Event-ID. */
  function recordingFetch () {
    const connects: Array<string | null> = []
    const recorded: typeof fetch = async (input, init) => {
      if (String(input).endsWith('/changes/stream')) connects.push(new Headers(init?.headers).get('last-event-id'))
      return await fetch(input, init)
    }
    return { fetch: recorded, connects }
  }

  /** Collects what the iterator yields until stopped. */
  function collect (iterator: AsyncIterable<InventoryChange>) {
    const changes: InventoryChange[] = []
    const done = (async () => { for await (const change of iterator) changes.push(change) })()
    done.catch(() => {})
    return { changes, done }
  }

  test('when the server ends the stream (a drain), then the iterator reconnects from the last change: nothing missed or repeated, ids exact', async (t) => {
    const lifecycle = new Lifecycle()
    const s = await served(t, { pets: [pet(1, { quantity: 1 }), pet(BIG, { quantity: 2 }), pet(3, { quantity: 3 })], deps: { lifecycle } })
    const recorder = recordingFetch()
    const delays: number[] = []
    const client = createClient({ baseUrl: s.baseUrl, apiKey: s.key, fetch: recorder.fetch, random: () => 0.5, sleep: async (ms) => { delays.push(ms) } })
    const stop = new AbortController()
    const { changes, done } = collect(client.streamChanges({ after: await cursorAt(s.store, 0), signal: stop.signal }))
    await until(() => changes.length === 2, 'the replay')
    assert.deepEqual(changes.map((c) => [c.petId, c.quantity]), [[BIG, 2], [3n, 3]])
    await patch(s, s.key, 1, 10)
    await until(() => changes.length === 3, 'a live change')
    const lastBefore = changes[2]?.cursor
    lifecycle.drain()
    // Committed while the client is between connections.
    await patch(s, s.key, BIG, 20)
    await until(() => changes.length === 4, 'the change made during the reconnect')
    await patch(s, s.key, 3, 30)
    await until(() => changes.length === 5, 'a live change on the new connection')
    stop.abort()
    await done
    assert.deepEqual(changes.map((c) => [c.petId, c.quantity]), [[BIG, 2], [3n, 3], [1n, 10], [BIG, 20], [3n, 30]])
    assert.equal(new Set(changes.map((c) => c.cursor)).size, 5, 'none twice')
    assert.deepEqual(recorder.connects, [await cursorAt(s.store, 0), lastBefore], 'the reconnect resumed after the last change handed out')
    assert.deepEqual(delays, [500], 'the server\'s retry (1000 ms), jittered')
    assert.equal(typeof changes[0]?.changeId, 'bigint')
  })

  test('when the connection drops, then the iterator reconnects and goes on; break closes the connection', async (t) => {
    const s = await served(t, { pets: [pet(1, { quantity: 1 })] })
    const recorder = recordingFetch()
    const client = createClient({ baseUrl: s.baseUrl, apiKey: s.key, fetch: recorder.fetch, random: () => 0, sleep: async () => {} })
    const seen: number[] = []
    const iterating = (async () => {
      for await (const change of client.streamChanges()) {
        seen.push(change.quantity)
        if (seen.length === 1) {
          // The server's side of the connection goes away.
          for (const socket of s.sockets) socket.destroy()
          await patch(s, s.key, 1, 3)
        }
        if (seen.length === 2) break
      }
    })()
    // Open: its start (the head at connect) is taken.
    await until(async () => /^petstore_change_streams_open 1$/m.test((await s.app.inject({ method: 'GET', url: '/metrics' })).body), 'the stream open')
    await patch(s, s.key, 1, 2)
    await iterating
    assert.deepEqual(seen, [2, 3])
    assert.equal(recorder.connects.length, 2)
    await until(async () => /^petstore_change_streams_open 0$/m.test((await s.app.inject({ method: 'GET', url: '/metrics' })).body), 'no stream left open')
  })

  test('when a reconnect is refused 429 rate_limited, then the iterator waits Retry-After and goes on', async (t) => {
    const clock = { now: Date.parse('2026-11-22T12:00:00Z') }
    const lifecycle = new Lifecycle()
    const s = await served(t, { env: { RATE_LIMIT_FREE: '1/100' }, pets: [pet(1, { quantity: 1 })], deps: { lifecycle, clock: () => clock.now } })
    const delays: number[] = []
    const client = createClient({
      baseUrl: s.baseUrl, apiKey: s.key, random: () => 0, sleep: async (ms) => { delays.push(ms); clock.now += ms }
    })
    const stop = new AbortController()
    const { changes, done } = collect(client.streamChanges({ after: await cursorAt(s.store, 0), signal: stop.signal }))
    // The drain ends the streams open when it starts: this one must be open by then.
    await until(async () => /^petstore_change_streams_open 1$/m.test((await s.app.inject({ method: 'GET', url: '/metrics' })).body), 'the stream open')
    lifecycle.drain()
    const other = await newKey(s.store)
    await patch(s, other, 1, 5)
    await until(() => changes.length === 1, 'the change after the refused reconnect')
    stop.abort()
    await done
    assert.equal(delays.length, 2)
    assert.equal(delays[0], 0, 'the server\'s retry, jittered to 0')
    assert.ok((delays[1] ?? 0) >= 1000 && (delays[1] ?? 0) % 1000 === 0, `then exactly Retry-After: ${delays[1]}`)
  })
})
