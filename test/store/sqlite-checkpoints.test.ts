/**
 * A serving SQLite store checkpoints on a thread of its own (src/store/sqlite/checkpointer.ts): its own connection
 * never copies the WAL into the database file inside a COMMIT, the WAL stays bounded under sustained writes, and a
 * kill -9 while the thread checkpoints loses nothing that was acknowledged.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { importData } from '../../src/domain/import.js'
import type { CheckpointReport } from '../../src/store/sqlite/checkpoint-worker.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { tempDir } from '../helpers/app.js'
import { setStock } from './helpers.js'

/** Bytes of a WAL of `frames` 1 KiB pages: its header, then each frame's header and page. */
const walBytes = (frames: number): number => 32 + frames * (24 + 1024)
const fileSize = (path: string): number => existsSync(path) ? statSync(path).size : 0

async function storeWithPets (path: string, pets: number, options: ConstructorParameters<typeof SqliteStore>[1]): Promise<SqliteStore> {
  const store = new SqliteStore(path, options)
  await store.schema.migrate()
  await importData(store, {
    pets: Array.from({ length: pets }, (_, i) => ({ id: BigInt(i + 1), name: `pet ${i + 1}`, status: 'available' as const, quantity: 0 })),
    orders: []
  })
  return store
}

/** `rounds` rounds of one update per pet, all pets at once (group commits of many updates). */
async function updateRounds (store: SqliteStore, pets: number, rounds: number, afterRound: (round: number) => void = () => {}): Promise<void> {
  for (let round = 1; round <= rounds; round++) {
    await Promise.all(Array.from({ length: pets }, (_, i) => setStock(store, BigInt(i + 1), round * 1000 + i)))
    afterRound(round)
  }
}

