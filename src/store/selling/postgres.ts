/**
 * The selling area on PostgreSQL: not written yet. Every method fails with a clear error, so that the store's shape is
 * complete while the SQLite implementation lands first; the implementation replaces this file.
 */
import type { PostgresDatabase } from '../postgres/database.js'
import type { SellingStore } from './types.js'

const missing = async (): Promise<never> => { throw new Error('holds and API orders are not implemented on PostgreSQL yet') }

export class PostgresSelling implements SellingStore {
  constructor (_db: PostgresDatabase) {}
  getHold = missing
  listHolds = missing
  availability = missing
  availabilityAll = missing
  getOrder = missing
  placeHold = missing
  endHold = missing
  extendHold = missing
  moveOrder = missing
  expireHolds = missing
  purgeHolds = missing
}
