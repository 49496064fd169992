/**
 * The direct reads of the database that the never-oversold checks judge (test/helpers/checkout.ts postgresStock): each
 * snapshot is one moment of the database, also when two callers ask at once on its one connection, as the load run's
 * sampler and stocker do (test/load/checkout.ts). A snapshot whose on-hand count and ledger sums came from two
 * moments would show a pet's stock as its ledger does not explain it, with nothing wrong in the store.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { importData } from '../../src/domain/import.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { oversold, postgresStock } from '../helpers/checkout.js'
import { ownDatabase, requirePostgres } from '../helpers/postgres.js'
import { stockAdjustment } from '../store/helpers.js'

const PETS = [1, 2, 3]
const SECONDS = 4

if (await requirePostgres('the stock samples test')) {
  test('when two callers take snapshots at once on one connection while the stock changes, then each snapshot is one moment: ' +
    'on hand is what its ledger says', { timeout: 60_000 }, async (t) => {
    const { url, drop } = await ownDatabase()
    const store = new PostgresStore(url)
    const database = await postgresStock(url)
    try {
      await store.schema.migrate()
      await importData(store, { pets: PETS.map((id) => ({ id: BigInt(id), name: `pet ${id}`, status: 'available' as const, quantity: 1000 })), orders: [] })
      const until = Date.now() + SECONDS * 1000
      let writes = 0
      // Each commit moves the on-hand count and writes its ledger row: a snapshot of one moment always sees both or neither.
      const writer = (async () => {
        while (Date.now() < until) {
          const results = await Promise.all(PETS.map((id) => store.stock.adjustQuantity(stockAdjustment(BigInt(id), Math.random() < 0.5 ? -1 : 1))))
          writes += results.filter((result) => result.status === 'updated').length
        }
      })()
      const violations: string[] = []
      let samples = 0
      // Two samplers on the one StockDatabase, each pausing at random as the load run's stocker does, so that one asks
      // while the other's transaction is half way.
      const sampler = async (): Promise<void> => {
        while (Date.now() < until) {
          const petId = PETS[Math.floor(Math.random() * PETS.length)] as number
          const wrong = oversold(await database.snapshot(petId), Date.now())
          samples++
          if (wrong !== null) violations.push(`pet ${petId}: ${wrong}`)
          await sleep(Math.random() * 3)
        }
      }
      await Promise.all([writer, sampler(), sampler()])
      t.diagnostic(`${writes} stock writes, ${samples} snapshots`)
      assert.ok(writes > 100, `only ${writes} stock writes: the snapshots were not taken while the stock changed`)
      assert.ok(samples > 100, `only ${samples} snapshots`)
      assert.deepEqual(violations.slice(0, 5), [], `${violations.length} of ${samples} snapshots read two moments`)
    } finally {
      await database.close()
      await store.close()
      await drop()
    }
  })
}
