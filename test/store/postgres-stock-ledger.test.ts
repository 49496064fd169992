/**
 * On PostgreSQL, every committed state has each pet's on-hand count where its ledger leads: the stock changes'
 * deltas sum to it, and each change starts from the quantity the one before it left. Stressed with everything that
 * writes a pet's stock at once on two instances: group-committed adjustments and sets (several of one pet in a batch,
 * some under a key sent twice, some failing so that their batch runs again alone) beside holds confirmed and released
 * and orders delivered and cancelled on the same pets (src/store/postgres/group-commit.ts, src/store/selling/postgres.ts).
 * A sampler reads the pets' entries and their ledgers in one REPEATABLE READ snapshot, over and over, while they run.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import pg from 'pg'
import { importData } from '../../src/domain/import.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import type { SellingActor } from '../../src/store/selling/types.js'
import { POSTGRES_URL, requirePostgres, tempSchema } from '../helpers/postgres.js'
import { stockAdjustment, stockChange } from './helpers.js'

const PETS = [1n, 2n, 3n, 4n]
const STOCK = 10_000
const SECONDS = 8

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)] as T

/** The stock changes' rows only: events (holds, low stock) are no change. */
const CHANGES = 'event IS NULL AND reason IS NOT NULL'

/** What one snapshot shows wrong: pets whose on-hand count is not the sum of their ledger's deltas. */
async function sample (client: pg.Client): Promise<string[]> {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
  try {
    // Two statements, as the load run's sampler reads them: a write committing its entry and its ledger apart would
    // show between them.
    const { rows: entries } = await client.query<{ pet_id: string, quantity: number }>('SELECT pet_id::text, quantity FROM inventory ORDER BY pet_id')
    const { rows: ledger } = await client.query<{ pet_id: string, implied: string }>(
      `SELECT pet_id::text, sum(quantity - coalesce(previous_quantity, 0))::text AS implied FROM stock_ledger WHERE ${CHANGES} GROUP BY pet_id`)
    const implied = new Map(ledger.map((row) => [row.pet_id, Number(row.implied)]))
    return entries.filter((row) => implied.get(row.pet_id) !== row.quantity)
      .map((row) => `pet ${row.pet_id}: on hand ${row.quantity}, the ledger's changes sum to ${implied.get(row.pet_id)}`)
  } finally {
    await client.query('COMMIT')
  }
}

