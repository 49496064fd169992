/**
 * The typed client against the real server: an app listening on a loopback port, called with real fetch.
 * Delays are recorded by an injected sleep (which moves the app's clock where time matters), so nothing waits.
 */
import assert from 'node:assert/strict'
import { createServer as createHttpServer, request as httpRequest } from 'node:http'
import { createServer, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { describe, test, type TestContext } from 'node:test'
import { inspect } from 'node:util'
import { createClient, InsufficientScopeError, PetstoreError, type ClientOptions, type PetstoreClient, type RateLimitedEvent } from '../../client/index.js'
import { createKey } from '../../src/access/keys.js'
import { StoreUnavailableError } from '../../src/errors.js'
import type { Order, PetImport } from '../../src/model.js'
import { importData } from '../../src/domain/import.js'
import { auth, order, pet, testApp } from '../helpers/app.js'
import { freePort } from '../helpers/net.js'

const BIG = 9007199254740993n // 2^53 + 1: JSON.parse would read 9007199254740992

/** An app on a temp store, listening on a free loopback port. */
async function served (t: TestContext, env: Record<string, string> = {}, data?: { pets?: PetImport[], orders?: Order[] }) {
  const ctx = await testApp(t, env, data)
  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = ctx.app.server.address() as AddressInfo
  return { ...ctx, baseUrl: `http://127.0.0.1:${port}` }
}

/**
 * A reverse proxy that serves `target` under `prefix` (as a gateway serving several services from one host does):
 * `PREFIX/v1/...` is forwarded as `/v1/...`; anything outside the prefix is 404, as such a gateway answers it.
 */
async function prefixProxy (t: TestContext, target: string, prefix: string): Promise<string> {
  const server = createHttpServer((incoming, outgoing) => {
    if (incoming.url?.startsWith(`${prefix}/`) !== true) {
      outgoing.writeHead(404).end('not behind this proxy')
      return
    }
    const upstream = httpRequest(new URL(incoming.url.slice(prefix.length), target), { method: incoming.method, headers: incoming.headers }, (answer) => {
      outgoing.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(outgoing)
    })
    upstream.on('error', () => outgoing.destroy())
    incoming.pipe(upstream)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}${prefix}`
}

/** Real fetch, with every request recorded. */
function recordingFetch () {
  const requests: string[] = []
  const recorded: typeof fetch = async (input, init) => {
    requests.push(`${init?.method ?? 'GET'} ${String(input)}`)
    return fetch(input, init)
  }
  return { fetch: recorded, requests }
}

/** A sleep that records each delay instead of waiting, and optionally moves a clock by it. */
function recordingSleep (clock?: { now: number }) {
  const delays: number[] = []
  const sleep = async (ms: number) => {
    delays.push(ms)
    if (clock !== undefined) clock.now += ms
  }
  return { sleep, delays }
}

async function rejection (promise: Promise<unknown>): Promise<PetstoreError> {
  try {
    await promise
  } catch (error) {
    assert.ok(error instanceof PetstoreError, `expected a PetstoreError, got ${inspect(error)}`)
    return error
  }
  assert.fail('expected the call to fail')
}

function clientFor (baseUrl: string, key: string, options: Partial<ClientOptions> = {}) {
  const recorder = recordingFetch()
  const sleeper = recordingSleep()
  const client = createClient({ baseUrl, apiKey: key, fetch: recorder.fetch, sleep: sleeper.sleep, random: () => 0.5, ...options })
  return { client, requests: recorder.requests, delays: sleeper.delays }
}

describe('typed client: data', () => {
  test('when the inventory holds an id above 2^53, then listInventory returns it as that exact bigint and counts as numbers', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(BIG, { quantity: 4 }), pet(1, { quantity: 5, status: 'sold' })] })
    const { client } = clientFor(baseUrl, key)
    const result = await client.listInventory()
    assert.equal(result.notModified, false)
    assert.deepEqual(result.data, [
      { petId: 1n, quantity: 5, status: 'sold' },
      { petId: BIG, quantity: 4, status: 'available' }
    ])
    assert.equal(typeof result.data?.[1]?.quantity, 'number')
    assert.match(result.etag ?? '', /^"/)
    assert.equal(result.rateLimit?.limit, 60)
    assert.equal(result.rateLimit?.remaining, 59)
    assert.ok(result.requestId)
  })

  test('when a copy is taken with listInventory and kept with inventoryChanges from its changesCursor, then it equals the inventory', async (t) => {
    const { baseUrl, key, store } = await served(t, {}, { pets: [pet(1, { quantity: 5 }), pet(2, { quantity: 1 })] })
    const { client } = clientFor(baseUrl, key)
    const listing = await client.listInventory()
    assert.match(listing.changesCursor ?? '', /^[A-Za-z0-9_-]+$/)
    const copy = new Map((listing.data ?? []).map((entry) => [entry.petId, { ...entry }]))
    // The import writes through this process's own store connection, which the listing notices at the next write here
    // (the CLI's import, another process, is noticed by itself), so it comes first.
    await importData(store, { pets: [pet(1, { quantity: 5, status: 'sold' })], orders: [] })
    await client.updateInventory(2, { quantity: 7 })
    for await (const change of client.inventoryChanges({ after: listing.changesCursor ?? undefined })) {
      const entry = copy.get(change.petId) ?? { petId: change.petId, quantity: 0, status: 'available' as const }
      entry.quantity = change.quantity
      if (change.status !== null) entry.status = change.status
      copy.set(change.petId, entry)
    }
    assert.deepEqual([...copy.values()], (await client.listInventory()).data)
  })

  test('when the ETag sent still matches, then listInventory answers notModified without a body', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(1)] })
    const { client } = clientFor(baseUrl, key)
    const first = await client.listInventory()
    const again = await client.listInventory({ ifNoneMatch: first.etag ?? '' })
    assert.equal(again.notModified, true)
    assert.equal(again.status, 304)
    assert.equal(again.data, null)
  })

  test('when updateInventory is called on an id above 2^53, then that exact entry changes', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(BIG, { quantity: 4 }), pet(BIG - 1n, { quantity: 4 })] })
    const { client } = clientFor(baseUrl, key)
    const updated = await client.updateInventory(BIG, { quantity: 12, reason: 'arrival', note: 'Delivery from the breeder' })
    assert.deepEqual(updated.data, { petId: BIG, quantity: 12, status: 'available' })
    // The same id as decimal text works too.
    await client.updateInventory(String(BIG + 0n), { quantity: 13 })
    const list = await client.listInventory()
    assert.deepEqual(list.data, [
      { petId: BIG - 1n, quantity: 4, status: 'available' },
      { petId: BIG, quantity: 13, status: 'available' }
    ])
  })

  test('when a path id is an unsafe number or not canonical int64 text, then the call throws before sending', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(1)] })
    const { client, requests } = clientFor(baseUrl, key)
    await assert.rejects(client.getPet(2 ** 53 + 2), RangeError)
    await assert.rejects(client.getPet('01'), RangeError)
    await assert.rejects(client.getPet('1e3'), RangeError)
    await assert.rejects(client.updateInventory(2n ** 63n, { quantity: 1 }), RangeError)
    assert.deepEqual(requests, [])
  })

  test('when getPet is called, then it returns the pet with bigint ids and the deprecation headers parsed', async (t) => {
    const { baseUrl, key } = await served(t, {}, {
      pets: [pet(BIG, { category: { id: BIG + 1n, name: 'Dogs' }, tags: [{ id: 2n, name: 'calm' }], photoUrls: [] })]
    })
    const { client } = clientFor(baseUrl, key)
    const result = await client.getPet(BIG)
    assert.equal(result.data.id, BIG)
    assert.equal(result.data.category?.id, BIG + 1n)
    assert.equal(result.data.tags?.[0]?.id, 2n)
    assert.equal(result.deprecation.deprecatedAt?.toISOString(), '2026-06-01T00:00:00.000Z')
    assert.equal(result.deprecation.sunset?.toISOString(), '2027-12-31T23:59:59.000Z')
    assert.match(result.deprecation.link ?? '', /^https:\/\/docs\.petstore\.example\//)
  })

  test('when orders span pages, then allOrders follows the rel="next" links and yields every order once', async (t) => {
    const orders = [1, 2, 3, 4, 5].map((id) => order(id, { petId: BIG, status: id === 3 ? 'delivered' : 'placed' }))
    const { baseUrl, key } = await served(t, {}, { pets: [pet(BIG)], orders })
    const { client, requests } = clientFor(baseUrl, key)
    const seen: bigint[] = []
    for await (const item of client.allOrders({ limit: 2, status: 'placed' })) {
      assert.equal(item.petId, BIG)
      seen.push(item.id)
    }
    assert.deepEqual(seen, [1n, 2n, 4n, 5n])
    assert.equal(requests.length, 2)

    const first = await client.listOrders({ limit: 2 })
    assert.deepEqual(first.data.map((o) => o.id), [1n, 2n])
    assert.ok(first.nextCursor !== null)
    const second = await client.listOrders({ limit: 2, cursor: first.nextCursor })
    assert.deepEqual(second.data.map((o) => o.id), [3n, 4n])
  })

  test('when the inventory spans pages, then allInventory yields every entry once, in petId order, one request per page', async (t) => {
    const pets = [BIG, 1n, 2n, 3n, BIG - 1n].map((id, i) => pet(id, { quantity: i }))
    const { baseUrl, key } = await served(t, {}, { pets })
    const { client, requests } = clientFor(baseUrl, key)
    const seen = []
    for await (const item of client.allInventory({ limit: 2 })) seen.push(item)
    assert.deepEqual(seen.map((item) => [item.petId, item.quantity]), [[1n, 1], [2n, 2], [3n, 3], [BIG - 1n, 4], [BIG, 0]])
    assert.deepEqual(seen, (await client.listInventory()).data, 'the pages hold what the whole listing holds')
    assert.equal(requests.length, 4, 'three pages and the whole listing')
    assert.equal(requests[0], `GET ${baseUrl}/v1/inventory?limit=2`)
    assert.match(requests[1] ?? '', /^GET http:\/\/127\.0\.0\.1:\d+\/v1\/inventory\?limit=2&cursor=[^&]+$/)

    const { client: fresh, requests: one } = clientFor(baseUrl, key)
    const all = []
    for await (const item of fresh.allInventory()) all.push(item.petId)
    assert.deepEqual([all.length, one], [5, [`GET ${baseUrl}/v1/inventory?limit=100`]], 'a page of 100 by default')
  })

  test('when the service is behind a proxy that serves it under a path prefix, then allInventory, allOrders and inventoryChanges follow the links there', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [1, 2, 3].map((id) => pet(id, { quantity: id })), orders: [1, 2, 3].map((id) => order(id)) })
    const proxied = await prefixProxy(t, baseUrl, '/inventory-api')
    const { client, requests } = clientFor(proxied, key)
    const stock = []
    for await (const item of client.allInventory({ limit: 2 })) stock.push(item.petId)
    const orders = []
    for await (const item of client.allOrders({ limit: 2 })) orders.push(item.id)
    const changes = []
    for await (const change of client.inventoryChanges({ limit: 2 })) changes.push(change.quantity)
    assert.deepEqual([stock, orders, changes], [[1n, 2n, 3n], [1n, 2n, 3n], [1, 2, 3]])
    assert.equal(requests.length, 7, 'two pages each, and the feed\'s empty page that says it is caught up')
    for (const request of requests) assert.ok(request.startsWith(`GET ${proxied}/v1/`), request)
    const page = await client.listOrders({ limit: 2 })
    assert.match(page.nextUrl ?? '', new RegExp(`^${proxied}/v1/store/orders\\?limit=2&cursor=[\\w-]+$`))
  })

  test('when listing page by page, then each page holds limit entries and the cursor of the next; the first carries the feed cursor', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [1, 2, 3].map((id) => pet(id, { quantity: id })) })
    const { client } = clientFor(baseUrl, key)
    const first = await client.listInventoryPage({ limit: 2 })
    assert.deepEqual(first.data, [{ petId: 1n, quantity: 1, status: 'available' }, { petId: 2n, quantity: 2, status: 'available' }])
    assert.equal(first.status, 200)
    assert.equal(first.etag, null, 'a page carries no ETag')
    assert.ok(first.changesCursor)
    assert.equal(first.changesCursor, (await client.listInventory()).changesCursor, 'the feed cursor, as on the whole listing')
    assert.ok(first.nextCursor !== null && first.nextUrl?.endsWith(`cursor=${first.nextCursor}`))
    const last = await client.listInventoryPage({ limit: 2, cursor: first.nextCursor })
    assert.deepEqual(last.data.map((item) => item.petId), [3n])
    assert.deepEqual([last.nextCursor, last.nextUrl, last.changesCursor], [null, null, null])
    const refused = await rejection(client.listInventoryPage({ cursor: 'not-a-cursor' }))
    assert.deepEqual([refused.status, refused.code], [400, 'invalid_request'])
  })

  test('when imported through the package path petstore-inventory/client, then the built client works', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(BIG, { quantity: 4 })] })
    const packaged = await import('petstore-inventory/client')
    const client = packaged.createClient({ baseUrl: `${baseUrl}/v1`, apiKey: key })
    const result = await client.listInventory()
    assert.deepEqual(result.data, [{ petId: BIG, quantity: 4, status: 'available' }])
    await assert.rejects(client.getPet(2n), (error) => error instanceof packaged.PetstoreError && error.code === 'not_found')
  })
})

describe('typed client: errors and retries', () => {
  test('when the pet does not exist, then a PetstoreError not_found is thrown after one request', async (t) => {
    const { baseUrl, key } = await served(t)
    const { client, requests, delays } = clientFor(baseUrl, key)
    const error = await rejection(client.getPet(42))
    assert.equal(error.status, 404)
    assert.equal(error.code, 'not_found')
    assert.equal(error.attempts, 1)
    assert.ok(error.requestId)
    assert.equal(requests.length, 1)
    assert.deepEqual(delays, [])
  })

  test('when the minute window is exhausted, then the client waits exactly Retry-After and the retry passes', async (t) => {
    const { baseUrl, key, clock } = await served(t, { RATE_LIMIT_FREE: '2/100' }, { pets: [pet(1)] })
    const sleeper = recordingSleep(clock)
    const { client, requests } = clientFor(baseUrl, key, { sleep: sleeper.sleep })
    await client.listInventory()
    await client.listInventory()
    // 12:00:00: the third request is refused with Retry-After: 60; the sleep moves the app's clock to 12:01:00.
    const third = await client.listInventory()
    assert.equal(third.status, 200)
    assert.deepEqual(sleeper.delays, [60_000])
    assert.equal(requests.length, 4)
  })

  test('when Retry-After exceeds maxDelayMs, then the client gives up at once rather than retry early', async (t) => {
    const { baseUrl, key } = await served(t, { RATE_LIMIT_FREE: '2/100' }, { pets: [pet(1)] })
    const { client, requests, delays } = clientFor(baseUrl, key, { maxDelayMs: 30_000 })
    await client.listInventory()
    await client.listInventory()
    const error = await rejection(client.listInventory())
    assert.equal(error.code, 'rate_limited')
    assert.equal(error.retryAfterSeconds, 60)
    assert.deepEqual(delays, [])
    assert.equal(requests.length, 3)
  })

  test('when a call is refused 429 and onRateLimited is given, then it is told the operation, the wait and the attempt before the sleep, and the retry passes', async (t) => {
    const { baseUrl, key, clock } = await served(t, { RATE_LIMIT_FREE: '2/100' }, { pets: [pet(1)] })
    const happened: string[] = []
    const events: RateLimitedEvent[] = []
    const { client, requests } = clientFor(baseUrl, key, {
      sleep: async (ms) => { happened.push(`sleep ${ms}`); clock.now += ms },
      onRateLimited: async (event) => {
        // Awaited: the sleep starts once this resolves.
        await new Promise((resolve) => setTimeout(resolve, 20))
        happened.push('told')
        events.push(event)
        return true
      }
    })
    await client.listInventory()
    await client.listInventory()
    const third = await client.listInventory()
    assert.equal(third.status, 200)
    assert.deepEqual(happened, ['told', 'sleep 60000'])
    assert.equal(requests.length, 4)
    const [event] = events
    assert.deepEqual([event?.operation, event?.retryAfterSeconds, event?.waitMs, event?.attempt, event?.maxAttempts], ['listInventory', 60, 60_000, 1, 4])
    assert.deepEqual([event?.error.status, event?.error.code, event?.error.retryAfterSeconds], [429, 'rate_limited', 60])
    assert.deepEqual([event?.error.rateLimit?.limit, event?.error.rateLimit?.remaining], [2, 0], 'the window that refused')
    assert.ok(event?.error.requestId)
  })

  test('when onRateLimited returns false (a 60 s wait is too long for this caller), then the call throws the 429 at once, without sleeping', async (t) => {
    const { baseUrl, key } = await served(t, { RATE_LIMIT_FREE: '2/100' }, { pets: [pet(1, { quantity: 1 })] })
    const asked: number[] = []
    const { client, requests, delays } = clientFor(baseUrl, key, {
      onRateLimited: ({ waitMs }) => {
        asked.push(waitMs)
        return waitMs <= 5_000
      }
    })
    await client.listInventory()
    await client.listInventory()
    const error = await rejection(client.updateInventory(1, { quantity: 2 }))
    assert.deepEqual([error.status, error.code, error.retryAfterSeconds, error.attempts], [429, 'rate_limited', 60, 1])
    assert.match(error.idempotencyKey ?? '', /^[0-9a-f-]{36}$/, 'a write says which key to send again later')
    assert.deepEqual(asked, [60_000])
    assert.deepEqual(delays, [])
    assert.equal(requests.length, 3)
  })

  test('when onRateLimited throws, then the call throws that error, without sleeping', async (t) => {
    const { baseUrl, key } = await served(t, { RATE_LIMIT_FREE: '1/100' }, { pets: [pet(1, { quantity: 1 })] })
    const stop = new Error('the nightly sync is over its budget: try tomorrow')
    const { client, delays } = clientFor(baseUrl, key, { onRateLimited: () => { throw stop } })
    await client.adjustInventory(1, { delta: 1 })
    await assert.rejects(client.adjustInventory(1, { delta: 1 }), (error) => error === stop)
    assert.deepEqual(delays, [])
  })

  test('when the client would not sleep on a 429 anyway, or retries another answer, then onRateLimited is not called', async (t) => {
    const { baseUrl, key, store } = await served(t, { RATE_LIMIT_FREE: '2/100' }, { pets: [pet(1)] })
    const told: string[] = []
    const onRateLimited = ({ operation }: RateLimitedEvent) => { told.push(operation) }
    // Retry-After (60 s) above maxDelayMs: the call gives up without a wait to announce.
    const { client } = clientFor(baseUrl, key, { onRateLimited, maxDelayMs: 30_000 })
    await client.listInventory()
    await client.listInventory()
    assert.equal((await rejection(client.listInventory())).code, 'rate_limited')
    // The last try: nothing follows it.
    assert.equal((await rejection(clientFor(baseUrl, key, { onRateLimited, maxAttempts: 1 }).client.listInventory())).code, 'rate_limited')
    // A 503 is retried after its backoff: not a rate limit.
    let failures = 1
    const getPet = store.catalog.getPet.bind(store.catalog)
    store.catalog.getPet = async (id) => {
      if (failures-- > 0) throw new StoreUnavailableError('injected outage')
      return getPet(id)
    }
    const { client: other } = clientFor(baseUrl, (await createKey(store, 'production', { plan: 'free', name: 'other', perMinute: null, perDay: null })).key, { onRateLimited })
    assert.equal((await other.getPet(1)).status, 200)
    assert.deepEqual(told, [])
  })

  test('when a change stream\'s connect is refused 429 and onRateLimited declines the wait, then the iteration throws the refusal', async (t) => {
    const { baseUrl, key } = await served(t, { RATE_LIMIT_FREE: '1/100' }, { pets: [pet(1)] })
    const events: RateLimitedEvent[] = []
    const { client, requests, delays } = clientFor(baseUrl, key, {
      onRateLimited: (event) => {
        events.push(event)
        return false
      }
    })
    await client.listInventory()
    const error = await rejection((async () => { for await (const change of client.streamChanges()) assert.fail(`no change expected: ${inspect(change)}`) })())
    assert.deepEqual([error.status, error.code], [429, 'rate_limited'])
    assert.deepEqual(events.map((event) => [event.operation, event.attempt, event.waitMs]), [['streamInventoryChanges', 1, (error.retryAfterSeconds ?? 0) * 1000]])
    assert.deepEqual(delays, [])
    assert.deepEqual(requests, [`GET ${baseUrl}/v1/inventory`, `GET ${baseUrl}/v1/inventory/changes/stream`], 'one connect, not retried')
  })

  test('when the key is banned, then the call throws at once and later calls fail fast until the ban ends', async (t) => {
    const { baseUrl, key, clock, request } = await served(t, { RATE_LIMIT_FREE: '1/100', BAN_STRIKES: '1' }, { pets: [pet(1)] })
    // One request passes, the next is refused: the first strike bans the key (for 900 s).
    await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 429)
    const { client, requests, delays } = clientFor(baseUrl, key, { now: () => clock.now })

    const banned = await rejection(client.listInventory())
    assert.equal(banned.code, 'key_banned')
    assert.equal(banned.status, 429)
    assert.equal(banned.retryAfterSeconds, 900)
    assert.equal(requests.length, 1)
    assert.deepEqual(delays, [])

    const again = await rejection(client.getPet(1))
    assert.equal(again.code, 'key_banned')
    assert.equal(again.attempts, 0)
    assert.equal(again.retryAfterSeconds, 900)
    assert.equal(requests.length, 1)

    // The status call is still sent and answered: it tells when the ban ends.
    const status = await client.rateLimit()
    assert.equal(status.data.bannedUntil, new Date(clock.now + 900_000).toISOString())
    assert.equal(requests.length, 2)

    clock.now += 900_000
    const after = await client.listInventory()
    assert.equal(after.status, 200)
    assert.equal(requests.length, 3)
  })

  test('when the store is unavailable for two requests, then the client backs off with jitter above Retry-After and succeeds', async (t) => {
    const { baseUrl, key, store } = await served(t, {}, { pets: [pet(BIG)] })
    const getPet = store.catalog.getPet.bind(store.catalog)
    let failures = 2
    store.catalog.getPet = async (id) => {
      if (failures-- > 0) throw new StoreUnavailableError('injected outage')
      return getPet(id)
    }
    const { client, requests, delays } = clientFor(baseUrl, key, { baseDelayMs: 100, random: () => 0.5 })
    const result = await client.getPet(BIG)
    assert.equal(result.data.id, BIG)
    assert.equal(requests.length, 3)
    // The 503 carries Retry-After: 5. Each wait is 5 s plus full jitter within [0, base * 2^attempt).
    assert.deepEqual(delays, [5000 + 0.5 * 100, 5000 + 0.5 * 200])
    delays.forEach((delay, attempt) => {
      assert.ok(delay - 5000 >= 0 && delay - 5000 < 100 * 2 ** attempt)
    })
  })

  test('when the store stays unavailable, then the client gives up after maxAttempts requests and throws the last error', async (t) => {
    const { baseUrl, key, store } = await served(t, {}, { pets: [pet(1)] })
    store.catalog.getPet = async () => { throw new StoreUnavailableError('injected outage') }
    const { client, requests, delays } = clientFor(baseUrl, key, { maxAttempts: 3 })
    const error = await rejection(client.getPet(1))
    assert.equal(error.status, 503)
    assert.equal(error.code, 'service_unavailable')
    assert.equal(error.retryAfterSeconds, 5)
    assert.equal(error.attempts, 3)
    assert.equal(requests.length, 3)
    assert.equal(delays.length, 2)
  })

  test('when nothing listens on the port, then the client retries with backoff and throws network_error', async () => {
    const port = await freePort()
    const { client, requests, delays } = clientFor(`http://127.0.0.1:${port}`, 'psk_live_unused', { maxAttempts: 3, random: () => 0.5 })
    const error = await rejection(client.listInventory())
    assert.equal(error.code, 'network_error')
    assert.equal(error.status, 0)
    assert.equal(error.attempts, 3)
    assert.equal(requests.length, 3)
    // Full jitter with random() = 0.5 and the default base of 500 ms: half of 500, then half of 1000.
    assert.deepEqual(delays, [250, 500])
  })

  test('when the server does not answer within timeoutMs, then each try times out and the call throws timeout', async (t) => {
    // Accepts connections and never answers.
    const sockets = new Set<Socket>()
    const silent = createServer((socket) => { sockets.add(socket) })
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    t.after(() => {
      for (const socket of sockets) socket.destroy()
      silent.close()
    })
    const { port } = silent.address() as AddressInfo
    const { client, requests } = clientFor(`http://127.0.0.1:${port}`, 'psk_live_unused', { maxAttempts: 2, timeoutMs: 50 })
    const error = await rejection(client.listInventory())
    assert.equal(error.code, 'timeout')
    assert.equal(error.attempts, 2)
    assert.equal(requests.length, 2)
  })

  test('when calls fail in any way, then neither messages nor the errors themselves contain the API key', async (t) => {
    const { baseUrl, key } = await served(t, { RATE_LIMIT_FREE: '2/100' })
    const port = await freePort()
    const failures = [
      await rejection(clientFor(baseUrl, key).client.getPet(42)),
      await rejection(clientFor(baseUrl, key).client.getPet(42)),
      await rejection(clientFor(baseUrl, key, { maxDelayMs: 1 }).client.getPet(42)),
      await rejection(clientFor(baseUrl, `${key}x`).client.getPet(42)),
      await rejection(clientFor(`http://127.0.0.1:${port}`, key, { maxAttempts: 1 }).client.getPet(42))
    ]
    assert.deepEqual(failures.map((error) => error.code), ['not_found', 'not_found', 'rate_limited', 'unauthorized', 'network_error'])
    for (const error of failures) {
      for (const text of [error.message, String(error), inspect(error, { depth: 10 }), JSON.stringify(error), error.stack ?? '']) {
        assert.ok(!text.includes(key), `the key leaked: ${text}`)
      }
    }
  })
})

