/**
 * Never oversold, shown (issue 34, point 10a): 200 storefront clients at once sell a pet's 50 units through the
 * service's own HTTP API, on real servers: two instances sharing PostgreSQL + Redis (one of them killed with SIGKILL
 * in the middle) and one instance on SQLite. Each client places a hold of 1-3 units or an order, some sending the same
 * request again under the same Idempotency-Key while the first is unanswered, then confirms, releases or abandons the
 * hold to a 1-2 s expiry (delivers or cancels the order); every request that gets no answer, or a 503, is sent again. The database is sampled directly all along: at no sample are more units
 * held (active, unexpired) and sold than stocked. At the end the stock is exactly what the clients were told
 * (test/helpers/checkout.ts says how each check is made). And an instance on SQLite killed with SIGKILL while clients
 * place holds keeps, after a restart, every hold it acknowledged.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli, type Started } from '../cli/run.js'
import { Book, endStateProblems, fetchTransport, oversold, postgresStock, Shopper, sqliteStock, watchStock, type StockDatabase } from '../helpers/checkout.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { waitFor } from '../helpers/wait.js'
import { REDIS_URL, redisKeyPrefix, requireRedis } from '../ratelimit/redis-env.js'

const PET = 1
const STOCK = 50
const CLIENTS = 200
/** The clients start over this many ms, so that holds end (confirmed, released, expired) while others are placed. */
const SPREAD_MS = 2500
/** Storefront keys the clients share (each its own quota). */
const KEYS = 4
const EVEN = { confirm: 1, release: 1, abandon: 1 }

interface Instance { base: string, server: Started }

/** Migrates, imports the one pet with its 50 units, and makes the storefront keys. */
async function prepare (cli: Cli): Promise<string[]> {
  assert.equal((await cli.run(['migrate'])).code, 0)
  const file = cli.file('pet.json', JSON.stringify({ pets: [{ id: PET, name: 'Rex', status: 'available', quantity: STOCK }] }))
  const imported = await cli.run(['import', file])
  assert.equal(imported.code, 0, imported.stderr)
  return await Promise.all(Array.from({ length: KEYS }, async (_, i) => {
    const created = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '10000000',
      '--scope', 'storefront', '--name', `storefront-${i}`, '--json'])
    assert.equal(created.code, 0, created.stderr)
    return (JSON.parse(created.stdout) as { key: string }).key
  }))
}

/**
 * Runs the 200 clients against `instances` while sampling `database`; `during` runs beside them (the kill). Returns
 * the book, after every abandoned hold has expired, and the samples' verdict.
 */
async function sell (instances: Instance[], keys: string[], database: StockDatabase, during: (book: Book) => Promise<void> = async () => {}) {
  const book = new Book()
  const bases = instances.map((i) => i.base)
  const watch = watchStock(database, [PET])
  const clients = Array.from({ length: CLIENTS }, async (_, i) => {
    await sleep(Math.random() * SPREAD_MS)
    const shopper = new Shopper(book, fetchTransport, bases, keys[i % KEYS] as string, i)
    const copies = Math.random() < 0.25 ? 2 + Math.floor(Math.random() * 2) : 1
    // Each ending as often as the others: units sold stay sold, units released or expired are held again by later clients.
    if (Math.random() < 0.7) await shopper.checkout(PET, { expiresIn: 1 + Math.floor(Math.random() * 2), keepFor: 60, thinkMs: 400, copies, tag: 'never-oversold', mix: EVEN })
    else await shopper.order(PET, { thinkMs: 300, copies, tag: 'never-oversold', deliver: 0.5 })
  })
  // Every client is waited for, also when one of them or the kill failed, and the sampler stopped: left running, they
  // would go on after the test and keep its process alive.
  const failed = (await Promise.allSettled([...clients, during(book)])).find((r) => r.status === 'rejected')
  // Every hold left to expire has expired by the end: what was held of them is free again.
  if (failed === undefined) await sleep(Math.max(0, book.lastExpiry() - Date.now()) + 100)
  const watched = await watch.stop()
  if (failed !== undefined) throw failed.reason
  return { book, watched }
}