if (await requirePostgres('the PostgreSQL stock ledger stress test')) {
  test('when group-committed adjustments and sets run beside hold confirmations, releases and order cancellations of the same pets on two ' +
    'instances, then every snapshot has each pet on hand where its ledger leads, and each change starts where the one before it left', { timeout: 90_000 }, async (t) => {
    const schema = await tempSchema(t)
    const stores = [0, 1].map(() => new PostgresStore(POSTGRES_URL, { schema })) as [PostgresStore, PostgresStore]
    const sampler = new pg.Client({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}` })
    t.after(async () => {
      await sampler.end()
      await Promise.all(stores.map((store) => store.close()))
    })
    await sampler.connect()
    await stores[0].schema.migrate()
    await importData(stores[0], { pets: PETS.map((id) => ({ id, name: `p${id}`, status: 'available' as const, quantity: STOCK })), orders: [] })

    const until = Date.now() + SECONDS * 1000
    const counts = new Map<string, number>()
    const count = (what: string): void => { counts.set(what, (counts.get(what) ?? 0) + 1) }
    const n = (what: string): number => counts.get(what) ?? 0

    // Bursts of single-row writes on each instance, issued in one turn so that they share a batch: the same pet more
    // than once, a key sent twice, now and then a write the database refuses (its batch then runs again alone).
    const stocker = async (store: PostgresStore, i: number): Promise<void> => {
      for (let burst = 0; Date.now() < until; burst++) {
        const key = { scope: `key_${i}`, key: `k-${burst}`, fingerprint: 'fp', expiresAt: new Date(Date.now() + 60_000) }
        const writes = Array.from({ length: 8 }, (_, w) => {
          const petId = pick(PETS)
          if (w === 0 && burst % 25 === 0) return store.stock.setQuantity(stockChange(petId, -1)).then(() => 'applied', () => 'refused')
          const write = w < 6
            ? store.stock.adjustQuantity(stockAdjustment(petId, pick([-3, -1, 1, 2, 5]), w < 2 ? { idempotency: key, at: new Date() } : {}))
            : store.stock.setQuantity(stockChange(petId, STOCK + Math.floor(Math.random() * 100)))
          return write.then((result) => result.status)
        })
        for (const status of await Promise.all(writes)) count(`stock ${status}`)
      }
    }

    // A storefront's holds and orders on the same pets, each ended at once: a confirmation or a delivery sells.
    const shopper = async (store: PostgresStore, i: number): Promise<void> => {
      const actor = (): SellingActor => ({ quotaId: `quota_${i}`, keyId: `key_${i}`, requestId: null, at: new Date() })
      while (Date.now() < until) {
        const pets = [...new Set([pick(PETS), pick(PETS)])].sort((a, b) => (a < b ? -1 : 1))
        const order = Math.random() < 0.4
        const placed = await store.selling.placeHold({
          ...actor(),
          id: `hold_${randomBytes(15).toString('base64url')}`,
          lines: (order ? pets.slice(0, 1) : pets).map((petId) => ({ petId, quantity: 1 + Math.floor(Math.random() * 3) })),
          reference: null,
          expiresAt: order ? null : new Date(Date.now() + 60_000),
          caps: { activeHolds: 1_000_000, heldUnits: 1_000_000 },
          ...(order ? { order: { shipDate: '2026-12-01T09:00:00Z' } } : {})
        })
        if (placed.status !== 'placed') { count(`hold ${placed.status}`); continue }
        const sell = Math.random() < 0.6
        if (placed.order !== undefined) {
          const moved = await store.selling.moveOrder({ ...actor(), orderId: placed.order.id, to: sell ? 'delivered' : 'cancelled' })
          count(`order ${moved.status === 'moved' ? (sell ? 'delivered' : 'cancelled') : moved.status}`)
        } else {
          const ended = await store.selling.endHold({ ...actor(), id: placed.hold.id, ending: sell ? 'confirmed' : 'released', ofOrder: false })
          count(`hold ${ended.status === 'ended' ? (sell ? 'confirmed' : 'released') : ended.status}`)
        }
      }
    }

    const violations: string[] = []
    let samples = 0
    const watch = async (): Promise<void> => {
      while (Date.now() < until) {
        violations.push(...await sample(sampler))
        samples++
      }
    }

    await Promise.all([
      watch(),
      ...stores.flatMap((store, i) => [stocker(store, i), shopper(store, i), shopper(store, i + 2)])
    ])
    violations.push(...await sample(sampler))
    const stats = stores.map((store) => store.stock.groupCommit)
    t.diagnostic(`${samples} snapshots; ${[...counts].map(([what, k]) => `${what} ${k}`).join(', ')}; group commit ${JSON.stringify(stats)}`)

    assert.deepEqual(violations.slice(0, 5), [], `${violations.length} pets in ${samples} snapshots on hand elsewhere than their ledger leads`)
    // Each change of a pet, in ledger order (a change holds the pet's row until it commits), starts from the quantity
    // the one before it left: a change that recorded a wrong previous quantity shows here even if a later one made up for it.
    const { rows } = await sampler.query<{ pet_id: string, previous_quantity: number | null, quantity: number }>(
      `SELECT pet_id::text, previous_quantity, quantity FROM stock_ledger WHERE ${CHANGES} ORDER BY pet_id, id`)
    const broken = rows.filter((row, k) => {
      const before = rows[k - 1]
      return before !== undefined && before.pet_id === row.pet_id && row.previous_quantity !== before.quantity
    })
    assert.deepEqual(broken.slice(0, 5), [], `${broken.length} of ${rows.length} changes do not start where the one before them left`)

    // The mix ran: without it the checks above prove less than they say.
    assert.ok(samples > 50, `only ${samples} snapshots`)
    for (const what of ['stock updated', 'stock recorded', 'stock refused', 'hold confirmed', 'hold released', 'order delivered', 'order cancelled']) {
      assert.ok(n(what) > 0, `no "${what}" in the run`)
    }
    assert.ok(stats.every((s) => s.batches > 0 && s.batchedWrites > 2 * s.batches && s.retriedAlone > 0), JSON.stringify(stats))
  })
}