describe('typed client: If-Match', () => {
  test('when updating with the ETag just read, then it applies; with a stale ETag, then precondition_failed without a retry', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(BIG, { quantity: 4 })] })
    const { client, requests } = clientFor(baseUrl, key)
    const item = await client.getInventoryItem(BIG)
    assert.equal(item.notModified, false)
    assert.deepEqual(item.data, { petId: BIG, quantity: 4, status: 'available' })
    assert.ok(item.etag)

    const unchanged = await client.getInventoryItem(BIG, { ifNoneMatch: item.etag })
    assert.equal(unchanged.notModified, true)

    const updated = await client.updateInventory(BIG, { quantity: 5 }, { ifMatch: item.etag })
    assert.equal(updated.data.quantity, 5)
    assert.ok(updated.etag !== null && updated.etag !== item.etag)

    const before = requests.length
    const stale = await rejection(client.updateInventory(BIG, { quantity: 6 }, { ifMatch: item.etag }))
    assert.equal(stale.status, 412)
    assert.equal(stale.code, 'precondition_failed')
    assert.equal(stale.attempts, 1)
    assert.equal(stale.etag, updated.etag, 'the current tag, to retry with')
    assert.equal(requests.length, before + 1)
    const current = await client.getInventoryItem(BIG)
    assert.equal(current.data?.quantity, 5)
    assert.equal(current.etag, updated.etag)
  })

  test('when the stock entry does not exist, then getInventoryItem throws not_found', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(1)] })
    const { client } = clientFor(baseUrl, key)
    const error = await rejection(client.getInventoryItem(2))
    assert.equal(error.code, 'not_found')
  })
})

