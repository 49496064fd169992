/** The webhooks contract (./webhooks.contract.ts) on SQLite and on PostgreSQL, and what only PostgreSQL shows. */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import pg from 'pg'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { lockWaiters, POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { waitFor } from '../helpers/wait.js'
import { postgresHarness, sqliteHarness, threadedSqliteHarness } from './harness.js'
import {
  addKey, addPets, at, claim, deliveriesOf, deliveryPlaces, enqueue, feedAfter, outcome, places, record, setStock, subscribe, webhookContract
} from './webhooks.contract.js'

webhookContract('SqliteStore', sqliteHarness)
webhookContract('SqliteStore (writer thread)', threadedSqliteHarness)

if (await requirePostgres('PostgreSQL webhooks contract tests')) {
  webhookContract('PostgresStore', postgresHarness)

  describe('PostgresStore: webhooks specifics', () => {
    test('when a writer that took its ledger id first commits after an enqueue, then its change still gets its delivery, after the one committed first', async (t) => {
      const schema = await tempSchema(t)
      const store = new PostgresStore(POSTGRES_URL, { schema })
      t.after(() => store.close())
      await store.schema.migrate()
      await addKey(store, 'key_a')
      await addPets(store, [1, 2])
      const head = await store.stock.feedHead()
      const webhook = await subscribe(store, 'slow', 'key_a')
      const slow = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await slow.connect()
      t.after(() => slow.end())
      try {
        await slow.query('BEGIN')
        await slow.query(`INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, created_at) VALUES (1, 10, 11, 'arrival', now())`)
        await setStock(store, 2, 9)
        assert.equal(await enqueue(store), 1)
        await slow.query('COMMIT')
      } finally {
        await slow.query('ROLLBACK').catch(() => {})
      }
      assert.equal(await enqueue(store, at(2)), 1)
      const deliveries = await deliveriesOf(store, webhook.id)
      assert.deepEqual(deliveryPlaces(deliveries), places(await feedAfter(store, head)))
      assert.ok((deliveries[1]?.changeId ?? 0n) < (deliveries[0]?.changeId ?? 0n), 'the lower id, committed later, comes later')
    })

    /** Two stores on one fresh schema, and a raw session on it that can hold table locks to make a race happen in a set order. */
    async function twoInstances (t: TestContext): Promise<{ a: PostgresStore, b: PostgresStore, locker: pg.Client, schema: string }> {
      const schema = await tempSchema(t)
      const [a, b] = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema })) as [PostgresStore, PostgresStore]
      t.after(() => Promise.all([a.close(), b.close()]))
      await a.schema.migrate()
      const locker = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
      await locker.connect()
      t.after(() => locker.end())
      return { a, b, locker, schema }
    }

    test('when a subscription is deleted while an attempt of its delivery is being recorded, then both complete (no deadlock)', async (t) => {
      const { a, b, locker, schema } = await twoInstances(t)
      await addKey(a, 'key_a')
      const webhook = await subscribe(a, 'dl', 'key_a')
      await addPets(a, [1])
      await enqueue(a)
      const [c] = await claim(a)
      assert.ok(c !== undefined)
      try {
        // Holds the recording between its write of the delivery and its write of the failure run, while the delete starts.
        await locker.query('BEGIN')
        await locker.query('LOCK TABLE webhook_attempts IN SHARE MODE')
        const recording = record(a, outcome(c.deliveryId, webhook.id))
        // Each step once it is under way in PostgreSQL (blocked), not after a pause a loaded machine may outlast.
        await waitFor('the recording held by the lock', async () => await lockWaiters(schema) === 1, { intervalMs: 50 })
        let deleteSettled = false
        const deleting = b.webhooks.deleteWebhook(webhook.id).finally(() => { deleteSettled = true })
        await waitFor('the delete under way', async () => deleteSettled || await lockWaiters(schema) === 2, { intervalMs: 50 })
        await locker.query('COMMIT')
        const [recorded, deleted] = await Promise.allSettled([recording, deleting])
        assert.equal(recorded.status, 'fulfilled', String((recorded as PromiseRejectedResult).reason))
        assert.deepEqual(deleted, { status: 'fulfilled', value: true })
      } finally {
        await locker.query('ROLLBACK').catch(() => {})
      }
      assert.equal(await a.webhooks.getWebhook(webhook.id), null)
    })

    test('when one instance\'s fan-out is held up on a subscription, then another instance takes the other subscriptions meanwhile', async (t) => {
      const { a, b, locker, schema } = await twoInstances(t)
      await addKey(a, 'key_a')
      const first = await subscribe(a, 'fan1', 'key_a')
      const second = await subscribe(a, 'fan2', 'key_a')
      await addPets(a, [1, 2])
      let fromB: number
      let fromA: Promise<number>
      try {
        // Inserting deliveries waits for the lock: the first instance stops inside its first subscription.
        await locker.query('BEGIN')
        await locker.query('LOCK TABLE webhook_deliveries IN SHARE MODE')
        fromA = enqueue(a)
        await waitFor('the first instance held by the lock', async () => await lockWaiters(schema) === 1, { intervalMs: 50 })
        const pendingB = enqueue(b)
        await waitFor('the second instance held by the lock too', async () => await lockWaiters(schema) === 2, { intervalMs: 50 })
        await locker.query('COMMIT')
        fromB = await pendingB
      } finally {
        await locker.query('ROLLBACK').catch(() => {})
      }
      assert.deepEqual([await fromA, fromB], [2, 2], 'each instance took one subscription')
      for (const webhook of [first, second]) assert.deepEqual(deliveryPlaces(await deliveriesOf(a, webhook.id)), places(await feedAfter(a, null)))
    })
  })
}
