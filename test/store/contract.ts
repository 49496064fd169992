/**
 * The contracts of every area of a store that a single store shows (the webhooks and streams contracts need a second
 * instance: ./harness.ts), for the runs of the whole set on a store built another way: upgraded from a landed schema
 * (./upgrade.test.ts), or behind PgBouncer (./pgbouncer.test.ts). Each area's own runner (./<area>.contract.test.ts)
 * runs its contract on SQLite and on PostgreSQL.
 */
import type { TestContext } from 'node:test'
import type { Store } from '../../src/store/store.js'
import { catalogContract } from './catalog.contract.js'
import { idempotencyContract } from './idempotency.contract.js'
import { keysContract } from './keys.contract.js'
import { schemaContract } from './schema.contract.js'
import { stockContract } from './stock.contract.js'

export function storeContract (name: string, open: (t: TestContext) => Promise<Store>): void {
  schemaContract(name, open)
  stockContract(name, open)
  idempotencyContract(name, open)
  catalogContract(name, open)
  keysContract(name, open)
}