describe('client: batches', () => {
  test('when a batch applies, then every entry comes back with its ETag, ids exact; a refused batch throws batch_refused with its failures', async (t) => {
    const { baseUrl, key, store } = await served(t, {}, { pets: [pet(BIG, { quantity: 2 }), pet(1, { quantity: 0 })] })
    const { client, requests } = clientFor(baseUrl, key)
    const result = await client.batchUpdateInventory({ changes: [{ petId: BIG, delta: 3, reason: 'arrival' }, { petId: 1n, quantity: 4 }] })
    assert.deepEqual(result.data.map((e) => [e.petId, e.quantity]), [[BIG, 5], [1n, 4]])
    assert.match(result.data[0]?.etag ?? '', /^"r\d+"$/)
    assert.equal(result.replayed, false)
    const refused = await rejection(client.batchUpdateInventory({ changes: [{ petId: 1n, delta: 1 }, { petId: BIG, delta: -100 }] }))
    assert.deepEqual([refused.status, refused.code, refused.attempts], [409, 'batch_refused', 1])
    assert.deepEqual(refused.failures?.map((f) => [f.index, f.petId, f.code]), [[1, BIG, 'stock_out_of_range']])
    assert.deepEqual([(await store.stock.getStockEntry(1n))?.quantity, (await store.stock.getStockEntry(BIG))?.quantity], [4, 5])
    assert.equal(requests.length, 2)
    const unsafe = Number('9007199254740993') as unknown as bigint
    await assert.rejects(client.batchUpdateInventory({ changes: [{ petId: unsafe, delta: 1 }] }), /changes\[0\].petId 9007199254740992 is not a safe integer/)
    const again = await client.batchUpdateInventory({ changes: [{ petId: 1n, delta: 1 }] }, { idempotencyKey: 'b-1' })
    const replay = await client.batchUpdateInventory({ changes: [{ petId: 1n, delta: 1 }] }, { idempotencyKey: 'b-1' })
    assert.deepEqual([again.replayed, replay.replayed, replay.data[0]?.quantity], [false, true, 5])
  })
})

