/** The stock area on PostgreSQL: entries, their writes (single statements or one transaction), the ledger and the feed. */
import type pg from 'pg'
import { STOCK_CHANGED, type ChangeType, type InventoryItem, type PetStatus, type StockChangeEntry, type StockEntry } from '../../model.js'
import { entriesText } from '../idempotency/rows.js'
import type { IdempotencyClaim } from '../idempotency/types.js'
import { storeError, type PostgresDatabase } from '../postgres/database.js'
import { PostgresGroupCommit, type GroupCommitStats } from '../postgres/group-commit.js'
import { EPOCH_OF } from '../rows.js'
import { feedHead } from '../postgres/sql.js'
import { LOW_STOCK_LITERAL, lowStockCte } from '../alerts/postgres.js'
import { planBatch } from './batch.js'
import {
  ENTRY_COLUMNS, EPOCH_COLUMNS, headOf, INVENTORY_COLUMNS, LEDGER_COLUMNS, toEpoch, toInventoryItem, toLedgerEntry, toStockChange, toStockEntry,
  type EntryRow, type EpochRow, type InventoryRow, type LedgerRow
} from './rows.js'
import type {
  FeedChange, FeedHistory, FeedPlace, FeedPosition, InventoryPage, StockAdjustment, StockAdjustmentResult, StockBatch, StockBatchResult, StockChange,
  StockChangeResult, StockStore
} from './types.js'

/** The outcome row of a stock change: the entry before (old_*) and, when it applied, after. */
interface ChangeRow { pet_id: bigint, old_quantity: number, old_revision: bigint, status: PetStatus, quantity: number | null, revision: bigint | null }

/**
 * A stock change in one statement (one round trip, autocommit or inside a group commit's transaction): lock the entry, compare its revision, update
 * it, and record the ledger row. FOR UPDATE makes a concurrent change wait and then read the committed
 * quantity, so each ledger row's previous quantity is the one the change replaced.
 * With an idempotency key ($9 scope, $10 key, $11 fingerprint, $12 expiry), the entry is read only while no
 * unexpired record of the key exists, and the key's record is inserted from the updated row: a concurrent insert of
 * the same key (another instance) waits for this statement's commit and then fails, undoing its whole statement.
 * $13 is the ledger row's reference. A crossing of the pet's reorder point (../alerts/postgres.ts) is checked in the
 * same statement, and its inventory.low_stock row inserted after the change's by the same INSERT: no round trip more.
 */
function changeSql (quantity: string, condition: string): string {
  return `
  WITH old AS (
    SELECT pet_id, quantity, revision FROM inventory WHERE pet_id = $1
      AND ($9::text IS NULL OR NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE scope = $9 AND idempotency_key = $10::text AND expires_at > $8))
    FOR UPDATE
  ), updated AS (
    UPDATE inventory i SET quantity = ${quantity}, revision = old.revision + 1 FROM old
    WHERE i.pet_id = old.pet_id AND ($3::bigint[] IS NULL OR old.revision = ANY ($3::bigint[]))${condition}
    RETURNING i.pet_id, i.quantity, i.revision, old.quantity AS previous
  ), ${lowStockCte('updated')}, recorded AS (
    INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, note, key_id, request_id, created_at, reference, event, reorder_point)
    SELECT pet_id, previous, quantity, reason, note, $6, $7, $8, reference, event, reorder_point FROM (
      SELECT 0 AS k, pet_id, previous, quantity, $4::text AS reason, $5::text AS note, $13::text AS reference, NULL::text AS event,
        NULL::integer AS reorder_point FROM updated
      UNION ALL
      SELECT 1, pet_id, NULL, quantity, NULL, NULL, NULL, ${LOW_STOCK_LITERAL}, reorder_point FROM alerted WHERE low
    ) r ORDER BY k
  ), keyed AS (
    INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, created_at, expires_at)
    SELECT $9, $10, $11::text, ${ENTRIES_JSON}, $8, $12::timestamptz FROM updated u WHERE $9::text IS NOT NULL
  )
  SELECT old.pet_id, old.quantity AS old_quantity, old.revision AS old_revision, updated.quantity, updated.revision,
    (SELECT status FROM pets WHERE pets.id = old.pet_id) AS status
  FROM old LEFT JOIN updated ON true`
}
/** The updated row `u` as an idempotency record's entries: the shape rows.ts entriesText writes. */
const ENTRIES_JSON = `json_build_array(json_build_object('petId', u.pet_id::text, 'quantity', u.quantity,
  'status', (SELECT status FROM pets WHERE pets.id = u.pet_id), 'revision', u.revision::text))::text`
