/**
 * A restore of the SQLite store, as an operator runs it (`petstore backup` while serving, the server stopped,
 * `petstore restore`, the server started again): the first change after it reuses a change id the restore undid, and
 * must still never reuse its event id or cursor. A receiver that deduplicates by webhook-id, as docs/webhooks.md tells
 * it to, gets every real event; a follower holding a cursor from after the backup is told to resync (410), one from
 * before it goes on. Also when the backup file is copied into place by hand.
 */
import assert from 'node:assert/strict'
import { copyFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { receiver, type Receiver } from '../helpers/webhooks.js'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli } from './run.js'

interface Change { changeId: number, petId: number, quantity: number, cursor: string }

const PETS = [{ id: 1, name: 'Rex', status: 'available', quantity: 1 }, { id: 2, name: 'Tom', status: 'available', quantity: 123 }, { id: 4, name: 'Kit', status: 'available', quantity: 2 }]
const ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20', WEBHOOK_RETRY_BASE_MS: '100', WEBHOOK_RETRY_MAX_DELAY_MS: '500' }

/** A store with the pets and a key; its server started, subscribed to `hook`. */
async function serving (cli: Cli, hook: Receiver): Promise<{ base: string, key: string, server: Awaited<ReturnType<typeof startServe>>['server'] }> {
  assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets: PETS }))])).code, 0)
  const { key } = JSON.parse((await cli.run(['keys', 'create', '--plan', 'pro', '--json'])).stdout) as { key: string }
  const { base, server } = await startServe(cli)
  const res = await fetch(`${base}/v1/webhooks`, { method: 'POST', headers: headers(key), body: JSON.stringify({ url: hook.url, events: ['inventory.changed'] }) })
  assert.equal(res.status, 201)
  hook.secrets.push((await res.json() as { secret: string }).secret)
  return { base, key, server }
}

const headers = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })

async function patch (base: string, key: string, petId: number, quantity: number): Promise<void> {
  const res = await fetch(`${base}/v1/inventory/${petId}`, { method: 'PATCH', headers: headers(key), body: JSON.stringify({ quantity }) })
  assert.equal(res.status, 200, await res.text())
}

async function feed (base: string, key: string, after?: string): Promise<Change[]> {
  const res = await fetch(`${base}/v1/inventory/changes?limit=1000${after === undefined ? '' : `&after=${after}`}`, { headers: headers(key) })
  assert.equal(res.status, 200, await res.clone().text())
  return await res.json() as Change[]
}

/** What the feed, the stream's `after` and its `Last-Event-ID` answer for a cursor: status and code each. */
async function answers (base: string, key: string, cursor: string): Promise<string[]> {
  return await Promise.all([
    fetch(`${base}/v1/inventory/changes?after=${cursor}`, { headers: headers(key) }),
    fetch(`${base}/v1/inventory/changes/stream?after=${cursor}`, { headers: headers(key) }),
    fetch(`${base}/v1/inventory/changes/stream`, { headers: { ...headers(key), 'last-event-id': cursor } })
  ].map(async (pending) => {
    const res = await pending
    if (res.status === 200) {
      await res.body?.cancel()
      return '200'
    }
    return `${res.status} ${(await res.json() as { code: string }).code}`
  }))
}

/** Every webhook-id received names one change: deliveries under one id carry the same change. */
function oneChangePerId (hook: Receiver): Map<string, string> {
  const byId = new Map<string, string>()
  for (const { id, event } of hook.received) {
    const change = `${event.data.petId}:${event.data.previousQuantity}->${event.data.quantity}`
    assert.equal(byId.get(id) ?? change, change, `webhook-id ${id} carried two different changes`)
    byId.set(id, change)
  }
  return byId
}

