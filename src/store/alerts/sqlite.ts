/** Low-stock alerts on SQLite: reorder points, and the crossing check every stock write runs in its transaction. */
import type Database from 'better-sqlite3'
import type { InventoryItem } from '../../model.js'
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { INVENTORY_COLUMNS, toInventoryItem, type InventoryRow } from '../stock/rows.js'
import {
  crossing, LOW_STOCK_EVENT, type AlertStore, type ClearReorderPointResult, type ReorderPoint, type ReorderPointChange,
  type SetReorderPointResult
} from './types.js'

/** The statements of the crossing check, prepared once per connection. */
interface CheckStatements {
  /** The one lookup a stock write makes per changed pet: the primary key of stock_alerts. */
  read: Database.Statement
  mark: Database.Statement
  record: Database.Statement
}

const checks = new WeakMap<SqliteDatabase, CheckStatements>()

function statementsOf (db: SqliteDatabase): CheckStatements {
  let statements = checks.get(db)
  if (statements === undefined) {
    statements = {
      read: db.connection.prepare('SELECT reorder_point, low FROM stock_alerts WHERE pet_id = ?').raw(true),
      mark: db.connection.prepare('UPDATE stock_alerts SET low = ? WHERE pet_id = ?'),
      // No previous_id and no move of the entry's ledger_head: the event joins no chain (a pet's history stays its changes).
      record: db.connection.prepare(`INSERT INTO stock_ledger (pet_id, quantity, event, reorder_point, key_id, request_id, created_at)
        VALUES (?, ?, '${LOW_STOCK_EVENT}', ?, ?, ?, ?)`)
    }
    checks.set(db, statements)
  }
  return statements
}

/**
 * The low-stock check of one pet's stock write, called inside the write's transaction with the quantity it leaves:
 * a crossing at or below the pet's reorder point writes the inventory.low_stock ledger row and marks the pet low; a
 * rise above it marks it not low. A pet without a point costs the one indexed lookup. Returns the event row's id
 * when one was written (the write's last ledger row), else null. Every writer of stock on SQLite calls it: the stock
 * area, imports, the selling area's confirmations.
 */
export function trackLowStock (db: SqliteDatabase, petId: bigint, quantity: number, at: Date, keyId: string | null,
  requestId: string | null): bigint | null {
  const { read, mark, record } = statementsOf(db)
  const row = read.get(petId) as [bigint, bigint] | undefined
  if (row === undefined) return null
  const point = Number(row[0])
  const move = crossing(point, row[1] === 1n, quantity)
  if (move === null) return null
  mark.run(move === 'crossed' ? 1 : 0, petId)
  if (move === 'rearmed') return null
  return BigInt(record.run(petId, quantity, point, keyId, requestId, at.toISOString()).lastInsertRowid)
}

/** A stock_alerts row as a ReorderPoint. */
const toPoint = (petId: bigint, row: { reorder_point: bigint, low: bigint }): ReorderPoint =>
  ({ petId, reorderPoint: Number(row.reorder_point), low: row.low === 1n })

export class SqliteAlerts implements AlertStore {
  readonly #db: SqliteDatabase

  constructor (db: SqliteDatabase) {
    this.#db = db
  }

  async getReorderPoint (petId: bigint): Promise<ReorderPoint | null> {
    return guard(() => {
      const row = this.#db.prepare(`SELECT a.reorder_point, a.low FROM stock_alerts a JOIN inventory i ON i.pet_id = a.pet_id
        WHERE a.pet_id = ?`).get(petId) as { reorder_point: bigint, low: bigint } | undefined
      return row === undefined ? null : toPoint(petId, row)
    })
  }

  async listLowStock ({ afterId, limit }: { afterId: bigint | null, limit: number }): Promise<InventoryItem[]> {
    return guard(() => (this.#db.prepare(`SELECT ${INVENTORY_COLUMNS} FROM stock_alerts a JOIN inventory i ON i.pet_id = a.pet_id
      JOIN pets p ON p.id = i.pet_id WHERE i.quantity <= a.reorder_point AND (? IS NULL OR i.pet_id > ?) ORDER BY i.pet_id LIMIT ?`)
      .all(afterId, afterId, limit) as InventoryRow[]).map(toInventoryItem))
  }

  /** Joins the group commit, as stock writes do: the point and the quantity it is compared with are one snapshot. */
  setReorderPoint (change: ReorderPointChange): Promise<SetReorderPointResult> {
    return this.#db.writes.run((): SetReorderPointResult => {
      const quantity = this.#db.prepare('SELECT quantity FROM inventory WHERE pet_id = ?').pluck().get(change.petId) as bigint | undefined
      if (quantity === undefined) return { status: 'not_found' }
      setPoint(this.#db, change.petId, change.reorderPoint)
      trackLowStock(this.#db, change.petId, Number(quantity), change.at, change.keyId, change.requestId)
      const row = this.#db.prepare('SELECT reorder_point, low FROM stock_alerts WHERE pet_id = ?').get(change.petId) as { reorder_point: bigint, low: bigint }
      return { status: 'set', point: toPoint(change.petId, row) }
    })
  }

  clearReorderPoint (petId: bigint): Promise<ClearReorderPointResult> {
    return this.#db.writes.run((): ClearReorderPointResult => {
      if (this.#db.prepare('SELECT 1 FROM inventory WHERE pet_id = ?').get(petId) === undefined) return { status: 'not_found' }
      const { changes } = this.#db.prepare('DELETE FROM stock_alerts WHERE pet_id = ?').run(petId)
      return { status: 'cleared', had: changes > 0 }
    })
  }
}

/**
 * Sets a pet's point, keeping whether it is low (a new point starts not low): the caller then runs trackLowStock with
 * the pet's quantity, which decides whether the new point is a crossing. Used by the API's writes and by imports.
 */
export function setPoint (db: SqliteDatabase, petId: bigint, reorderPoint: number): void {
  db.prepare(`INSERT INTO stock_alerts (pet_id, reorder_point) VALUES (?, ?)
    ON CONFLICT (pet_id) DO UPDATE SET reorder_point = excluded.reorder_point`).run(petId, reorderPoint)
}