describe('client: the change feed', () => {
  test('when iterating the feed, then every change comes once, ids exact; resuming from a stored cursor gives only what came after', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(BIG, { quantity: 2 }), pet(1, { quantity: 0 })] })
    const { client } = clientFor(baseUrl, key)
    for (let i = 0; i < 5; i++) await client.adjustInventory(1, { delta: 1 })
    const seen = []
    for await (const change of client.inventoryChanges({ limit: 2 })) seen.push(change)
    assert.deepEqual(seen.map((c) => [c.petId, c.quantity]), [[BIG, 2], [1n, 0], [1n, 1], [1n, 2], [1n, 3], [1n, 4], [1n, 5]])
    const stored = seen.at(-1)?.cursor
    await client.batchUpdateInventory({ changes: [{ petId: BIG, delta: 1 }, { petId: 1n, delta: -1 }] })
    const later = []
    for await (const change of client.inventoryChanges({ after: stored })) later.push(change)
    assert.deepEqual(later.map((c) => [c.petId, c.quantity, typeof c.batchId]), [[BIG, 3, 'string'], [1n, 4, 'string']])
    const page = await client.listInventoryChanges({ after: later.at(-1)?.cursor })
    assert.deepEqual([page.data, page.nextCursor], [[], later.at(-1)?.cursor], 'caught up: the same place to poll from')
  })
})

