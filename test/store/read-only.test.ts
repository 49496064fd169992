/**
 * The store of a release older than its schema (src/store/read-only.ts), built from what each area declares of its
 * writes: every declared write is refused (a key's last use skipped), every read answers, and nothing changes.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { importData } from '../../src/domain/import.js'
import { StoreReadOnlyError } from '../../src/errors.js'
import { ALERT_WRITES } from '../../src/store/alerts/types.js'
import { CATALOG_WRITES } from '../../src/store/catalog/types.js'
import { IDEMPOTENCY_WRITES } from '../../src/store/idempotency/types.js'
import { KEY_WRITES } from '../../src/store/keys/types.js'
import { readOnly } from '../../src/store/read-only.js'
import { SCHEMA_WRITES } from '../../src/store/schema/types.js'
import { SELLING_WRITES } from '../../src/store/selling/types.js'
import { STOCK_WRITES } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'
import { STREAM_WRITES } from '../../src/store/streams/types.js'
import { WEBHOOK_WRITES } from '../../src/store/webhooks/types.js'
import { tempStore } from '../helpers/app.js'
import { pet, setStock } from './helpers.js'

const DECLARED: ReadonlyArray<[keyof Store, Readonly<Record<string, 'refuse' | 'skip'>>]> = [
  ['schema', SCHEMA_WRITES], ['stock', STOCK_WRITES], ['idempotency', IDEMPOTENCY_WRITES], ['keys', KEY_WRITES],
  ['webhooks', WEBHOOK_WRITES], ['streams', STREAM_WRITES], ['catalog', CATALOG_WRITES], ['selling', SELLING_WRITES], ['alerts', ALERT_WRITES]
]

test('when a store is ahead of this release, then every write an area declares is refused (a key\'s last use skipped), reads answer, and nothing changes', async (t) => {
  const store = await tempStore(t)
  await importData(store, { pets: [pet(1n, { quantity: 3 })], orders: [] })
  await setStock(store, 1n, 4)
  const status = await store.schema.schemaStatus()
  const ahead = readOnly(store, { ...status, ahead: [{ version: status.latest + 1, name: 'a later release', checksum: null }] })
  const version = await store.stock.inventoryVersion()
  const feed = await store.stock.listChanges(null, 100)

  for (const [area, writes] of DECLARED) {
    const methods = ahead[area] as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>
    for (const [name, access] of Object.entries(writes)) {
      const call = methods[name]?.()
      if (access === 'skip') assert.equal(await call, undefined, `${area}.${name} is skipped`)
      else await assert.rejects(call as Promise<unknown>, (error: unknown) => error instanceof StoreReadOnlyError && /newer release/.test(error.message), `${area}.${name}`)
    }
  }

  assert.deepEqual(await ahead.stock.listInventory(), [{ petId: 1n, quantity: 4, status: 'available' }])
  assert.deepEqual(await ahead.stock.getStockEntry(1n), await store.stock.getStockEntry(1n))
  assert.equal(await ahead.catalog.countPets(), 1)
  assert.equal(await ahead.alerts.getReorderPoint(1n), null)
  assert.deepEqual(await ahead.keys.listApiKeys(), [])
  assert.deepEqual(await ahead.webhooks.listWebhooks(null), [])
  assert.deepEqual(await ahead.selling.availability([1n], new Date()), [{ petId: 1n, onHand: 4, held: 0, available: 4 }])
  assert.equal(ahead.kind, 'sqlite')
  assert.equal(ahead.poolStats(), null)
  await ahead.ping()
  assert.equal(await store.stock.inventoryVersion(), version, 'nothing changed')
  assert.deepEqual(await store.stock.listChanges(null, 100), feed)
})
