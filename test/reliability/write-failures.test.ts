/**
 * The write path cannot end the process: whatever fails inside a SQLite group commit (a schema that does not
 * match the code, a constraint, a full disk) fails the requests of that commit with a 5xx Error body, logged with
 * their request ids, and the server keeps serving. A full disk is a 503; reads go on; writes resume when space
 * returns.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within } from '../cli/run.js'
import { requireService } from '../helpers/services.js'

async function serveWithStock (t: TestContext, database?: string) {
  const cli = cliFor(t, database === undefined ? {} : { DATABASE_URL: database })
  assert.equal((await cli.run(['import', cli.file('pets.json', '{"pets":[{"id":1,"name":"A","status":"available","quantity":1}]}')])).code, 0)
  const key = (await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '10000', '--per-day', '100000'])).stdout.trim()
  const { base, server } = await startServe(cli, [], { LOG_LEVEL: 'info' })
  t.after(async () => {
    if (server.child.exitCode === null) {
      server.child.kill('SIGTERM')
      await within(EXIT_TIMEOUT_MS, server.exited, 'exit')
    }
  })
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  const patch = (quantity: number, requestId: string) =>
    fetch(`${base}/v1/inventory/1`, { method: 'PATCH', headers: { ...headers, 'x-request-id': requestId }, body: JSON.stringify({ quantity }) })
  const read = () => fetch(`${base}/v1/inventory/1`, { headers })
  const list = () => fetch(`${base}/v1/inventory`, { headers })
  return { cli, base, server, patch, read, list }
}

describe('failures inside a group commit', () => {
  test('when the schema no longer matches the code, then the writes of that commit get 500, are logged with their request ids, and the server keeps serving', async (t) => {
    const { cli, server, patch, list } = await serveWithStock(t)
    // What the operator met: a column the write path needs is not there, from the first write on.
    const db = new Database(cli.db)
    db.exec('ALTER TABLE inventory DROP COLUMN ledger_head')
    db.close()
    const failed = await Promise.all(['w-1', 'w-2', 'w-3'].map((id, i) => patch(10 + i, id)))
    for (const res of failed) {
      assert.equal(res.status, 500)
      assert.deepEqual(await res.json(), { code: 'internal_error', message: 'An internal error occurred.', status: 500 })
    }
    assert.equal(server.child.exitCode, null, 'the process is alive')
    assert.equal((await list()).status, 200, 'and serves the listing')
    // The error lines are written as the requests fail, not necessarily before their answers arrive here: wait for the
    // three, then look at every error line (no fourth, each with its cause).
    // Whole lines only: the text after the last newline may be the start of a line still being written.
    const errorLines = ({ stdout }: { stdout: string }) => stdout.split('\n').slice(0, -1).filter((line) => line.trim() !== '')
      .map((line) => JSON.parse(line) as { level: number, requestId?: string, err?: { message: string } })
      .filter((entry) => entry.level >= 50)
    const output = await server.waitForOutput((out) => new Set(errorLines(out).map((e) => e.requestId)).size >= 3)
    const errors = errorLines(output)
    assert.deepEqual(errors.map((e) => e.requestId).sort(), ['w-1', 'w-2', 'w-3'])
    assert.ok(errors.every((e) => /ledger_head/.test(e.err?.message ?? '')), 'the cause is logged')
  })

  test('when a constraint fails one update of a commit, then only that request fails and the others are stored', async (t) => {
    const { cli, patch, read } = await serveWithStock(t)
    const db = new Database(cli.db)
    // Refuses one particular value, as a constraint of a future schema might.
    db.exec("CREATE TRIGGER refuse_13 BEFORE UPDATE OF quantity ON inventory WHEN NEW.quantity = 13 BEGIN SELECT RAISE(ABORT, 'injected'); END;")
    db.close()
    const [ok, refused] = await Promise.all([patch(12, 'ok'), patch(13, 'refused')])
    assert.equal(ok.status, 200)
    assert.equal(refused.status, 500)
    assert.equal((await read()).status, 200)
    assert.equal((await patch(14, 'after')).status, 200, 'later writes work')
  })
})

/** A small tmpfs to fill (root only); null when mounting is not allowed here. */
function smallDisk (t: TestContext): string | null {
  const dir = join('/tmp', `petstore-full-${process.pid}-${Date.now()}`)
  mkdirSync(dir, { recursive: true })
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir], { stdio: 'ignore' })
  } catch {
    rmSync(dir, { recursive: true, force: true })
    return null
  }
  t.after(() => {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' })
    rmSync(dir, { recursive: true, force: true })
  })
  return dir
}

if (await requireService('a mountable tmpfs', 'mount -t tmpfs', async () => {
  const probe = { after: (fn: () => void) => { fn() } } as unknown as TestContext
  return smallDisk(probe) !== null
}, 'the disk-full test', 'running as root')) {
  describe('a full disk', () => {
    test('when the disk is full, then writes get 503, reads keep working, and writes resume when space returns', async (t) => {
      const disk = smallDisk(t) as string
      const { patch, read, server } = await serveWithStock(t, join(disk, 'petstore.db'))
      assert.equal((await patch(2, 'before')).status, 200)
      // Fill what is left of the disk.
      const filler = join(disk, 'filler')
      try {
        writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024))
      } catch {
        // ENOSPC: the disk is full now, which is the point.
      }
      const statuses = []
      for (let i = 0; i < 50; i++) statuses.push((await patch(100 + i, `full-${i}`)).status)
      assert.ok(statuses.includes(503), `a write met the full disk: ${statuses.join(' ')}`)
      assert.ok(statuses.every((s) => s === 200 || s === 503), statuses.join(' '))
      assert.equal((await read()).status, 200, 'reads keep working')
      assert.equal(server.child.exitCode, null)
      rmSync(filler)
      assert.equal((await patch(7, 'after')).status, 200, 'writes resume')
      assert.equal((await (await read()).json() as { quantity: number }).quantity, 7)
    })
  })
}