describe('client: relative stock changes', () => {
  test('when adjusting, then the delta is applied once and the entry with its ETag is answered; out of range is a typed 409', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(BIG, { quantity: 2 })] })
    const { client, requests } = clientFor(baseUrl, key)
    const result = await client.adjustInventory(BIG, { delta: 3, reason: 'arrival' })
    assert.deepEqual(result.data, { petId: BIG, quantity: 5, status: 'available' })
    assert.match(result.etag ?? '', /^"r\d+"$/)
    const refused = await rejection(client.adjustInventory(BIG, { delta: -6 }))
    assert.equal(refused.status, 409)
    assert.equal(refused.code, 'stock_out_of_range')
    assert.equal(refused.attempts, 1)
    assert.deepEqual(requests, [`POST ${baseUrl}/v1/inventory/${BIG}/adjustments`, `POST ${baseUrl}/v1/inventory/${BIG}/adjustments`])
  })

  test('when the answer to a write is lost after it applied, then the retry carries the same Idempotency-Key and nothing applies twice', async (t) => {
    const { baseUrl, key, store } = await served(t, {}, { pets: [pet(1, { quantity: 2 })] })
    for (const [method, call] of [
      ['POST', (c: PetstoreClient) => c.adjustInventory(1, { delta: 1 })],
      ['PATCH', (c: PetstoreClient) => c.updateInventory(1, { quantity: 9 })]
    ] as const) {
      const keys: string[] = []
      let tries = 0
      // The service answers the first try, and the connection drops before the client reads it.
      const lossy: typeof fetch = async (input, init) => {
        keys.push(new Headers(init?.headers).get('idempotency-key') ?? '')
        const response = await fetch(input, init)
        if (++tries === 1) throw new TypeError('fetch failed: socket hang up')
        return response
      }
      const { client } = clientFor(baseUrl, key, { fetch: lossy })
      const before = (await store.stock.stockHistory(1n, 100)).length
      const result = await call(client)
      assert.equal(result.replayed, true, method)
      assert.equal(keys.length, 2)
      assert.equal(keys[0], keys[1], 'every try of one call sends one key')
      assert.match(keys[0] ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      assert.equal((await store.stock.stockHistory(1n, 100)).length, before + 1, `${method} applied once`)
    }
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 9)
  })

  test('when a write gives up without an answer, then the error carries its key, and a call with that key applies nothing twice', async (t) => {
    const { baseUrl, key, store } = await served(t, {}, { pets: [pet(1, { quantity: 1 })] })
    // Every try reaches the service, and every answer is lost.
    const lossy: typeof fetch = async (input, init) => {
      await (await fetch(input, init)).arrayBuffer()
      throw new TypeError('fetch failed: socket hang up')
    }
    const { client } = clientFor(baseUrl, key, { fetch: lossy })
    const failed = await rejection(client.adjustInventory(1, { delta: 1 }))
    assert.deepEqual([failed.code, failed.attempts], ['network_error', 4])
    assert.match(failed.idempotencyKey ?? '', /^[0-9a-f-]{36}$/)
    const again = await clientFor(baseUrl, key).client.adjustInventory(1, { delta: 1 }, { idempotencyKey: failed.idempotencyKey ?? '' })
    assert.deepEqual([again.replayed, again.data.quantity, again.idempotencyKey], [true, 2, failed.idempotencyKey])
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 2, 'applied once in five tries')
  })

  test('when writes are made, then each call has a key of its own, and a key given by the caller is the one sent', async (t) => {
    const { baseUrl, key, store } = await served(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const sent: string[] = []
    const watching: typeof fetch = async (input, init) => {
      sent.push(new Headers(init?.headers).get('idempotency-key') ?? '')
      return await fetch(input, init)
    }
    const { client } = clientFor(baseUrl, key, { fetch: watching })
    const first = await client.adjustInventory(1, { delta: 1 })
    const second = await client.adjustInventory(1, { delta: 1 })
    assert.deepEqual([first.replayed, second.replayed, second.data.quantity], [false, false, 4])
    assert.notEqual(sent[0], sent[1])
    const mine = await client.adjustInventory(1, { delta: 1 }, { idempotencyKey: 'job-77' })
    const again = await client.adjustInventory(1, { delta: 1 }, { idempotencyKey: 'job-77' })
    assert.deepEqual([mine.replayed, again.replayed, again.data.quantity], [false, true, 5])
    assert.deepEqual(sent.slice(2), ['job-77', 'job-77'])
    assert.equal((await store.stock.getStockEntry(1n))?.quantity, 5)
    for (const bad of ['', ' x', 'x ', '"x"', 'caf\u00e9', 'k'.repeat(256)]) {
      await assert.rejects(client.adjustInventory(1, { delta: 1 }, { idempotencyKey: bad }), RangeError)
    }
  })

  test('when the first try of a write is still running on the service, then 409 idempotency_key_in_flight is retried and answered its replay', async () => {
    const answers = [
      new Response('{"code":"idempotency_key_in_flight","message":"busy","status":409}', { status: 409, headers: { 'content-type': 'application/json' } }),
      new Response('{"petId":1,"quantity":3,"status":"available"}', { status: 200, headers: { 'content-type': 'application/json', 'idempotent-replayed': 'true', etag: '"r4"' } })
    ]
    const keys: string[] = []
    const scripted: typeof fetch = async (_input, init) => {
      keys.push(new Headers(init?.headers).get('idempotency-key') ?? '')
      return answers.shift() ?? assert.fail('one try too many')
    }
    const { sleep, delays } = recordingSleep()
    const client = createClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'psk_live_unused', fetch: scripted, sleep, random: () => 0.5, newKey: () => 'fixed-key' })
    const result = await client.adjustInventory(1, { delta: 1 })
    assert.deepEqual([result.replayed, result.etag, result.data.quantity], [true, '"r4"', 3])
    assert.deepEqual(keys, ['fixed-key', 'fixed-key'])
    assert.equal(delays.length, 1)
  })

  test('when a key is reused for another write, then 422 idempotency_key_reused is a typed error that is not retried', async (t) => {
    const { baseUrl, key } = await served(t, {}, { pets: [pet(1, { quantity: 2 })] })
    const { client, requests } = clientFor(baseUrl, key)
    await client.adjustInventory(1, { delta: 1 }, { idempotencyKey: 'k' })
    const reused = await rejection(client.adjustInventory(1, { delta: 2 }, { idempotencyKey: 'k' }))
    assert.deepEqual([reused.status, reused.code, reused.attempts], [422, 'idempotency_key_reused', 1])
    assert.equal(requests.length, 2)
  })

  test('when an adjustment is refused with 429 rate_limited, then it is retried after Retry-After: the refusal applied nothing', async (t) => {
    const ctx = await served(t, { RATE_LIMIT_FREE: '1/100' }, { pets: [pet(1, { quantity: 2 })] })
    const { sleep, delays } = recordingSleep(ctx.clock)
    const { client, requests } = clientFor(ctx.baseUrl, ctx.key, { sleep })
    await client.adjustInventory(1, { delta: 1 })
    const second = await client.adjustInventory(1, { delta: 1 })
    assert.equal(second.data.quantity, 4)
    assert.equal(requests.length, 3)
    assert.equal(delays.length, 1)
    assert.equal((await ctx.store.stock.stockHistory(1n, 10)).length, 3, 'the import and two adjustments')
  })
})