describe('SQLite checkpoints off the serving connection', () => {
  test('when a serving store writes well past SQLite\'s auto-checkpoint threshold and its thread does not checkpoint, then its own COMMITs never write the database file', async (t) => {
    const path = join(tempDir(t), 'serving.db')
    // A thread that never reaches its threshold: whatever reaches the database file would be the serving connection's.
    const store = await storeWithPets(path, 200, { backgroundCheckpoints: { thresholdFrames: 1e9, limitFrames: 1e9 } })
    t.after(() => store.close())
    const before = statSync(path)
    await updateRounds(store, 200, 150)
    // SQLite's own auto-checkpoint would have run at 1,000 frames and kept the WAL near that.
    assert.ok(fileSize(`${path}-wal`) > walBytes(2000), `the WAL holds ${fileSize(`${path}-wal`)} bytes`)
    const after = statSync(path)
    assert.equal(after.size, before.size)
    assert.equal(after.mtimeMs, before.mtimeMs)
    assert.deepEqual((await store.stock.listInventory()).slice(0, 3).map((item) => item.quantity), [150_000, 150_001, 150_002])
  })

  test('when a serving store takes sustained writes, then its thread checkpoints, the WAL stays bounded and a reopen finds every write', async (t) => {
    const path = join(tempDir(t), 'bounded.db')
    const reports: CheckpointReport[] = []
    const limitFrames = 400
    const ROUNDS = 480
    // Prepared first and closed (which empties the WAL): the WAL file never shrinks, so it then shows the sustained
    // writes' largest WAL and not the migrations' and import's transactions.
    await (await storeWithPets(path, 200, {})).close()
    assert.equal(fileSize(`${path}-wal`), 0)
    const store = new SqliteStore(path, {
      backgroundCheckpoints: { thresholdFrames: 100, limitFrames, pollMs: 1, onCheckpoint: (report) => { reports.push(report) } }
    })
    let largestWal = 0
    await updateRounds(store, 200, ROUNDS, () => { largestWal = Math.max(largestWal, fileSize(`${path}-wal`)) })
    // These writes append about 12,800 frames, which a WAL nobody checkpoints would hold at the end. The thread keeps it
    // near the limit: a group commit may append its frames past the limit before the thread sees them, more may come
    // while RESTART waits for the writer, and on a loaded machine the thread may get its CPU late (2.5 times the limit
    // was seen at a load of 8 on two cores, 4.4 times on a loaded CI run), hence the margin: a quarter of unbounded.
    assert.ok(largestWal <= walBytes(limitFrames * 8), `the WAL reached ${largestWal} bytes (${((largestWal - 32) / (24 + 1024) / limitFrames).toFixed(1)} times the limit)`)
    assert.ok(reports.filter((report) => report.checkpointed > 0).length >= 5, `${reports.length} checkpoints`)
    assert.ok(statSync(path).size > 0)
    await store.close()
    const reopened = new SqliteStore(path)
    t.after(() => reopened.close())
    const items = await reopened.stock.listInventory()
    assert.deepEqual(items.map((item) => item.quantity), Array.from({ length: 200 }, (_, i) => ROUNDS * 1000 + i))
    assert.deepEqual((await reopened.stock.stockHistory(7n, 100)).map((entry) => entry.quantity),
      [0, ...Array.from({ length: ROUNDS }, (_, r) => (r + 1) * 1000 + 6)].slice(-100))
  })

  test('when a reader keeps an old snapshot while the WAL passes its bound, then writes go on without waiting for the reader', async (t) => {
    const path = join(tempDir(t), 'reader.db')
    await (await storeWithPets(path, 200, {})).close()
    const store = new SqliteStore(path, { backgroundCheckpoints: { thresholdFrames: 50, limitFrames: 100, pollMs: 1 } })
    t.after(() => store.close())
    // A backup's read: a snapshot held open (a read transaction) for 2 s, while the store writes well past the bound.
    const reader = new Database(path, { readonly: true })
    t.after(() => reader.close())
    reader.exec('BEGIN')
    reader.prepare('SELECT count(*) FROM inventory').get()
    const released = new Promise<void>((resolve) => setTimeout(() => { reader.exec('COMMIT'); resolve() }, 2000))
    let slowest = 0
    let last = performance.now()
    await updateRounds(store, 200, 60, () => {
      const now = performance.now()
      slowest = Math.max(slowest, now - last)
      last = now
    })
    await released
    // A RESTART checkpoint would hold the write lock while it waited for the reader: a round would take the rest of
    // its 2 s. A round of 200 updates is a few group commits.
    assert.ok(slowest < 1000, `the slowest round took ${Math.round(slowest)} ms`)
    assert.deepEqual((await store.stock.listInventory()).slice(0, 2).map((item) => item.quantity), [60_000, 60_001])
  })

  test('when the process is killed with SIGKILL while its thread checkpoints, then a reopen finds every acknowledged write and its ledger entry', { timeout: 120_000 }, async (t) => {
    const path = join(tempDir(t), 'killed.db')
    const pets = 100
    const prepared = await storeWithPets(path, pets, {})
    await prepared.close()
    const writer = join(import.meta.dirname, 'sqlite-checkpoint-writer.ts')
    /** Every round a writer acknowledged (all its updates answered), over the kills. */
    const acknowledged: number[] = []
    let next = 1
    // Three kills, each once the thread has checkpointed a few times and while it goes on (a checkpoint every
    // 20 frames, looked for every millisecond: it is checkpointing much of the time).
    for (let kill = 1; kill <= 3; kill++) {
      const child = spawn(process.execPath, ['--import', 'tsx', writer, path, String(pets), String(next)], { stdio: ['ignore', 'pipe', 'pipe'] })
      let stderr = ''
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => { resolve(signal) }))
      let checkpoints = 0
      let lastAcknowledged = 0
      let buffered = ''
      const killed = new Promise<void>((resolve, reject) => {
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
          buffered += chunk
          const lines = buffered.split('\n')
          buffered = lines.pop() ?? ''
          for (const line of lines) {
            const [what, value] = line.split(' ')
            if (what === 'ack') { lastAcknowledged = Number(value); acknowledged.push(lastAcknowledged) }
            if (what === 'checkpoint') checkpoints++
            if (checkpoints >= 5 && lastAcknowledged >= next + 2 && child.exitCode === null && child.signalCode === null) {
              child.kill('SIGKILL')
              resolve()
            }
          }
        })
        void exited.then(() => { reject(new Error(`the writer exited before it was killed: ${stderr}`)) })
      })
      await killed
      assert.equal(await exited, 'SIGKILL')
      const reopened = new SqliteStore(path)
      try {
        const items = await reopened.stock.listInventory()
        assert.equal(items.length, pets)
        // The round in flight when it was killed may or may not have committed (all of it or part): never less than
        // the acknowledged one.
        for (const item of items) {
          const round = Math.floor(item.quantity / 1000)
          assert.ok(round === lastAcknowledged || round === lastAcknowledged + 1, `pet ${item.petId} at round ${round}, acknowledged ${lastAcknowledged}`)
          assert.equal(item.quantity % 1000, Number(item.petId) - 1)
        }
        // The ledger is written in the same transaction: every acknowledged change is recorded, in order.
        const history = (await reopened.stock.stockHistory(1n, 1000)).map((entry) => entry.quantity)
        for (const round of acknowledged) assert.ok(history.includes(round * 1000), `round ${round} missing from the ledger`)
        assert.deepEqual(history, [...history].sort((a, b) => a - b))
        next = Math.max(...items.map((item) => Math.floor(item.quantity / 1000))) + 1
      } finally {
        await reopened.close()
      }
    }
  })
})
