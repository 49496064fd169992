import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { StockChange } from '../../src/store/stock/types.js'
import { cliFor, EXIT_TIMEOUT_MS, inspectStore, startServe, within } from './run.js'
import { importData } from '../../src/domain/import.js'

const BIG = '9007199254740993' // 2^53 + 1

function change (petId: bigint, quantity: number, overrides: Partial<StockChange> = {}): StockChange {
  return { petId, quantity, expectedRevisions: null, reason: 'adjustment', note: null, keyId: null, requestId: null, at: new Date('2026-11-22T10:00:00Z'), ...overrides }
}

interface LedgerJson {
  id: number, petId: number, previousQuantity: number | null, quantity: number, reason: string, note: string | null,
  keyId: string | null, requestId: string | null, at: string
}

describe('petstore inventory history', () => {
  test('when stock was changed through the API, then history shows each change with reason, quantities, key, request and note', async (t) => {
    const cli = cliFor(t)
    const pets = cli.file('pets.json', JSON.stringify({ pets: [{ id: 7, name: 'Rex', status: 'available', quantity: 2 }] }))
    assert.equal((await cli.run(['import', pets])).code, 0)
    const created = await cli.run(['keys', 'create', '--plan', 'free', '--json'])
    const { key, id: keyId } = JSON.parse(created.stdout) as { key: string, id: string }
    const { base, server } = await startServe(cli)
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const arrival = await fetch(`${base}/v1/inventory/7`, {
      method: 'PATCH', headers: { ...headers, 'x-request-id': 'delivery-42' }, body: JSON.stringify({ quantity: 14, reason: 'arrival', note: 'Litter of 12' })
    })
    assert.equal(arrival.status, 200)
    const sold = await fetch(`${base}/v1/inventory/7`, { method: 'PATCH', headers, body: JSON.stringify({ quantity: 13 }) })
    assert.equal(sold.status, 200)
    const soldRequestId = sold.headers.get('x-request-id')
    server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, server.exited, 'the server to stop')

    const table = await cli.run(['inventory', 'history', '7'])
    assert.equal(table.code, 0, table.stderr)
    const lines = table.stdout.trimEnd().split('\n')
    assert.match(lines[0] ?? '', /^TIME\s+REASON\s+FROM\s+TO\s+STATUS\s+KEY\s+REQUEST\s+REFERENCE\s+NOTE$/)
    assert.match(lines[1] ?? '', /^\S+Z\s+import\s+-\s+2\s+available\s+-\s+-\s+-\s+-$/)
    assert.match(lines[2] ?? '', new RegExp(`^\\S+Z\\s+arrival\\s+2\\s+14\\s+-\\s+${keyId}\\s+delivery-42\\s+-\\s+Litter of 12$`))
    assert.match(lines[3] ?? '', new RegExp(`^\\S+Z\\s+adjustment\\s+14\\s+13\\s+-\\s+${keyId}\\s+${soldRequestId}\\s+-\\s+-$`))
    assert.equal(lines.length, 4)
    assert.ok(!table.stdout.includes(key) && !table.stderr.includes(key), 'never the key itself')

    const json = await cli.run(['inventory', 'history', '7', '--json'])
    assert.equal(json.code, 0, json.stderr)
    const entries = JSON.parse(json.stdout) as LedgerJson[]
    assert.deepEqual(entries.map((e) => [e.reason, e.previousQuantity, e.quantity, e.keyId, e.note]), [
      ['import', null, 2, null, null],
      ['arrival', 2, 14, keyId, 'Litter of 12'],
      ['adjustment', 14, 13, keyId, null]
    ])
    assert.ok(entries.every((e) => e.petId === 7 && /^\d{4}-\d\d-\d\dT/.test(e.at)))
  })

  test('when an import changed the pet\'s status, then history shows the change of status with the quantities it kept', async (t) => {
    const cli = cliFor(t)
    await inspectStore(cli.db, async (store) => {
      await importData(store, { pets: [{ id: 3n, name: 'Rex', status: 'available', quantity: 4 }], orders: [] })
      await importData(store, { pets: [{ id: 3n, name: 'Rex', status: 'sold', quantity: 4 }], orders: [] })
    })
    const res = await cli.run(['inventory', 'history', '3'])
    assert.equal(res.code, 0, res.stderr)
    const lines = res.stdout.trimEnd().split('\n')
    assert.match(lines[1] ?? '', /^\S+Z\s+import\s+-\s+4\s+available\s+-\s+-\s+-\s+-$/)
    assert.match(lines[2] ?? '', /^\S+Z\s+import\s+4\s+4\s+available->sold\s+-\s+-\s+-\s+-$/)
  })

  test('when changes carry a shop\'s reason and a reference, then history shows both in the table and as JSON', async (t) => {
    const cli = cliFor(t)
    await inspectStore(cli.db, async (store) => {
      await importData(store, { pets: [{ id: 5n, name: 'Rex', status: 'available', quantity: 6 }], orders: [] })
      await store.stock.setQuantity(change(5n, 5, { reason: 'sale', reference: 'order-10482' }))
      await store.stock.setQuantity(change(5n, 4, { reason: 'loss', note: 'escaped' }))
      await store.stock.setQuantity(change(5n, 3, { reason: 'recount', reference: 'count sheet 11', note: 'shelf B' }))
    })
    const table = await cli.run(['inventory', 'history', '5'])
    assert.equal(table.code, 0, table.stderr)
    const lines = table.stdout.trimEnd().split('\n')
    assert.match(lines[2] ?? '', /^\S+Z\s+sale\s+6\s+5\s+-\s+-\s+-\s+order-10482\s+-$/)
    assert.match(lines[3] ?? '', /^\S+Z\s+loss\s+5\s+4\s+-\s+-\s+-\s+-\s+escaped$/)
    assert.match(lines[4] ?? '', /^\S+Z\s+recount\s+4\s+3\s+-\s+-\s+-\s+count sheet 11\s+shelf B$/)
    const json = await cli.run(['inventory', 'history', '5', '--json'])
    assert.equal(json.code, 0, json.stderr)
    const entries = JSON.parse(json.stdout) as Array<LedgerJson & { reference: string | null }>
    assert.deepEqual(entries.map((e) => [e.reason, e.reference]), [
      ['import', null], ['sale', 'order-10482'], ['loss', null], ['recount', 'count sheet 11']
    ])
  })

  test('when the pet id is above 2^53, then --json writes it digit for digit', async (t) => {
    const cli = cliFor(t)
    await inspectStore(cli.db, async (store) => {
      await importData(store, { pets: [{ id: BigInt(BIG), name: 'big', status: 'available', quantity: 1 }], orders: [] })
      await store.stock.setQuantity(change(BigInt(BIG), 5, { reason: 'return', note: 'back' }))
    })
    const res = await cli.run(['inventory', 'history', BIG, '--json'])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stdout, new RegExp(`"petId":${BIG},"previousQuantity":1,"quantity":5,"reason":"return","note":"back"`))
  })

  test('when there are more changes than --limit, then the newest are shown, oldest first, with a note on stderr', async (t) => {
    const cli = cliFor(t)
    await inspectStore(cli.db, async (store) => {
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 0 }], orders: [] })
      for (const quantity of [1, 2, 3, 4, 5]) await store.stock.setQuantity(change(1n, quantity))
    })
    const res = await cli.run(['inventory', 'history', '1', '--json', '--limit', '2'])
    assert.equal(res.code, 0, res.stderr)
    assert.deepEqual((JSON.parse(res.stdout) as LedgerJson[]).map((e) => e.quantity), [4, 5])
    assert.match(res.stderr, /newest 2 changes; older ones exist/)
    const all = await cli.run(['inventory', 'history', '1', '--json'])
    assert.deepEqual((JSON.parse(all.stdout) as LedgerJson[]).map((e) => e.quantity), [0, 1, 2, 3, 4, 5])
    assert.equal(all.stderr, '')
  })

  test('when a note stored by an earlier release holds terminal control characters, then the table shows them escaped', async (t) => {
    const cli = cliFor(t)
    // The store's own write path, which never validated notes: as an earlier release's API let them through.
    await inspectStore(cli.db, async (store) => {
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 3 }], orders: [] })
      await store.stock.setQuantity(change(1n, 4, { note: 'paid\u009b2J \u202egpj.exe \u2028next' }))
    })
    const table = await cli.run(['inventory', 'history', '1'])
    assert.equal(table.code, 0, table.stderr)
    assert.ok(!/[\u0080-\u009f\u2028\u202e]/u.test(table.stdout), 'nothing a terminal would interpret')
    assert.match(table.stdout, /paid\\u\{9b\}2J \\u\{202e\}gpj\.exe \\u\{2028\}next$/m)
  })

  test('when a stock entry predates the ledger (no recorded change), then an empty history is printed', async (t) => {
    const cli = cliFor(t)
    await inspectStore(cli.db, async (store) => {
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available', quantity: 3 }], orders: [] })
    })
    // Entries written before migration 4 have no ledger rows and no chain head.
    const db = new Database(cli.db)
    db.exec('DELETE FROM stock_ledger; UPDATE inventory SET ledger_head = NULL')
    db.close()
    const json = await cli.run(['inventory', 'history', '1', '--json'])
    assert.equal(json.code, 0, json.stderr)
    assert.equal(json.stdout, '[]\n')
    const table = await cli.run(['inventory', 'history', '1'])
    assert.match(table.stdout, /^TIME\s+REASON\s+FROM\s+TO\s+STATUS\s+KEY\s+REQUEST\s+REFERENCE\s+NOTE\n$/)
  })

  test('when the pet exists without a stock entry, then it exits 1 with a message', async (t) => {
    const cli = cliFor(t)
    await inspectStore(cli.db, async (store) => {
      await importData(store, { pets: [{ id: 1n, name: 'a', status: 'available' }], orders: [] })
    })
    const res = await cli.run(['inventory', 'history', '1', '--json'])
    assert.equal(res.code, 1)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /pet 1 has no stock entry and no recorded stock changes/)
  })

  test('when the pet is unknown, then it exits 1 with a message on stderr and nothing on stdout', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['inventory', 'history', '42'])
    assert.equal(res.code, 1)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /pet 42 has no stock entry/)
  })

  for (const args of [['inventory'], ['inventory', 'list'], ['inventory', 'history'], ['inventory', 'history', 'abc'],
    ['inventory', 'history', '9223372036854775808'], ['inventory', 'history', '1', '--limit', '0'], ['inventory', 'history', '1', '--color']]) {
    test(`when called as "${args.join(' ')}", then it is a usage error (exit 2)`, async (t) => {
      const cli = cliFor(t)
      const res = await cli.run(args)
      assert.equal(res.code, 2)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /^petstore: /)
    })
  }
})