/** Sets the quantity ($2). */
const CHANGE_SQL = changeSql('$2', '')
/** Adds $2 to the locked, committed quantity, only when the result lies within $14..$15. */
const ADJUST_SQL = changeSql('old.quantity + $2::bigint', ' AND old.quantity + $2::bigint BETWEEN $14::bigint AND $15::bigint')

/** Whether a key ($1 scope, $2 key) has a record that is live at $3. */
const KEY_LIVE_SQL = 'SELECT 1 FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND expires_at > $3'
/** Removes a key's record only when it has expired at $3: a live one must stay and stop the write. */
const DROP_EXPIRED_KEY_SQL = 'DELETE FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND expires_at <= $3'

/** The change statement's values for an idempotency key ($9-$12): all null without one. */
function claimValues (claim: IdempotencyClaim | undefined): unknown[] {
  return claim === undefined ? [null, null, null, null] : [claim.scope, claim.key, claim.fingerprint, claim.expiresAt]
}

/** A unique violation on the idempotency key's record: another transaction committed the same key first. */
function isKeyTaken (error: unknown): boolean {
  const { code, constraint } = error as { code?: unknown, constraint?: unknown }
  return code === '23505' && constraint === 'idempotency_keys_pkey'
}

/**
 * What a change statement's row says: no row, no entry; no new quantity, nothing was changed, because the revision
 * was stale or else because the result fell outside the allowed quantities (adjustments only).
 */
function changeResult (row: ChangeRow | undefined, expectedRevisions: readonly bigint[] | null): StockAdjustmentResult {
  if (row === undefined) return { status: 'not_found' }
  if (row.quantity === null || row.revision === null) {
    const current = { petId: row.pet_id, quantity: row.old_quantity, status: row.status, revision: row.old_revision }
    return expectedRevisions !== null && !expectedRevisions.includes(current.revision) ? { status: 'stale', current } : { status: 'out_of_range', current }
  }
  return { status: 'updated', entry: { petId: row.pet_id, quantity: row.quantity, status: row.status, revision: row.revision } }
}

export class PostgresStock implements StockStore {
  readonly #db: PostgresDatabase
  readonly #commits: PostgresGroupCommit

  constructor (db: PostgresDatabase) {
    this.#db = db
    this.#commits = new PostgresGroupCommit(db)
  }

