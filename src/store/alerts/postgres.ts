/**
 * Low-stock alerts on PostgreSQL: reorder points, and the crossing check every stock write runs in its transaction.
 * The stock area's single-statement writes fold the same check into their statement (LOW_STOCK_CTE): no extra round
 * trip on the hot path.
 */
import type pg from 'pg'
import type { InventoryItem } from '../../model.js'
import type { PostgresDatabase, Queryable } from '../postgres/database.js'
import { INVENTORY_COLUMNS, toInventoryItem, type InventoryRow } from '../stock/rows.js'
import { LOW_STOCK_EVENT, type AlertStore, type ClearReorderPointResult, type ReorderPoint, type ReorderPointChange, type SetReorderPointResult } from './types.js'

/**
 * The crossing check as statement parts, over a relation `source` of (pet_id, quantity) with the quantities a write
 * leaves: `alerted` moves `low` of every pet whose alert changes (ONE row per crossing or re-arming: a pet already on
 * the right side is not touched) and returns them; the rows with low = true are the crossings, each of which the
 * caller inserts as an inventory.low_stock ledger row (LOW_STOCK_ROWS). The same rule as ./types.ts `crossing`.
 * The caller holds the pets' inventory rows locked (FOR UPDATE), as every stock write and a point's change do, so
 * two writes of one pet never both see it not low.
 */
export function lowStockCte (source: string): string {
  return `alerted AS (
    UPDATE stock_alerts a SET low = (s.quantity <= a.reorder_point) FROM ${source} s
    WHERE a.pet_id = s.pet_id AND a.low IS DISTINCT FROM (s.quantity <= a.reorder_point)
    RETURNING a.pet_id, a.reorder_point, a.low, s.quantity
  )`
}

/** The event type as a statement's literal. */
export const LOW_STOCK_LITERAL = `'${LOW_STOCK_EVENT}'`

/**
 * The low-stock check of one pet's stock write inside its transaction (`client` in the transaction, the pet's
 * inventory row locked): see ../alerts/types.ts. For the writers that have a transaction of their own and no
 * statement to fold it into (the selling area's confirmations); returns the event row's id, or null.
 */
export async function trackLowStock (client: Queryable, petId: bigint, quantity: number, at: Date, keyId: string | null,
  requestId: string | null): Promise<bigint | null> {
  const ids = await trackLowStockOf(client, [{ petId, quantity }], at, keyId, requestId)
  return ids[0] ?? null
}

/** trackLowStock for several pets in one statement; the ids of the event rows written, in pet order. */
export async function trackLowStockOf (client: Queryable, levels: ReadonlyArray<{ petId: bigint, quantity: number }>, at: Date,
  keyId: string | null, requestId: string | null): Promise<bigint[]> {
  if (levels.length === 0) return []
  const { rows } = await client.query<{ id: bigint }>(
    `WITH levels AS (SELECT * FROM unnest($1::bigint[], $2::integer[]) AS t (pet_id, quantity)), ${lowStockCte('levels')}
     INSERT INTO stock_ledger (pet_id, quantity, event, reorder_point, key_id, request_id, created_at)
     SELECT pet_id, quantity, ${LOW_STOCK_LITERAL}, reorder_point, $3, $4, $5 FROM alerted WHERE low ORDER BY pet_id
     RETURNING id`,
    [levels.map((level) => level.petId), levels.map((level) => level.quantity), keyId, requestId, at])
  return rows.map((row) => row.id)
}

const toPoint = (petId: bigint, row: { reorder_point: number, low: boolean }): ReorderPoint =>
  ({ petId, reorderPoint: row.reorder_point, low: row.low })

export class PostgresAlerts implements AlertStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  async getReorderPoint (petId: bigint): Promise<ReorderPoint | null> {
    const { rows } = await this.#db.query<{ reorder_point: number, low: boolean }>(
      'SELECT a.reorder_point, a.low FROM stock_alerts a JOIN inventory i ON i.pet_id = a.pet_id WHERE a.pet_id = $1', [petId])
    return rows[0] === undefined ? null : toPoint(petId, rows[0])
  }

  async listLowStock ({ afterId, limit }: { afterId: bigint | null, limit: number }): Promise<InventoryItem[]> {
    const { rows } = await this.#db.query<InventoryRow>(
      `SELECT ${INVENTORY_COLUMNS} FROM stock_alerts a JOIN inventory i ON i.pet_id = a.pet_id JOIN pets p ON p.id = i.pet_id
       WHERE i.quantity <= a.reorder_point AND ($1::bigint IS NULL OR i.pet_id > $1) ORDER BY i.pet_id LIMIT $2`, [afterId, limit])
    return rows.map(toInventoryItem)
  }

  /**
   * In one transaction: the pet's entry locked (a stock write of the pet waits, or is waited for), the point
   * upserted, and the crossing check with the locked quantity.
   */
  async setReorderPoint (change: ReorderPointChange): Promise<SetReorderPointResult> {
    return await this.#db.transaction(async (client): Promise<SetReorderPointResult> => {
      const { rows } = await client.query<{ quantity: number }>('SELECT quantity FROM inventory WHERE pet_id = $1 FOR UPDATE', [change.petId])
      const quantity = rows[0]?.quantity
      if (quantity === undefined) return { status: 'not_found' }
      await setPoints(client, [{ petId: change.petId, reorderPoint: change.reorderPoint }])
      await trackLowStock(client, change.petId, quantity, change.at, change.keyId, change.requestId)
      const { rows: [row] } = await client.query<{ reorder_point: number, low: boolean }>(
        'SELECT reorder_point, low FROM stock_alerts WHERE pet_id = $1', [change.petId])
      return { status: 'set', point: toPoint(change.petId, row as { reorder_point: number, low: boolean }) }
    })
  }

  async clearReorderPoint (petId: bigint): Promise<ClearReorderPointResult> {
    const { rows } = await this.#db.query<{ entry: boolean, had: boolean }>(
      `WITH gone AS (DELETE FROM stock_alerts WHERE pet_id = $1 AND EXISTS (SELECT 1 FROM inventory WHERE pet_id = $1) RETURNING 1)
       SELECT EXISTS (SELECT 1 FROM inventory WHERE pet_id = $1) AS entry, EXISTS (SELECT 1 FROM gone) AS had`, [petId])
    const row = rows[0] as { entry: boolean, had: boolean }
    return row.entry ? { status: 'cleared', had: row.had } : { status: 'not_found' }
  }
}

/**
 * Sets pets' points, keeping whether each is low (a new point starts not low): the caller then runs the crossing
 * check with the pets' quantities. Used by the API's writes and by imports.
 */
export async function setPoints (client: pg.PoolClient, points: ReadonlyArray<{ petId: bigint, reorderPoint: number }>): Promise<void> {
  if (points.length === 0) return
  await client.query(
    `INSERT INTO stock_alerts (pet_id, reorder_point) SELECT * FROM unnest($1::bigint[], $2::integer[])
     ON CONFLICT (pet_id) DO UPDATE SET reorder_point = excluded.reorder_point`,
    [points.map((point) => point.petId), points.map((point) => point.reorderPoint)])
}
