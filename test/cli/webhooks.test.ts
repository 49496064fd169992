/**
 * Webhooks through a real `petstore serve`: a server killed with SIGKILL in the middle of deliveries loses none (after
 * the restart every event still arrives, verified by standardwebhooks), and the operator lists, disables and enables
 * subscriptions with `petstore webhooks`.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { distinctIds, eventIdOf, receiver } from '../helpers/webhooks.js'
import { cliFor, startServe, within } from './run.js'

const WRITES = 40
const ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20', WEBHOOK_TIMEOUT_MS: '2000', WEBHOOK_RETRY_BASE_MS: '100', WEBHOOK_CONCURRENCY: '4' }

describe('webhooks of a running server', () => {
  test('when the server is killed with SIGKILL mid-delivery, then after a restart every committed change still arrives', async (t) => {
    const cli = cliFor(t, ENV)
    const pets = Array.from({ length: 4 }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available', quantity: 1000 }))
    assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets }))])).code, 0)
    const created = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '100000', '--per-day', '1000000', '--json'])
    const { key } = JSON.parse(created.stdout) as { key: string }
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const hook = await receiver(t)
    // Slow answers keep deliveries in flight when the kill comes.
    hook.answer = async () => { await new Promise((resolve) => setTimeout(resolve, 100)); return 204 }

    const first = await startServe(cli)
    const subscribed = await fetch(`${first.base}/v1/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: hook.url, events: ['inventory.changed'] }) })
    assert.equal(subscribed.status, 201)
    const { id, secret } = await subscribed.json() as { id: string, secret: string }
    hook.secrets.push(secret)
    for (let i = 0; i < WRITES; i++) {
      const res = await fetch(`${first.base}/v1/inventory/${i % 4 + 1}/adjustments`, { method: 'POST', headers, body: '{"delta":-1}' })
      assert.equal(res.status, 200)
    }
    await hook.until(() => hook.received.length >= 3)
    first.server.child.kill('SIGKILL')
    await first.server.exited
    const beforeRestart = distinctIds(hook).size
    assert.ok(beforeRestart < WRITES, `killed mid-delivery (${beforeRestart} of ${WRITES} had arrived)`)

    const second = await startServe(cli)
    // Leases of the killed process end after the attempt timeout and a margin (2 s + 5 s here).
    await within(60_000, hook.until(() => distinctIds(hook).size === WRITES, 60_000), 'every event after the restart')
    const feed = await (await fetch(`${second.base}/v1/inventory/changes?limit=1000`, { headers })).json() as Array<{ changeId: number, reason: string, cursor: string }>
    const expected = feed.filter((change) => change.reason !== 'import').map(eventIdOf)
    assert.deepEqual([...distinctIds(hook)].sort(), expected.sort(), 'exactly the changes committed after the subscription')
    assert.equal(hook.rejected, 0)

    const listed = await cli.run(['webhooks', 'list', '--json'])
    assert.equal(listed.code, 0, listed.stderr)
    const [row] = JSON.parse(listed.stdout) as Array<{ id: string, enabled: boolean, pending: number, url: string }>
    assert.deepEqual([row?.id, row?.enabled, row?.url], [id, true, hook.url])
    assert.ok(!listed.stdout.includes('whsec_'), 'never the secret')

    assert.equal((await cli.run(['webhooks', 'disable', id, '--reason', 'maintenance'])).code, 0)
    const disabled = JSON.parse((await cli.run(['webhooks', 'list', '--json'])).stdout) as Array<{ enabled: boolean, disabledReason: string }>
    assert.deepEqual([disabled[0]?.enabled, disabled[0]?.disabledReason], [false, 'maintenance'])
    const table = await cli.run(['webhooks', 'list'])
    assert.match(table.stdout, /disabled\s+\d+\s+\S+\s+\d+\s+maintenance/)
    assert.equal((await cli.run(['webhooks', 'enable', id])).code, 0)
    assert.equal((JSON.parse((await cli.run(['webhooks', 'list', '--json'])).stdout) as Array<{ enabled: boolean }>)[0]?.enabled, true)
    const missing = await cli.run(['webhooks', 'enable', 'wh_nope'])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /no webhook subscription with id wh_nope/)
  })
})