  async listInventory (): Promise<InventoryItem[]> {
    const { rows } = await this.#db.query<InventoryRow>(
      `SELECT ${INVENTORY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id ORDER BY i.pet_id`)
    return rows.map(toInventoryItem)
  }

  async inventoryVersion (): Promise<bigint> {
    const { rows } = await this.#db.query<{ v: bigint }>('SELECT v FROM inventory_version WHERE id = 1')
    return rows[0]?.v ?? 0n
  }

  /** Pages of the listing from one REPEATABLE READ transaction: every page sees the same snapshot. */
  async * inventoryPages (size: number): AsyncGenerator<InventoryPage> {
    const { client, release } = await this.#db.checkOut()
    // Open from the first statement on: "BEGIN; SET LOCAL ..." can fail after its BEGIN (a ROLLBACK without a
    // transaction only warns).
    let open = true
    try {
      await client.query(this.#db.begin('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'))
      const { rows: [row] } = await client.query<{ v: bigint, position: bigint | null, id: bigint | null, epoch: string | null }>(
        // The feed's last committed change in this snapshot: positions are taken in commit order, so the snapshot holds
        // every change up to the highest position it sees and none after.
        `SELECT h.v, h.position, h.id, ${EPOCH_OF('h.position', 'h.id')} AS epoch FROM (
           SELECT (SELECT v FROM inventory_version WHERE id = 1) AS v, f.position,
             (SELECT max(l.id) FROM stock_ledger l WHERE l.txid = f.txid) AS id
           FROM (SELECT 1) one LEFT JOIN (SELECT position, txid FROM feed_positions ORDER BY position DESC LIMIT 1) f ON true
         ) h`)
      const version = row?.v ?? 0n
      // A position without ledger rows is migration 7's own, on a ledger that was empty: the feed is empty.
      const feed = row === undefined || row.position === null || row.id === null ? null : { order: row.position, id: row.id, epoch: row.epoch }
      let after: bigint | null = null
      for (;;) {
        const { rows }: pg.QueryResult<InventoryRow> = await client.query<InventoryRow>(
          `SELECT ${INVENTORY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id
           WHERE $1::bigint IS NULL OR i.pet_id > $1 ORDER BY i.pet_id LIMIT $2`, [after, size])
        // An empty page only when the whole listing is empty.
        if (rows.length > 0 || after === null) yield { version, feed, items: rows.map(toInventoryItem) }
        if (rows.length < size) break
        after = (rows.at(-1) as InventoryRow).pet_id
      }
      await client.query('COMMIT')
      open = false
    } catch (error) {
      throw storeError(error)
    } finally {
      // After a failure, or a consumer that stopped early: end the transaction before the client goes back.
      if (open) await client.query('ROLLBACK').catch(() => {})
      release()
    }
  }

  async setQuantity (change: StockChange): Promise<StockChangeResult> {
    return await this.#change(CHANGE_SQL, change, [change.quantity]) as StockChangeResult
  }

  async adjustQuantity (change: StockAdjustment): Promise<StockAdjustmentResult> {
    return await this.#change(ADJUST_SQL, change, [change.delta], [change.allowed.min, change.allowed.max])
  }

  /**
   * Runs a change statement in the next group commit (../postgres/group-commit.ts): with the other single-row writes
   * waiting, in one transaction, or alone when it is the only one. With an idempotency key, tells a key recorded by
   * another transaction, or by an earlier write of the same batch (`recorded`).
   */
  async #change (sql: string, change: StockChange | StockAdjustment, amount: unknown[], more: unknown[] = []): Promise<StockAdjustmentResult> {
    const values = [change.petId, ...amount, change.expectedRevisions, change.reason, change.note, change.keyId, change.requestId, change.at,
      ...claimValues(change.idempotency), change.reference ?? null, ...more]
    return await this.#commits.run({
      petId: change.petId,
      statement: { name: sql === CHANGE_SQL ? 'stock_set_quantity' : 'stock_adjust_quantity', sql, values },
      outcome: async (answer) => await this.#outcome(answer as pg.QueryResult<ChangeRow>, change),
      alone: async () => await this.#alone(sql, values, change)
    })
  }

  /**
   * What the change statement's row says. Nothing applied with a key: because the key is recorded (the statement read
   * no entry), or recorded meanwhile by a transaction this one waited for (a retry on another instance, whose change
   * this one then saw as stale). It looks after the commit (of the statement alone, or of its batch), as before the
   * group commit: the same key twice in one batch applies once (the second statement sees the first's record and reads
   * no entry), and the second is `recorded`.
   */
  async #outcome (answer: pg.QueryResult<ChangeRow>, change: StockChange | StockAdjustment): Promise<StockAdjustmentResult> {
    const claim = change.idempotency
    const result = changeResult(answer.rows[0], change.expectedRevisions)
    if (result.status !== 'updated' && claim !== undefined && (await this.#db.query(KEY_LIVE_SQL, [claim.scope, claim.key, change.at])).rows.length > 0) {
      return { status: 'recorded' }
    }
    return result
  }

  /** The change on its own (autocommit); a key's record that another transaction committed meanwhile: `recorded`. */
  async #alone (sql: string, values: unknown[], change: StockChange | StockAdjustment): Promise<StockAdjustmentResult> {
    const claim = change.idempotency
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#outcome(await this.#db.query<ChangeRow>(sql, values), change)
      } catch (error) {
        if (claim === undefined || !isKeyTaken(error)) throw error
        // The key's row exists: recorded by a transaction that committed while this statement ran, or expired and
        // not purged yet, which is removed before the change is tried once more.
        const { rowCount } = await this.#db.query(DROP_EXPIRED_KEY_SQL, [claim.scope, claim.key, change.at])
        if ((rowCount ?? 0) === 0 || attempt === 3) return { status: 'recorded' }
      }
    }
  }

  /** What the group commit of setQuantity and adjustQuantity has done since the store opened. */
  get groupCommit (): GroupCommitStats {
    return this.#commits.stats
  }

  /**
   * A batch in one transaction: the key's record looked up, the entries locked in pet order (two batches over the
   * same pets never deadlock), every change checked, and only then all written, with the ledger rows and the key's
   * record. A same key committed meanwhile by another instance makes the record's insert fail and undoes it all.
   */
  async applyBatch (batch: StockBatch): Promise<StockBatchResult> {
    const claim = batch.idempotency
    try {
      return await this.#db.transaction(async (client): Promise<StockBatchResult> => {
        if (claim !== undefined) {
          const { rows: live } = await client.query(KEY_LIVE_SQL, [claim.scope, claim.key, batch.at])
          if (live.length > 0) return { status: 'recorded' }
          // Only an expired record: one committed since the look above is live, and this batch's insert must meet it.
          await client.query(DROP_EXPIRED_KEY_SQL, [claim.scope, claim.key, batch.at])
        }
        const ids = batch.changes.map((change) => change.petId)
        const { rows } = await client.query<EntryRow>(
          `SELECT ${ENTRY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id WHERE i.pet_id = ANY ($1::bigint[]) ORDER BY i.pet_id FOR UPDATE OF i`, [ids])
        const entries = new Map(rows.map((row) => [row.pet_id, toStockEntry(row)]))
        const { failures, planned } = planBatch(batch, (petId) => entries.get(petId))
        if (failures.length > 0) {
          // The locks waited for may have been another instance's write of this very key: then it is recorded now.
          // (Read committed: this statement sees what committed while the locks were awaited.)
          const held = claim === undefined
            ? []
            : (await client.query(KEY_LIVE_SQL, [claim.scope, claim.key, batch.at])).rows
          return held.length === 0 ? { status: 'refused', failures } : { status: 'recorded' }
        }
        await client.query(
          `UPDATE inventory i SET quantity = v.quantity, revision = i.revision + 1
           FROM unnest($1::bigint[], $2::integer[]) AS v (pet_id, quantity) WHERE i.pet_id = v.pet_id`,
          [planned.map((p) => p.change.petId), planned.map((p) => p.quantity)])
        // The ledger rows of the changes, each followed by the inventory.low_stock row of a crossing it makes (checked
        // in the same statement: no round trip more).
        await client.query(
          `WITH t AS (
             SELECT * FROM unnest($1::bigint[], $2::integer[], $3::integer[], $4::text[], $5::text[], $6::text[])
               WITH ORDINALITY AS t (pet_id, previous, quantity, reason, note, reference, n)
           ), ${lowStockCte('t')}
           INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, note, reference, key_id, request_id, batch_id, created_at, event, reorder_point)
           SELECT pet_id, previous, quantity, reason, note, reference, $7, $8, batch, $10, event, reorder_point FROM (
             SELECT n, 0 AS k, pet_id, previous, quantity, reason, note, reference, $9::text AS batch, NULL::text AS event, NULL::integer AS reorder_point FROM t
             UNION ALL
             SELECT t.n, 1, a.pet_id, NULL, a.quantity, NULL, NULL, NULL, NULL, ${LOW_STOCK_LITERAL}, a.reorder_point
             FROM alerted a JOIN t ON t.pet_id = a.pet_id WHERE a.low
           ) r ORDER BY n, k`,
          [planned.map((p) => p.change.petId), planned.map((p) => p.current.quantity), planned.map((p) => p.quantity),
            planned.map((p) => p.change.reason), planned.map((p) => p.change.note), planned.map((p) => p.change.reference ?? null),
            batch.keyId, batch.requestId, batch.batchId, batch.at])
        const applied = planned.map(({ current, quantity }) => ({ ...current, quantity, revision: current.revision + 1n }))
        if (claim !== undefined) {
          await client.query(`INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, created_at, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6)`, [claim.scope, claim.key, claim.fingerprint, entriesText(applied), batch.at, claim.expiresAt])
        }
        return { status: 'updated', entries: applied }
      })
    } catch (error) {
      if (claim !== undefined && isKeyTaken(error)) return { status: 'recorded' }
      throw error
    }
  }

  async getStockEntry (petId: bigint): Promise<StockEntry | null> {
    const { rows } = await this.#db.query<EntryRow>(
      `SELECT ${ENTRY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id WHERE i.pet_id = $1`, [petId])
    return rows[0] === undefined ? null : toStockEntry(rows[0])
  }

  /**
   * In commit order: the position each writing transaction took as it committed (migration 7), then the row id. Rows
   * of other types than `types` are skipped in the query (a stock change's type is inventory.changed: event null).
   */
  async listChanges (after: FeedPosition | null, limit: number, types: readonly ChangeType[] = [STOCK_CHANGED]): Promise<FeedChange[]> {
    const { rows } = await this.#db.query<LedgerRow & { position: bigint, epoch: string | null }>(
      `SELECT ${LEDGER_COLUMNS}, f.position, ${EPOCH_OF('f.position', 'l.id')} AS epoch FROM feed_positions f JOIN stock_ledger l ON l.txid = f.txid
       WHERE ($1::bigint IS NULL OR (f.position, l.id) > ($1::bigint, $2::bigint)) AND coalesce(l.event, '${STOCK_CHANGED}') = ANY ($4::text[])
       ORDER BY f.position, l.id LIMIT $3`, [after?.order ?? null, after?.id ?? null, limit, types])
    return rows.map((row) => ({ ...toLedgerEntry(row), position: { order: row.position, id: row.id }, epoch: row.epoch }))
  }

  /** The pet's stock changes only: its event rows (holds, low stock) are left out. */
  async stockHistory (petId: bigint, limit: number): Promise<StockChangeEntry[]> {
    const { rows } = await this.#db.query<LedgerRow>(
      `SELECT * FROM (SELECT ${LEDGER_COLUMNS} FROM stock_ledger l WHERE l.pet_id = $1 AND l.event IS NULL ORDER BY l.id DESC LIMIT $2) newest ORDER BY id`,
      [petId, limit])
    return rows.map(toStockChange)
  }

  async feedHead (): Promise<FeedPlace | null> {
    return await feedHead((text, values) => this.#db.query(text, values))
  }

  /** The epochs and the head from one statement (one snapshot). */
  async feedHistory (): Promise<FeedHistory> {
    const { rows } = await this.#db.query<EpochRow & { head_order: bigint | null, head_id: bigint | null }>(
      `SELECT ${EPOCH_COLUMNS}, h.position AS head_order, h.id AS head_id FROM store_epochs e LEFT JOIN (
         SELECT f.position, (SELECT max(l.id) FROM stock_ledger l WHERE l.txid = f.txid) AS id FROM feed_positions f ORDER BY f.position DESC LIMIT 1
       ) h ON true ORDER BY e.seq`)
    return { epochs: rows.map(toEpoch), head: headOf(rows[0]?.head_order, rows[0]?.head_id) }
  }
}
