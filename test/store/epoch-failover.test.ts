/**
 * A real failover: a primary and its streaming replica in private clusters (initdb, pg_basebackup), the replica
 * stopped before the primary's last commit, the primary lost, the replica promoted. The instance that goes on writing
 * to the promoted replica confirms nothing: the feed's commit trigger sees the new WAL timeline and starts a new epoch
 * in the first commit, so the change made there never takes the event id or cursor of the one that was lost.
 */
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { promisify } from 'node:util'
import { checkPlace, CursorExpiredError } from '../../src/domain/feed.js'
import { importData } from '../../src/domain/import.js'
import { eventId } from '../../src/domain/webhooks.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import type { FeedChange } from '../../src/store/stock/types.js'
import { missingPostgresCluster, postgresBinaries } from '../chaos/postgres-cluster.js'
import { pet } from '../helpers/app.js'
import { freePort } from '../helpers/net.js'
import { requireService } from '../helpers/services.js'
import { waitFor } from '../helpers/wait.js'
import { stockChange } from './helpers.js'

const run = promisify(execFile)
const RUN_AS = 'postgres'
const asRoot = process.getuid?.() === 0

/** Runs a server binary (as the postgres user when root: PostgreSQL refuses to run as root). */
async function pg (command: string, args: string[], cwd: string): Promise<void> {
  const binary = join(postgresBinaries() as string, command)
  const argv = asRoot ? ['runuser', '-u', RUN_AS, '--', binary, ...args] : [binary, ...args]
  await run(argv[0] as string, argv.slice(1), { cwd, timeout: 120_000 })
}

interface Servers {
  dir: string
  /** Starts the server of `data` on `port`; it is stopped (at once) after the test unless stopped before. */
  start: (data: string, port: number) => Promise<{ url: string, stop: (mode: 'fast' | 'immediate') => Promise<void> }>
}

/** A directory the postgres user owns for the test's servers; after the test, they are stopped and it is removed. */
function servers (t: TestContext): Servers {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-failover-'))
  if (asRoot) {
    const id = (flag: string): number => Number(spawnSync('id', [flag, RUN_AS], { encoding: 'utf8' }).stdout)
    chownSync(dir, id('-u'), id('-g'))
  }
  const running = new Set<() => Promise<void>>()
  t.after(async () => {
    for (const stop of running) await stop().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    dir,
    start: async (data, port) => {
      const stop = async (mode: 'fast' | 'immediate'): Promise<void> => {
        running.delete(immediately)
        await pg('pg_ctl', ['stop', '-D', data, '-m', mode, '-w', '-t', '60'], dir)
      }
      const immediately = async (): Promise<void> => { await stop('immediate') }
      running.add(immediately)
      await pg('pg_ctl', ['start', '-D', data, '-w', '-t', '60', '-l', `${data}.log`,
        '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50`], dir)
      return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop }
    }
  }
}

const place = (change: FeedChange) => ({ ...change.position, epoch: change.epoch })

if (await requireService('a private PostgreSQL cluster', 'initdb', async () => missingPostgresCluster() === null, 'the failover test', 'POSTGRES_BIN')) {
  describe('store epochs across a real failover', () => {
    test('when a replica that missed the primary\'s last commit is promoted, then the first commit on it starts a new epoch, and the lost change\'s cursor is refused', async (t) => {
      const { dir, start } = servers(t)
      const primaryData = join(dir, 'primary')
      const replicaData = join(dir, 'replica')
      await pg('initdb', ['-D', primaryData, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync'], dir)
      const primary = await start(primaryData, await freePort())
      const primaryPort = new URL(primary.url).port
      await pg('pg_basebackup', ['-D', replicaData, '-R', '-h', '127.0.0.1', '-p', primaryPort, '-U', 'postgres'], dir)
      const replica = await start(replicaData, await freePort())

      // On the primary: the store, its epoch confirmed (the timeline recorded), a change the replica receives.
      const onPrimary = new PostgresStore(primary.url)
      t.after(() => onPrimary.close())
      await onPrimary.schema.migrate()
      await onPrimary.schema.confirmEpoch()
      await importData(onPrimary, { pets: [pet(1, { quantity: 1 })], orders: [] })
      assert.equal((await onPrimary.stock.setQuantity(stockChange(1n, 2))).status, 'updated')
      const kept = (await onPrimary.stock.listChanges(null, 100)).at(-1) as FeedChange
      const watcher = new PostgresStore(replica.url)
      await waitFor('the replica has the change', async () => (await watcher.stock.listChanges(null, 100).catch(() => [])).length === 2)
      await watcher.close()

      // The replica stops receiving; the primary commits once more, and is lost.
      await replica.stop('fast')
      assert.equal((await onPrimary.stock.setQuantity(stockChange(1n, 3))).status, 'updated')
      const lost = (await onPrimary.stock.listChanges(null, 100)).at(-1) as FeedChange
      await onPrimary.close()
      await primary.stop('immediate')

      // The replica, promoted, takes the writes of the instances that were connected to the primary.
      const promoted = await start(replicaData, Number(new URL(replica.url).port))
      await pg('pg_ctl', ['promote', '-D', replicaData, '-w', '-t', '60'], dir)
      const store = new PostgresStore(promoted.url)
      t.after(() => store.close())
      assert.equal((await store.stock.setQuantity(stockChange(1n, 4))).status, 'updated')
      const changes = await store.stock.listChanges(null, 100)
      const made = changes.at(-1) as FeedChange
      assert.deepEqual(changes.map((c) => c.quantity), [1, 2, 4], 'the lost change is not there')
      const history = await store.stock.feedHistory()
      assert.deepEqual(history.epochs.map((e) => e.reason), ['created', 'new timeline'])
      assert.equal(made.epoch, history.epochs[1]?.epoch)
      assert.notEqual(eventId(made), eventId(lost))
      checkPlace(history, place(kept))
      assert.throws(() => { checkPlace(history, place(lost)) }, CursorExpiredError, 'the lost change\'s cursor names nothing in this history')
    })
  })
}
