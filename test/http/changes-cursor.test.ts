/**
 * `Changes-Cursor` keeps up with the feed: once writes stop, a listing answers the cursor of the feed's last change
 * within the listing's freshness bound (at once on the instance that wrote), so a follower that starts from it
 * replays nothing it already has. One instance on SQLite (which patches its own writes into the listing) and on
 * PostgreSQL, two instances on one SQLite file (as `serve --workers`), and two on PostgreSQL, with and without the
 * Redis change signal.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, pet, tempDir } from '../helpers/app.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { waitFor } from '../helpers/wait.js'
import { resilientRedis } from '../helpers/shared-redis.js'
import { requireRedis, tempRedis } from '../ratelimit/redis-env.js'

const PATCHES = 60
const PETS = 5

interface Instance { app: FastifyInstance, store: Store }

/**
 * The freshness bound of a listing on an instance that did not write: SQLite's commit check (200 ms) or the Redis
 * signal's store check (5 s), on a quiet machine; the wait allows a loaded one. A deadline, not a measure.
 */
const ELSEWHERE_MS = 30_000

async function instances (t: TestContext, stores: Store[], redis?: { client: Redis, prefix: string }): Promise<{ instances: Instance[], key: string }> {
  await importData(stores[0] as Store, { pets: Array.from({ length: PETS }, (_, i) => pet(i + 1, { quantity: 1 })), orders: [] })
  const key = await newKey(stores[0] as Store, 'enterprise')
  const built = await Promise.all(stores.map(async (store) => {
    const shared = redis === undefined ? undefined : resilientRedis(redis.client, redis.prefix, { logger: { warn: () => {}, info: () => {} } })
    const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '60000' }), { store, logger: false, ...shared })
    t.after(() => app.close())
    return { app, store }
  }))
  return { instances: built, key }
}

async function listing (app: FastifyInstance, key: string, query = ''): Promise<{ cursor: string | undefined, quantities: number[] }> {
  const res = await app.inject({ method: 'GET', url: `/v1/inventory${query}`, headers: auth(key) })
  assert.equal(res.statusCode, 200, res.body)
  const cursor = res.headers['changes-cursor']
  return { cursor: typeof cursor === 'string' ? cursor : undefined, quantities: res.json<Array<{ quantity: number }>>().map((e) => e.quantity) }
}

async function changesAfter (app: FastifyInstance, key: string, cursor: string): Promise<unknown[]> {
  const res = await app.inject({ method: 'GET', url: `/v1/inventory/changes?after=${cursor}`, headers: auth(key) })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

/** The cursor of the feed's last change, as the feed itself tells it. */
async function head (app: FastifyInstance, key: string): Promise<string> {
  let cursor: string | undefined
  for (;;) {
    const res = await app.inject({ method: 'GET', url: `/v1/inventory/changes?limit=1000${cursor === undefined ? '' : `&after=${cursor}`}`, headers: auth(key) })
    const page = res.json<Array<{ cursor: string }>>()
    if (page.length === 0) return cursor as string
    cursor = page.at(-1)?.cursor
  }
}

/**
 * PATCHes spread over the instances, each instance reading its listing between its writes (so that it patches them
 * in rather than rebuilding); then, writes stopped, every instance's listing, whole and paged, answers the feed's
 * head within `withinMs`, and following the feed from it yields nothing.
 */
async function keepsUp (t: TestContext, stores: Store[], withinMs: number, redis?: { client: Redis, prefix: string }): Promise<void> {
  const { instances: all, key } = await instances(t, stores, redis)
  for (const { app } of all) await listing(app, key)
  for (let i = 0; i < PATCHES; i++) {
    const { app } = all[i % all.length] as Instance
    const res = await app.inject({ method: 'PATCH', url: `/v1/inventory/${i % PETS + 1}`, headers: { ...auth(key), 'content-type': 'application/json' }, payload: { quantity: 100 + i } })
    assert.equal(res.statusCode, 200, res.body)
    await listing(app, key)
  }
  const last = await head((all[0] as Instance).app, key)
  for (const [n, { app }] of all.entries()) {
    let seen: string | undefined
    await waitFor(`instance ${n + 1}'s Changes-Cursor at the feed's last change`, async () => {
      seen = (await listing(app, key)).cursor
      return seen === last
    }, { timeoutMs: withinMs, intervalMs: 50, detail: () => `it answers ${seen}, the feed's last change is ${last}` })
    assert.equal((await listing(app, key, '?limit=2')).cursor, last, 'the first page too')
    assert.deepEqual(await changesAfter(app, key, last), [], 'a follower starting from it replays nothing')
  }
}

describe('Changes-Cursor on SQLite', () => {
  test(`when one instance takes ${PATCHES} PATCHes, then its listing answers the cursor of the last one at once`, async (t) => {
    const store = new SqliteStore(join(tempDir(t), 'one.db'))
    t.after(() => store.close())
    await store.schema.migrate()
    // At once: the bound is the instance's own write, a wait of one request.
    await keepsUp(t, [store], 1)
  })

  test(`when two instances on one file (serve --workers) take ${PATCHES} PATCHes between them, then both listings answer the cursor of the last one within the bound`, async (t) => {
    const path = join(tempDir(t), 'shared.db')
    const stores = [new SqliteStore(path), new SqliteStore(path)]
    t.after(() => Promise.all(stores.map((store) => store.close())))
    await stores[0]?.schema.migrate()
    await keepsUp(t, stores, ELSEWHERE_MS)
  })
})

if (await requirePostgres('Changes-Cursor on PostgreSQL')) {
  const onSchema = async (t: TestContext, count: number): Promise<Store[]> => {
    const schema = await tempSchema(t)
    const stores = Array.from({ length: count }, () => new PostgresStore(POSTGRES_URL, { schema }))
    t.after(() => Promise.all(stores.map((store) => store.close())))
    await stores[0]?.schema.migrate()
    return stores
  }

  describe('Changes-Cursor on PostgreSQL', () => {
    test(`when one instance takes ${PATCHES} PATCHes, then its listing answers the cursor of the last one at once`, async (t) => {
      await keepsUp(t, await onSchema(t, 1), 1)
    })

    test(`when two instances take ${PATCHES} PATCHes between them, then both listings answer the cursor of the last one`, async (t) => {
      await keepsUp(t, await onSchema(t, 2), 1)
    })
  })

  if (await requireRedis('Changes-Cursor on PostgreSQL with the Redis change signal')) {
    describe('Changes-Cursor on PostgreSQL with the Redis change signal', () => {
      test(`when two instances take ${PATCHES} PATCHes between them, then both listings answer the cursor of the last one within the bound`, async (t) => {
        await keepsUp(t, await onSchema(t, 2), ELSEWHERE_MS, await tempRedis(t))
      })
    })
  }
}