describe('a restore of the SQLite store', () => {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    test(`when it is restored from a backup after a ${signal}, then the next change gets an event id and cursor never issued before, and cursors from after the backup are 410`, async (t) => {
      const cli = cliFor(t, ENV)
      const hook = await receiver(t)
      const first = await serving(cli, hook)
      await patch(first.base, first.key, 1, 3)
      await hook.until(() => hook.received.length >= 1)
      const backup = join(cli.dir, 'backup.db')
      assert.equal((await cli.run(['backup', backup])).code, 0)
      await patch(first.base, first.key, 2, 127)
      await hook.until(() => oneChangePerId(hook).size === 2)
      const before = await feed(first.base, first.key)
      const atBackup = before.at(-2) as Change
      const pastBackup = before.at(-1) as Change
      first.server.child.kill(signal)
      await within(EXIT_TIMEOUT_MS, first.server.exited, 'the server\'s exit')

      const restored = await cli.run(['restore', backup])
      assert.equal(restored.code, 0, restored.stderr)
      const second = await startServe(cli)
      await patch(second.base, first.key, 4, 7)

      // Every real event arrives and none is dropped as a duplicate: the change after the restore has an id of its own.
      await hook.until(() => oneChangePerId(hook).size === 3, 30_000)
      assert.deepEqual([...oneChangePerId(hook).values()].sort(), ['1:1->3', '2:123->127', '4:2->7'])
      await second.server.waitForOutput(/new store epoch [0-9a-f]{16} began \(restored\)/)
      const after = await feed(second.base, first.key)
      const made = after.at(-1) as Change
      assert.equal(made.changeId, pastBackup.changeId, 'the restored ledger gave the new change the id of the one the restore undid')
      assert.ok(!before.some((c) => c.cursor === made.cursor), 'its cursor was never issued before')

      // A follower from after the backup is told to resync; one from before it goes on, and misses nothing.
      assert.deepEqual(await answers(second.base, first.key, pastBackup.cursor), ['410 cursor_expired', '410 cursor_expired', '410 cursor_expired'])
      assert.deepEqual((await feed(second.base, first.key, atBackup.cursor)).map((c) => [c.petId, c.quantity]), [[4, 7]])
      assert.deepEqual(await answers(second.base, first.key, atBackup.cursor), ['200', '200', '200'])
    })
  }

  test('when a backup file is copied into place by hand instead of restored, then the first server on it still starts a new epoch', async (t) => {
    const cli = cliFor(t, ENV)
    const hook = await receiver(t)
    const first = await serving(cli, hook)
    const backup = join(cli.dir, 'backup.db')
    assert.equal((await cli.run(['backup', backup])).code, 0)
    await patch(first.base, first.key, 2, 127)
    await hook.until(() => hook.received.length >= 1)
    const lost = (await feed(first.base, first.key)).at(-1) as Change
    first.server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, first.server.exited, 'the server\'s exit')
    for (const suffix of ['-wal', '-shm']) rmSync(cli.db + suffix, { force: true })
    copyFileSync(backup, cli.db)

    const second = await startServe(cli)
    await patch(second.base, first.key, 4, 7)
    await hook.until(() => oneChangePerId(hook).size === 2, 30_000)
    const made = (await feed(second.base, first.key)).at(-1) as Change
    assert.equal(made.changeId, lost.changeId)
    assert.notEqual(made.cursor, lost.cursor)
    assert.deepEqual(await answers(second.base, first.key, lost.cursor), ['410 cursor_expired', '410 cursor_expired', '410 cursor_expired'])
  })

  test('when a copy made by other means is put in place and migrate --restored is run, then it says a new epoch began', async (t) => {
    const cli = cliFor(t)
    assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets: PETS }))])).code, 0)
    const migrated = await cli.run(['migrate', '--restored'])
    assert.equal(migrated.code, 0, migrated.stderr)
    assert.match(migrated.stderr, /^The store schema is up to date \(version \d+\)\.\nA new store epoch [0-9a-f]{16} began \(restored\): /)
    assert.equal((await cli.run(['migrate'])).stderr, migrated.stderr.split('\n')[0] + '\n', 'without the flag, nothing more')
  })
})
