/**
 * `petstore inventory reorder-point`: set, show and remove a pet's reorder point as an operator does, and an import
 * file's reorderPoint; exit codes and output, and the inventory.low_stock row a crossing leaves in the store.
 */
import Database from 'better-sqlite3'
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { cliFor } from './run.js'

/** The low-stock event rows of the test's store, by SQL: pet, quantity, point. */
function lowStockRows (db: string): Array<[bigint, bigint, bigint]> {
  const store = new Database(db, { readonly: true })
  store.defaultSafeIntegers(true)
  try {
    return store.prepare("SELECT pet_id, quantity, reorder_point FROM stock_ledger WHERE event = 'inventory.low_stock' ORDER BY id").raw(true).all() as Array<[bigint, bigint, bigint]>
  } finally {
    store.close()
  }
}

describe('petstore inventory reorder-point', () => {
  test('when a point is set, shown and cleared, then each prints what the pet has and a crossing is recorded once', async (t) => {
    const cli = cliFor(t)
    // Written as text: 2^53 + 1 is no double.
    const pets = cli.file('pets.json', '{"pets": [{"id": 7, "name": "Rex", "status": "available", "quantity": 4}, ' +
      '{"id": 9007199254740993, "name": "Big", "status": "available", "quantity": 9}]}')
    assert.equal((await cli.run(['import', pets])).code, 0)

    const above = await cli.run(['inventory', 'reorder-point', '9007199254740993', '5', '--json'])
    assert.equal(above.code, 0, above.stderr)
    assert.equal(above.stdout, '{"petId":9007199254740993,"reorderPoint":5,"low":false}\n')
    assert.equal(above.stderr, '')

    const set = await cli.run(['inventory', 'reorder-point', '7', '5'])
    assert.equal(set.code, 0, set.stderr)
    assert.match(set.stdout, /^PET\s+REORDER POINT\s+LOW\n7\s+5\s+yes\n$/)
    assert.match(set.stderr, /at or below its reorder point: an inventory.low_stock event was recorded/)
    const again = await cli.run(['inventory', 'reorder-point', '7', '6'])
    assert.equal(again.code, 0, again.stderr)
    assert.deepEqual(lowStockRows(cli.db), [[7n, 4n, 5n]], 'still low: one event for one crossing')

    const shown = await cli.run(['inventory', 'reorder-point', '7', '--json'])
    assert.deepEqual([shown.code, shown.stdout], [0, '{"petId":7,"reorderPoint":6,"low":true}\n'])

    const cleared = await cli.run(['inventory', 'reorder-point', '7', '--clear'])
    assert.deepEqual([cleared.code, cleared.stdout, cleared.stderr], [0, '', 'Removed the reorder point of pet 7.\n'])
    const none = await cli.run(['inventory', 'reorder-point', '7'])
    assert.equal(none.code, 1)
    assert.match(none.stderr, /^petstore: Pet 7 has no stock entry or no reorder point\.\n$/)
  })

  test('when the pet has no stock entry, then setting its point exits 1 and says so', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['inventory', 'reorder-point', '42', '3'])
    assert.deepEqual([res.code, res.stdout, res.stderr], [1, '', 'petstore: pet 42 has no stock entry\n'])
  })

  test('when the arguments are wrong, then it exits 2 with a usage error and changes nothing', async (t) => {
    const cli = cliFor(t)
    const pets = cli.file('pets.json', JSON.stringify({ pets: [{ id: 7, name: 'Rex', status: 'available', quantity: 4 }] }))
    assert.equal((await cli.run(['import', pets])).code, 0)
    // At once: each is a process of its own, and none of them writes.
    const cases = [['7', '1000000001'], ['7', '2.5'], ['7', 'five'], ['7', '3', '--clear'], ['x', '3'], ['7', '3', '4'], []]
    const results = await Promise.all(cases.map(async (args) => [args, await cli.run(['inventory', 'reorder-point', ...args])] as const))
    for (const [args, res] of results) {
      assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`)
      assert.match(res.stderr, /^petstore: .*\nRun ".*help" for usage\.\n$/)
    }
    assert.equal((await cli.run(['inventory', 'reorder-point', '7'])).code, 1, 'no point was set')
  })

  test('when an import file gives reorder points, then they are set and a pet at or below its point is recorded low once', async (t) => {
    const cli = cliFor(t)
    const pets = cli.file('pets.json', JSON.stringify({
      pets: [{ id: 1, name: 'Low', status: 'available', quantity: 2, reorderPoint: 3 }, { id: 2, name: 'Fine', status: 'available', quantity: 8, reorderPoint: 3 }]
    }))
    assert.equal((await cli.run(['import', pets])).code, 0)
    assert.equal((await cli.run(['import', pets])).code, 0)
    assert.equal((await cli.run(['inventory', 'reorder-point', '1', '--json'])).stdout, '{"petId":1,"reorderPoint":3,"low":true}\n')
    assert.equal((await cli.run(['inventory', 'reorder-point', '2', '--json'])).stdout, '{"petId":2,"reorderPoint":3,"low":false}\n')
    assert.deepEqual(lowStockRows(cli.db), [[1n, 2n, 3n]])
    const bad = cli.file('bad.json', JSON.stringify({ pets: [{ id: 3, name: 'Bad', status: 'available', quantity: 1, reorderPoint: -1 }] }))
    const refused = await cli.run(['import', bad])
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /pets\[0\]\.reorderPoint/)
  })
})
