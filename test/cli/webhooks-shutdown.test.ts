/**
 * A stop while webhook deliveries are in flight, through a real `petstore serve` on each store: the dispatcher
 * finishes before the store closes, so an attempt that ends during the stop is recorded, one that outlasts it is given
 * back (pending, its lease released, attempted again at once by the next instance), and nothing is logged above info.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { Store } from '../../src/store/store.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { receiver } from '../helpers/webhooks.js'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli } from './run.js'

const ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20', WEBHOOK_TIMEOUT_MS: '30000' }

/** Log lines at warn (40) or above, and anything on stderr: a clean stop has none. */
function complaints (output: { stdout: string, stderr: string }): string[] {
  const lines = output.stdout.split('\n').filter((line) => line.trim() !== '')
  return [...lines.filter((line) => (JSON.parse(line) as { level: number }).level >= 40), ...output.stderr.split('\n').filter((line) => line.trim() !== '')]
}

/**
 * A server with one subscription to `hook` and one change made, once its delivery is in flight: the receiver has the
 * request and answers it with `answer` (which may hold it). Returns the server and the subscription's id.
 */
async function deliveryInFlight (t: TestContext, cli: Cli, answer: () => Promise<number>) {
  const hook = await receiver(t)
  let arrived = (): void => {}
  const inFlight = new Promise<void>((resolve) => { arrived = resolve })
  hook.answer = async () => {
    arrived()
    return await answer()
  }
  assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets: [{ id: 1, name: 'Rex', status: 'available', quantity: 3 }] }))])).code, 0)
  const { key } = JSON.parse((await cli.run(['keys', 'create', '--plan', 'pro', '--json'])).stdout) as { key: string }
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  const started = await startServe(cli)
  const subscribed = await fetch(`${started.base}/v1/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: hook.url, events: ['inventory.changed'] }) })
  assert.equal(subscribed.status, 201)
  const { id, secret } = await subscribed.json() as { id: string, secret: string }
  hook.secrets.push(secret)
  assert.equal((await fetch(`${started.base}/v1/inventory/1`, { method: 'PATCH', headers, body: '{"quantity":2}' })).status, 200)
  await within(30_000, inFlight, 'the delivery to reach the endpoint')
  return { ...started, id }
}

function stopContract (name: string, setup: (t: TestContext) => Promise<{ cli: Cli, open: () => Promise<Store> }>): void {
  describe(`${name}: a stop during webhook deliveries`, () => {
    test('when SIGTERM arrives while an attempt is in flight and the endpoint then answers, then the outcome is recorded and nothing is logged above info', async (t) => {
      const { cli, open } = await setup(t)
      let answer = (_status: number): void => {}
      const { server, id } = await deliveryInFlight(t, cli, async () => await new Promise<number>((resolve) => { answer = resolve }))
      server.child.kill('SIGTERM')
      await server.waitForOutput(/shutting down/)
      answer(204)
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
      assert.deepEqual(complaints(server.output()), [])
      const store = await open()
      try {
        const [delivery] = await store.webhooks.listWebhookDeliveries(id, null, 10)
        assert.equal(delivery?.state, 'delivered')
        assert.deepEqual(delivery.attempts.map((attempt) => attempt.status), [204])
      } finally {
        await store.close()
      }
    })

    test('when SIGTERM arrives while an attempt hangs past the stop\'s grace, then it is left pending with its lease given back, and nothing is logged above info', async (t) => {
      const { cli, open } = await setup(t)
      const { server, id } = await deliveryInFlight(t, cli, async () => await new Promise<number>(() => {}))
      server.child.kill('SIGTERM')
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
      assert.deepEqual(complaints(server.output()), [])
      const store = await open()
      try {
        const [delivery] = await store.webhooks.listWebhookDeliveries(id, null, 10)
        assert.equal(delivery?.state, 'pending')
        assert.deepEqual(delivery.attempts, [], 'abandoned, not half-recorded')
        // Given back: the next instance claims it now, not when a lease of the attempt's timeout would end.
        const now = new Date()
        const claimed = await store.webhooks.claimWebhookDeliveries({ owner: 'next', at: now, leaseUntil: new Date(now.getTime() + 60_000), limit: 10, perSubscription: 10, exclude: [] })
        assert.deepEqual(claimed.map((c) => c.deliveryId), [delivery.id])
      } finally {
        await store.close()
      }
    })
  })
}

stopContract('SQLite', async (t) => {
  const cli = cliFor(t, ENV)
  return { cli, open: async () => new SqliteStore(cli.db) }
})

if (await requirePostgres('webhook deliveries during a stop, on PostgreSQL')) {
  stopContract('PostgreSQL', async (t) => {
    const url = await tempPostgresDatabase(t)
    return { cli: cliFor(t, { ...ENV, DATABASE_URL: url }), open: async () => new PostgresStore(url) }
  })
}
