/**
 * An acknowledged write survives kill -9: the real server (SQLite, WAL, synchronous=FULL) is killed without
 * warning after acknowledging PATCHes, restarted on the same file, and must hold every acknowledged value and
 * its stock-ledger row.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { cliFor, EXIT_TIMEOUT_MS, freePort, inspectStore, startServe, within } from '../cli/run.js'

describe('crash safety', () => {
  test('when the server is killed with SIGKILL after acknowledging PATCHes, then a restart finds every acknowledged value and its ledger entry', async (t) => {
    const cli = cliFor(t)
    const pets = Array.from({ length: 20 }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available', quantity: 0 }))
    assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets }))])).code, 0)
    const key = (await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '100000', '--per-day', '1000000'])).stdout.trim()
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const port = await freePort()

    const first = await startServe(cli, [], { PORT: String(port) })
    const acknowledged = new Map<number, number>()
    // Concurrent rounds, so that group commits hold several updates; only 200 answers count as acknowledged.
    for (let round = 1; round <= 5; round++) {
      const answers = await Promise.all(pets.map(async (pet) => {
        const quantity = round * 100 + pet.id
        const res = await fetch(`${first.base}/v1/inventory/${pet.id}`, { method: 'PATCH', headers, body: JSON.stringify({ quantity }) })
        return { id: pet.id, quantity, ok: res.status === 200 }
      }))
      for (const answer of answers) if (answer.ok) acknowledged.set(answer.id, answer.quantity)
    }
    assert.equal(acknowledged.size, 20)
    first.server.child.kill('SIGKILL')
    assert.equal((await within(EXIT_TIMEOUT_MS, first.server.exited, 'the killed server to go')).signal, 'SIGKILL')

    const second = await startServe(cli, [], { PORT: String(port) })
    t.after(async () => {
      second.server.child.kill('SIGTERM')
      await within(EXIT_TIMEOUT_MS, second.server.exited, 'the restarted server to stop')
    })
    const items = await (await fetch(`${second.base}/v1/inventory`, { headers })).json() as Array<{ petId: number, quantity: number }>
    assert.deepEqual(new Map(items.map((item) => [item.petId, item.quantity])), acknowledged)
    // The ledger is written in the same transaction: every acknowledged change is recorded, in order.
    const histories = await inspectStore(cli.db, (store) => Promise.all(pets.map((pet) => store.stock.stockHistory(BigInt(pet.id), 100))))
    histories.forEach((history, i) => {
      const id = i + 1
      assert.deepEqual(history.map((entry) => [entry.previousQuantity, entry.quantity]),
        [[null, 0], [0, 100 + id], [100 + id, 200 + id], [200 + id, 300 + id], [300 + id, 400 + id], [400 + id, 500 + id]], `pet ${id}`)
    })
  })
})