describe('client: keys and quota', () => {
  test('when a read-only key writes, then an InsufficientScopeError naming the scope is thrown after one request, never retried', async (t) => {
    const { baseUrl, store } = await served(t, {}, { pets: [pet(1, { quantity: 3 })] })
    const { key } = await createKey(store, 'production', { plan: 'free', name: 'reader', perMinute: null, perDay: null, scope: 'read' })
    const { client, requests, delays } = clientFor(baseUrl, key)
    for (const call of [() => client.updateInventory(1, { quantity: 4 }), () => client.adjustInventory(1, { delta: 1 }),
      () => client.batchUpdateInventory({ changes: [{ petId: 1n, quantity: 4 }] })]) {
      const error = await rejection(call())
      assert.ok(error instanceof InsufficientScopeError)
      assert.equal(error.status, 403)
      assert.equal(error.code, 'insufficient_scope')
      assert.equal(error.requiredScope, 'inventory:write')
      assert.equal(error.attempts, 1)
    }
    assert.equal(requests.length, 3, 'one request per call: never retried')
    assert.deepEqual(delays, [])
    assert.equal((await client.listInventory()).status, 200, 'the key still reads')
  })

  test('when rateLimit() is called, then it returns the key\'s plan, scopes and windows without spending them', async (t) => {
    const { baseUrl, key } = await served(t, { RATE_LIMIT_FREE: '10/100' }, { pets: [pet(1)] })
    const { client } = clientFor(baseUrl, key)
    await client.listInventory()
    const first = await client.rateLimit()
    const second = await client.rateLimit()
    assert.equal(first.status, 200)
    assert.equal(first.data.plan, 'free')
    assert.deepEqual(first.data.scopes, ['inventory:read', 'inventory:sell', 'inventory:write'])
    assert.deepEqual([first.data.minute.limit, first.data.minute.remaining, first.data.minute.used], [10, 9, 1])
    assert.deepEqual([second.data.day.limit, second.data.day.remaining], [100, 99], 'asking spent nothing')
    assert.equal(second.rateLimit?.remaining, 9)
    assert.equal(first.data.bannedUntil, null)
    assert.equal(first.data.expiresAt, null)
  })
})
