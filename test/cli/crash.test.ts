/**
 * What a crash leaves behind: a server killed with SIGKILL in the middle of keyed writes leaves every write and the
 * record of its Idempotency-Key together or not at all, and a client that sends all its writes again afterwards
 * (same keys) ends with each applied exactly once.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { cliFor, EXIT_TIMEOUT_MS, inspectStore, startServe, within } from './run.js'

const PETS = 10
const WRITES = 300

describe('a server killed during keyed writes', () => {
  test('when it is killed with SIGKILL, then each key has a record exactly when its change is in the ledger, and a full retry applies each once', async (t) => {
    const cli = cliFor(t)
    const pets = Array.from({ length: PETS }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available', quantity: 0 }))
    assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets }))])).code, 0)
    const created = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '100000', '--per-day', '1000000', '--json'])
    const { key, id: keyId } = JSON.parse(created.stdout) as { key: string, id: string }

    const send = async (base: string, i: number): Promise<number> => {
      const res = await fetch(`${base}/v1/inventory/${i % PETS + 1}/adjustments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': `write-${i}`, 'x-request-id': `req-${i}` },
        body: '{"delta":1}'
      })
      await res.arrayBuffer()
      return res.status
    }

    const first = await startServe(cli)
    const acknowledged = new Set<number>()
    let next = 0
    let killed = false
    // Eight clients in parallel; the server is killed once a third of the writes are acknowledged.
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < WRITES && !killed) {
        const i = next++
        try {
          if (await send(first.base, i) === 200) acknowledged.add(i)
        } catch {
          // The connection died with the server.
        }
        if (acknowledged.size >= WRITES / 3 && !killed) {
          killed = true
          first.server.child.kill('SIGKILL')
        }
      }
    }))
    await within(EXIT_TIMEOUT_MS, first.server.exited, 'the server to die')

    const at = new Date()
    const left = await inspectStore(cli.db, async (store) => {
      const ledger = new Set<string>()
      for (let p = 1; p <= PETS; p++) for (const entry of await store.stock.stockHistory(BigInt(p), 1000)) if (entry.requestId !== null) ledger.add(entry.requestId)
      const recorded = new Set<number>()
      for (let i = 0; i < WRITES; i++) if (await store.idempotency.findIdempotencyRecord(keyId, `write-${i}`, at) !== null) recorded.add(i)
      return { ledger, recorded }
    })
    for (let i = 0; i < WRITES; i++) {
      assert.equal(left.recorded.has(i), left.ledger.has(`req-${i}`), `write ${i}: its record and its change exist together or not at all`)
    }
    for (const i of acknowledged) assert.ok(left.recorded.has(i), `acknowledged write ${i} survived the crash`)

    // The client does not know which of its writes applied: it sends them all again, with their keys.
    const second = await startServe(cli)
    const statuses = []
    for (let i = 0; i < WRITES; i += 25) statuses.push(...await Promise.all(Array.from({ length: Math.min(25, WRITES - i) }, (_, j) => send(second.base, i + j))))
    assert.ok(statuses.every((status) => status === 200), `every retry answered 200: ${statuses.filter((s) => s !== 200).join(' ')}`)
    second.server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, second.server.exited, 'the server to stop')
    await inspectStore(cli.db, async (store) => {
      for (let p = 1; p <= PETS; p++) assert.equal((await store.stock.getStockEntry(BigInt(p)))?.quantity, WRITES / PETS, `pet ${p}: each write applied once`)
    })
  })
})