/** What every run asserts, after the clients are done. */
async function assertNeverOversold (t: TestContext, book: Book, watched: { samples: number, maxHeld: number, violations: string[] }, database: StockDatabase,
  bases: string[], key: string): Promise<void> {
  t.diagnostic(`${book.summary()}; ${book.failovers} requests sent again to another instance; sold ${book.sold(PET)} of ${STOCK}; ` +
    `${watched.samples} samples, at most ${watched.maxHeld} units held`)
  assert.deepEqual(watched.violations, [], 'a sample held and sold more than was stocked')
  assert.ok(watched.samples >= 20, `only ${watched.samples} samples of the stock were taken`)
  assert.ok(watched.maxHeld > 0, 'no sample saw a unit held')
  assert.deepEqual(book.problems, [], 'answers the clients did not expect')
  assert.deepEqual(await endStateProblems(book, database, new Map([[PET, STOCK]]), bases, key), [])
  // The run mixed what it means to mix (otherwise the checks above prove less than they say).
  for (const what of ['holds placed', 'holds confirmed', 'holds released', 'holds abandoned to expiry', 'hold refused (insufficient_stock)',
    'orders placed', 'orders delivered', 'orders cancelled', 'replays']) {
    assert.ok(book.n(what) > 0, `no "${what}" in the run: ${book.summary()}`)
  }
  assert.ok(book.sold(PET) > 0 && book.sold(PET) <= STOCK, `sold ${book.sold(PET)}`)
}

const postgresReady = (await requirePostgres('the never-oversold test on PostgreSQL')) && (await requireRedis('the never-oversold test on PostgreSQL'))

describe('never oversold', () => {
  if (postgresReady) {
    test('when 200 clients hold, order, confirm, release and abandon 50 units on two PostgreSQL instances and one is killed, ' +
      'then no unit is held or sold twice and every acknowledged hold is honoured', { timeout: 120_000 }, async (t: TestContext) => {
      const prefix = redisKeyPrefix(t)
      const url = await tempPostgresDatabase(t)
      const cli = cliFor(t, { DATABASE_URL: url, REDIS_URL, REDIS_KEY_PREFIX: prefix, BAN_SECONDS: '0' })
      const keys = await prepare(cli)
      const [a, b] = await Promise.all([startServe(cli), startServe(cli)]) as [Instance, Instance]
      const database = await postgresStock(url)
      t.after(() => database.close())

      let acknowledgedByA: string[] = []
      const { book, watched } = await sell([a, b], keys, database, async (running) => {
        // In the middle: once instance A has acknowledged a few holds and while clients still start, kill it without
        // a goodbye. Its clients send what was unanswered again, with the same key, to B.
        await waitFor('instance A to acknowledge 3 holds', () => running.holds.filter((h) => h.acknowledgedBy === a.base).length >= 3)
        a.server.child.kill('SIGKILL')
        await within(EXIT_TIMEOUT_MS, a.server.exited, 'instance A to die')
        acknowledgedByA = running.holds.filter((h) => h.acknowledgedBy === a.base).map((h) => h.id)
        // At once, not only at the end: every hold A acknowledged is on B (asked again while B answers 503, its pool
        // busy with the clients' writes).
        for (const id of acknowledgedByA) {
          let status = 503
          for (let attempt = 0; status === 503 && attempt < 50; attempt++) {
            if (attempt > 0) await sleep(200)
            status = (await fetch(`${b.base}/v1/holds/${id}`, { headers: { authorization: `Bearer ${keys[0]}` } })).status
          }
          assert.equal(status, 200, `hold ${id}, acknowledged by the killed instance, reads ${status} on the other`)
        }
      })
      assert.ok(acknowledgedByA.length >= 3)
      assert.ok(book.failovers > 0, 'no client lost its instance: the kill came too late to test anything')
      await assertNeverOversold(t, book, watched, database, [b.base], keys[0] as string)
      b.server.child.kill('SIGTERM')
      assert.equal((await within(EXIT_TIMEOUT_MS, b.server.exited, 'instance B to stop')).code, 0)
    })
  }

  test('when 200 clients hold, order, confirm, release and abandon 50 units on one SQLite instance, ' +
    'then no unit is held or sold twice and every acknowledged hold is honoured', { timeout: 120_000 }, async (t: TestContext) => {
    const cli = cliFor(t)
    const keys = await prepare(cli)
    const instance = await startServe(cli)
    const database = sqliteStock(cli.db)
    t.after(() => database.close())
    const { book, watched } = await sell([instance], keys, database)
    await assertNeverOversold(t, book, watched, database, [instance.base], keys[0] as string)
    instance.server.child.kill('SIGTERM')
    assert.equal((await within(EXIT_TIMEOUT_MS, instance.server.exited, 'the instance to stop')).code, 0)
  })
})

