/**
 * The CLI reads the time from one clock, which its entry makes (the system's) and a caller may pass: every time a
 * command records or shows follows it. The commands run in-process through main(), with the test's own clock, on the
 * test's own SQLite file.
 */
import assert from 'node:assert/strict'
import { copyFileSync, existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { main } from '../../src/cli/main.js'
import type { Io } from '../../src/cli/io.js'
import { Webhooks } from '../../src/domain/webhooks.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { tempDir } from '../helpers/app.js'

/** A time the test sets: the CLI must never read another. */
const START = Date.UTC(2031, 4, 6, 7, 8, 9)
const DAY_MS = 86_400_000

interface Run { code: number, stdout: string, stderr: string }

/** A store file of the test's own, and a way to run `petstore ARGS` on it at the time `clock.now` says. */
async function cliAt (t: TestContext): Promise<{ db: string, clock: { now: number }, run: (...args: string[]) => Promise<Run> }> {
  const dir = tempDir(t)
  const db = join(dir, 'petstore.db')
  const clock = { now: START }
  const run = async (...args: string[]): Promise<Run> => {
    let stdout = ''
    let stderr = ''
    const io: Io = {
      stdout: (text) => { stdout += text },
      stderr: (text) => { stderr += text },
      env: { DATABASE_URL: db },
      command: 'petstore',
      readSecret: async () => ''
    }
    const code = await main(args, io, () => clock.now)
    return { code, stdout, stderr }
  }
  const migrated = await run('migrate')
  assert.equal(migrated.code, 0, migrated.stderr)
  return { db, clock, run }
}

describe('the CLI clock', () => {
  test('when keys are created, listed and revoked under a given clock, then their times and states follow that clock', async (t) => {
    const { clock, run } = await cliAt(t)
    const created = await run('keys', 'create', '--plan', 'free', '--name', 'clocked', '--expires-in', '1d', '--json')
    assert.equal(created.code, 0, created.stderr)
    const key = JSON.parse(created.stdout) as { id: string, createdAt: string, expiresAt: string, status: string }
    assert.deepEqual([key.createdAt, key.expiresAt, key.status],
      [new Date(START).toISOString(), new Date(START + DAY_MS).toISOString(), 'active'])

    clock.now = START + 2 * DAY_MS
    const listed = JSON.parse((await run('keys', 'list', '--json')).stdout) as Array<{ id: string, status: string, expired: boolean }>
    assert.deepEqual(listed.map(({ id, status, expired }) => ({ id, status, expired })), [{ id: key.id, status: 'expired', expired: true }])

    const other = JSON.parse((await run('keys', 'create', '--plan', 'free', '--json')).stdout) as { id: string }
    clock.now += 1000
    assert.equal((await run('keys', 'revoke', other.id)).code, 0)
    const shown = JSON.parse((await run('keys', 'show', other.id, '--json')).stdout) as { revokedAt: string }
    assert.equal(shown.revokedAt, new Date(clock.now).toISOString())
  })

  test('when an operator disables and enables a webhook under a given clock, then the subscription records that time and the default reason', async (t) => {
    const { db, clock, run } = await cliAt(t)
    const owner = JSON.parse((await run('keys', 'create', '--plan', 'free', '--json')).stdout) as { id: string }
    const store = new SqliteStore(db)
    t.after(() => store.close())
    const webhooks = new Webhooks(store, { maxPerQuota: 10, retryForMs: DAY_MS, checkUrl: async (url) => ({ url }), clock: () => clock.now })
    const { webhook } = await webhooks.create(owner.id, { url: 'https://hooks.example.com/petstore', events: ['inventory.changed'] })

    clock.now = START + 60_000
    const disabled = await run('webhooks', 'disable', webhook.id)
    assert.equal(disabled.code, 0, disabled.stderr)
    const seen = await webhooks.get(owner.id, webhook.id)
    assert.deepEqual([seen.enabled, seen.disabledReason, seen.updatedAt.toISOString()], [false, 'Disabled by the operator.', new Date(clock.now).toISOString()])

    clock.now += 60_000
    assert.equal((await run('webhooks', 'enable', webhook.id)).code, 0)
    const enabled = await webhooks.get(owner.id, webhook.id)
    assert.deepEqual([enabled.enabled, enabled.disabledReason, enabled.updatedAt.toISOString()], [true, null, new Date(clock.now).toISOString()])
    assert.equal((await run('webhooks', 'disable', 'wh_none')).code, 1, 'an unknown id still exits 1')
  })

  test('when a file is imported and the store restored under a given clock, then the ledger and the kept file are stamped with that time', async (t) => {
    const { db, clock, run } = await cliAt(t)
    const file = join(tempDir(t), 'pets.json')
    writeFileSync(file, JSON.stringify({ pets: [{ id: 7, name: 'Rex', status: 'available', quantity: 3 }] }))
    assert.equal((await run('import', file)).code, 0)
    const history = JSON.parse((await run('inventory', 'history', '7', '--json')).stdout) as Array<{ at: string, reason: string }>
    assert.deepEqual(history.map(({ at, reason }) => ({ at, reason })), [{ at: new Date(START).toISOString(), reason: 'import' }])

    const backup = join(tempDir(t), 'backup.db')
    copyFileSync(db, backup)
    clock.now = Date.UTC(2031, 4, 6, 9, 10, 11)
    const restored = await run('restore', backup, '--json')
    assert.equal(restored.code, 0, restored.stderr)
    const { kept } = JSON.parse(restored.stdout) as { kept: string }
    assert.equal(kept, `${db}.before-restore-20310506T091011Z`)
    assert.ok(existsSync(kept))
  })
})