describe('acknowledged holds survive a crash', () => {
  test('when the SQLite instance is killed with SIGKILL while clients place holds, then after a restart every hold it ' +
    'acknowledged is there and active, and no more is held than stocked', { timeout: 60_000 }, async (t: TestContext) => {
    const cli = cliFor(t)
    const [key] = await prepare(cli)
    const first = await startServe(cli)
    const acknowledged: string[] = []
    let killed = false
    const place = async (): Promise<void> => {
      while (!killed) {
        try {
          const res = await fetch(`${first.base}/v1/holds`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key as string}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
            body: JSON.stringify({ lines: [{ petId: PET, quantity: 1 }], expiresIn: 3600 })
          })
          const body = await res.json() as { id?: string, code?: string }
          // Acknowledged: the whole answer reached the client.
          if (res.status === 201 && body.id !== undefined) acknowledged.push(body.id)
          if (body.code === 'insufficient_stock') return
        } catch {
          return // the connection died with the instance: that hold was never acknowledged
        }
        await sleep(10)
      }
    }
    const clients = Array.from({ length: 20 }, place)
    await waitFor('the instance to acknowledge 10 holds', () => acknowledged.length >= 10)
    first.server.child.kill('SIGKILL')
    killed = true
    await within(EXIT_TIMEOUT_MS, first.server.exited, 'the instance to die')
    await Promise.allSettled(clients)
    const known = [...acknowledged]

    const second = await startServe(cli)
    t.after(async () => {
      second.server.child.kill('SIGTERM')
      await within(EXIT_TIMEOUT_MS, second.server.exited, 'the restarted instance to stop')
    })
    const read = async (url: string) => await fetch(`${second.base}${url}`, { headers: { authorization: `Bearer ${key as string}` } })
    for (const id of known) {
      const res = await read(`/v1/holds/${id}`)
      assert.equal(res.status, 200, `hold ${id}, acknowledged before the kill, is gone after the restart`)
      assert.equal((await res.json() as { state: string }).state, 'active')
    }
    const entry = await (await read(`/v1/inventory/${PET}?include=availability`)).json() as { onHand: number, held: number, available: number }
    t.diagnostic(`${known.length} holds acknowledged before the kill; ${entry.held} held after the restart`)
    assert.equal(entry.onHand, STOCK)
    assert.ok(entry.held >= known.length && entry.held <= STOCK, `held ${entry.held}, acknowledged ${known.length}, stocked ${STOCK}`)
    assert.equal(entry.held + entry.available, STOCK)
  })
})

describe('the oversell check of a sample', () => {
  const at = Date.parse('2026-11-27T12:00:00Z')
  test('when active holds and sales together exceed what was stocked, then the sample is reported', () => {
    const sample = { onHand: 40, sold: 10, stocked: 50, lines: [{ quantity: 30, expiresAt: at + 1000 }, { quantity: 11, expiresAt: null }] }
    assert.equal(oversold(sample, at), 'held 41 + sold 10 > stocked 50 (on hand 40)')
  })

  test('when the holds beyond the stock have expired by the sample\'s instant, then it is not', () => {
    const sample = { onHand: 40, sold: 10, stocked: 50, lines: [{ quantity: 30, expiresAt: at }, { quantity: 40, expiresAt: null }] }
    assert.equal(oversold(sample, at), null)
    assert.equal(oversold(sample, at - 1), 'held 70 + sold 10 > stocked 50 (on hand 40)')
  })

  test('when the on-hand count is not what the ledger stocked less what it sold, then the sample is reported', () => {
    assert.equal(oversold({ onHand: 41, sold: 10, stocked: 50, lines: [] }, at), 'on hand 41 but stocked 50 - sold 10')
  })
})
