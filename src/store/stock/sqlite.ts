/** The stock area on SQLite: entries, their writes through the group commit, the ledger and the feed. */
import Database from 'better-sqlite3'
import { STOCK_CHANGED, type ChangeType, type InventoryItem, type StockChangeEntry, type StockEntry } from '../../model.js'
import { entriesText } from '../idempotency/rows.js'
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard, translate } from '../sqlite/errors.js'
import { EPOCH_OF } from '../rows.js'
import { feedHead, TransactionEpoch, VERSION_SQL } from '../sqlite/sql.js'
import { trackLowStock } from '../alerts/sqlite.js'
import { planBatch } from './batch.js'
import {
  EPOCH_COLUMNS, headOf, INVENTORY_COLUMNS, LEDGER_COLUMNS, toEpoch, toInventoryItem, toLedgerEntry, toStockChange, toStockEntry,
  type EntryRow, type EpochRow, type InventoryRow, type LedgerRow
} from './rows.js'
import type {
  BatchFailure, FeedChange, FeedHistory, FeedPlace, FeedPosition, InventoryPage, StockAdjustment, StockAdjustmentResult, StockBatch, StockBatchResult,
  StockChange, StockChangeResult, StockStore
} from './types.js'

/** An entry with the id of its newest ledger row: the head of the pet's ledger chain (migration 4). */
interface ChainedEntryRow extends EntryRow { ledger_head: bigint | null }

/**
 * One stock entry with its pet's status. The status is a scalar subquery rather than a join: through better-sqlite3
 * (SQLite 3.54) a two-table join costs about 6 µs more per execution than the same lookups as a subquery, the
 * largest single cost of a PATCH (the store's time per PATCH went from 23 to 15 µs). An entry whose pet row is
 * missing has no status and is not returned, as the join would not return it.
 */
const ENTRY_SQL = `SELECT i.pet_id, i.quantity, (SELECT status FROM pets WHERE id = i.pet_id) AS status, i.revision, i.ledger_head
  FROM inventory i WHERE i.pet_id = ? AND status IS NOT NULL`
/** Appends a ledger row linked to the pet's previous one (the entry's ledger_head, which the caller then moves). */
const LEDGER_INSERT_SQL = `INSERT INTO stock_ledger (pet_id, previous_id, previous_quantity, quantity, reason, note, reference, key_id, request_id,
  batch_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
/** The newest `limit` ledger rows of a pet, following its chain from the head; oldest first. */
const HISTORY_SQL = `
  WITH RECURSIVE chain (id, depth) AS (
    SELECT ledger_head, 1 FROM inventory WHERE pet_id = ? AND ledger_head IS NOT NULL
    UNION ALL
    SELECT l.previous_id, chain.depth + 1 FROM chain JOIN stock_ledger l ON l.id = chain.id
    WHERE chain.depth < ? AND l.previous_id IS NOT NULL
  )
  SELECT ${LEDGER_COLUMNS} FROM chain JOIN stock_ledger l ON l.id = chain.id ORDER BY l.id`
const LIST_SQL = `SELECT ${INVENTORY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id ORDER BY i.pet_id`

/** What a write applies: an absolute change (quantity), a relative one (delta), or a batch of them. */
type Write = StockChange | StockAdjustment | StockBatch

/** A batch of one as the answer to the single change it holds. */
function singleResult (result: StockBatchResult): StockAdjustmentResult {
  switch (result.status) {
    case 'updated':
      return {
        status: 'updated',
        entry: result.entries[0] as StockEntry,
        ...(result.version === undefined ? {} : { version: result.version }),
        ...(result.feed === undefined ? {} : { feed: result.feed })
      }
    case 'recorded':
      return result
    case 'refused': {
      const [failure] = result.failures as [BatchFailure]
      return failure.reason === 'not_found' ? { status: 'not_found' } : { status: failure.reason, current: failure.current as StockEntry }
    }
  }
}

/** Rows as pages of `size` items; an empty listing is one empty page. */
function * pagesOf (version: bigint, feed: FeedPlace | null, rows: Iterable<InventoryRow>, size: number): Generator<InventoryPage> {
  let page: InventoryItem[] = []
  let pages = 0
  for (const row of rows) {
    page.push(toInventoryItem(row))
    if (page.length === size) {
      pages++
      yield { version, feed, items: page }
      page = []
    }
  }
  if (page.length > 0 || pages === 0) yield { version, feed, items: page }
}

/** The statements of a write, prepared on first use. */
interface WriteStatements {
  read: Database.Statement
  update: Database.Statement
  record: Database.Statement
  readVersion: Database.Statement
  findKey: Database.Statement
  dropKey: Database.Statement
  recordKey: Database.Statement
}

export class SqliteStock implements StockStore {
  readonly #db: SqliteDatabase
  #dataVersion = 0
  #writeStatements: WriteStatements | undefined
  /** The epoch new changes are of, as read in a transaction of the group commit (its number): once per transaction. */
  readonly #epoch: TransactionEpoch

  constructor (db: SqliteDatabase) {
    this.#db = db
    this.#epoch = new TransactionEpoch(db)
  }

  async listInventory (): Promise<InventoryItem[]> {
    return guard(() => (this.#db.prepare(LIST_SQL).all() as InventoryRow[]).map(toInventoryItem))
  }

  async inventoryVersion (): Promise<bigint> {
    return guard(() => (this.#db.prepare(VERSION_SQL).get() as { v: bigint }).v)
  }

  /**
   * Pages of the listing from one read transaction on a read-only connection of its own: WAL gives it a snapshot
   * that writes on the main connection do not disturb, and it may stay open between pages while the server goes
   * on serving. (An in-memory database has no second connection: it is read in one go.)
   */
  async * inventoryPages (size: number): AsyncGenerator<InventoryPage> {
    const main = this.#db.connection
    const path = this.#db.path
    const db = path === ':memory:' ? main : guard(() => new Database(path, { readonly: true }))
    if (db !== main) db.defaultSafeIntegers(true)
    if (db === main) {
      const [version, feed, rows] = guard(() => db.transaction(() => [
        (db.prepare(VERSION_SQL).get() as { v: bigint }).v,
        feedHead((sql) => db.prepare(sql)),
        db.prepare(LIST_SQL).all() as InventoryRow[]
      ] as const)())
      yield * pagesOf(version, feed, rows, size)
      return
    }
    guard(() => db.exec('BEGIN'))
    try {
      const version = guard(() => (db.prepare(VERSION_SQL).get() as { v: bigint }).v)
      const feed = guard(() => feedHead((sql) => db.prepare(sql)))
      yield * pagesOf(version, feed, db.prepare(LIST_SQL).iterate() as IterableIterator<InventoryRow>, size)
    } catch (error) {
      throw translate(error)
    } finally {
      db.close()
    }
  }

  changedElsewhere (): boolean {
    const version = Number(this.#db.connection.pragma('data_version', { simple: true }))
    const changed = version !== this.#dataVersion
    this.#dataVersion = version
    return changed
  }

  async getStockEntry (petId: bigint): Promise<StockEntry | null> {
    return guard(() => {
      const row = this.#db.prepare(ENTRY_SQL).get(petId) as EntryRow | undefined
      return row === undefined ? null : toStockEntry(row)
    })
  }

  /** The pet's chain holds its stock changes only: event rows join no chain. */
  async stockHistory (petId: bigint, limit: number): Promise<StockChangeEntry[]> {
    return guard(() => (this.#db.prepare(HISTORY_SQL).all(petId, limit) as LedgerRow[]).map(toStockChange))
  }

  /**
   * One writer at a time: ledger rows commit in id order, so the id alone is the feed's order. Stock changes alone take
   * the primary key's range with `event IS NULL`; other types are matched against the list given.
   */
  async listChanges (after: FeedPosition | null, limit: number, types: readonly ChangeType[] = [STOCK_CHANGED]): Promise<FeedChange[]> {
    return guard(() => {
      const stockOnly = types.length === 1 && types[0] === STOCK_CHANGED
      const rows = (stockOnly
        ? this.#db.prepare(`SELECT ${LEDGER_COLUMNS}, ${EPOCH_OF('0', 'l.id')} AS epoch FROM stock_ledger l WHERE l.id > ? AND l.event IS NULL ORDER BY l.id LIMIT ?`)
          .all(after?.id ?? 0n, limit)
        : this.#db.prepare(`SELECT ${LEDGER_COLUMNS}, ${EPOCH_OF('0', 'l.id')} AS epoch FROM stock_ledger l
            WHERE l.id > ? AND coalesce(l.event, '${STOCK_CHANGED}') IN (SELECT value FROM json_each(?)) ORDER BY l.id LIMIT ?`)
          .all(after?.id ?? 0n, JSON.stringify(types), limit)) as Array<LedgerRow & { epoch: string | null }>
      return rows.map((row) => ({ ...toLedgerEntry(row), position: { order: 0n, id: row.id }, epoch: row.epoch }))
    })
  }

  async feedHead (): Promise<FeedPlace | null> {
    return guard(() => feedHead((sql) => this.#db.prepare(sql)))
  }

  async feedHistory (): Promise<FeedHistory> {
    return guard(() => this.#db.connection.transaction((): FeedHistory => {
      const epochs = (this.#db.prepare(`SELECT ${EPOCH_COLUMNS} FROM store_epochs e ORDER BY e.seq`).all() as EpochRow[]).map(toEpoch)
      const { id } = this.#db.prepare('SELECT max(id) AS id FROM stock_ledger').get() as { id: bigint | null }
      return { epochs, head: headOf(id === null ? null : 0n, id) }
    })())
  }

  /**
   * Joins the group commit (../sqlite/group-commit.ts): the update (read, compare, write, ledger row) runs inside the
   * commit's write transaction, and the caller is answered once that commit is durable.
   */
  setQuantity (change: StockChange): Promise<StockChangeResult> {
    return this.#db.writes.run(() => this.#write(change)) as Promise<StockChangeResult>
  }

  /** Joins the same group commit: the quantity it adds to is read inside the commit's write transaction. */
  adjustQuantity (change: StockAdjustment): Promise<StockAdjustmentResult> {
    return this.#db.writes.run(() => this.#write(change)) as Promise<StockAdjustmentResult>
  }

  /** Joins the same group commit: its changes apply together or not at all. */
  applyBatch (batch: StockBatch): Promise<StockBatchResult> {
    return this.#db.writes.run(() => this.#write(batch)) as Promise<StockBatchResult>
  }

  #statements (): WriteStatements {
    return this.#writeStatements ??= {
      read: this.#db.prepare(ENTRY_SQL),
      update: this.#db.prepare('UPDATE inventory SET quantity = ?, revision = revision + 1, ledger_head = ? WHERE pet_id = ?'),
      record: this.#db.prepare(LEDGER_INSERT_SQL),
      readVersion: this.#db.prepare(VERSION_SQL),
      findKey: this.#db.prepare('SELECT expires_at FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?'),
      dropKey: this.#db.prepare('DELETE FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?'),
      recordKey: this.#db.prepare(`INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, created_at, expires_at)
        VALUES (?, ?, ?, ?, ?, ?)`)
    }
  }

  /**
   * One write (read, compare, write, ledger rows, the idempotency key's record), run inside the group commit's
   * transaction. A single change is a batch of one without a batch id: the same checks, the same writes.
   */
  #write (change: Write): StockAdjustmentResult | StockBatchResult {
    if ('changes' in change) return this.#apply(change)
    const { petId, expectedRevisions, reason, note, reference } = change
    const one = 'delta' in change
      ? { petId, expectedRevisions, reason, note, reference, delta: change.delta }
      : { petId, expectedRevisions, reason, note, reference, quantity: change.quantity }
    const allowed = 'delta' in change ? change.allowed : { min: Number.NEGATIVE_INFINITY, max: Number.POSITIVE_INFINITY }
    return singleResult(this.#apply({ ...change, changes: [one], allowed, batchId: null }))
  }

  #apply (batch: StockBatch | (Omit<StockBatch, 'batchId'> & { batchId: null })): StockBatchResult {
    const { read, update, record, readVersion, findKey, dropKey, recordKey } = this.#statements()
    const claim = batch.idempotency
    if (claim !== undefined) {
      // Inside the write transaction: no other connection can record the key between this look and the insert.
      const held = findKey.get(claim.scope, claim.key) as { expires_at: string } | undefined
      if (held !== undefined && held.expires_at > batch.at.toISOString()) return { status: 'recorded' }
      if (held !== undefined) dropKey.run(claim.scope, claim.key)
    }
    const heads = new Map<bigint, bigint | null>()
    const { failures, planned } = planBatch(batch, (petId) => {
      const row = read.get(petId) as ChainedEntryRow | undefined
      if (row === undefined) return undefined
      heads.set(petId, row.ledger_head)
      return toStockEntry(row)
    })
    if (failures.length > 0) return { status: 'refused', failures }
    // No pet appears twice in a batch, so every change was checked against the entry it now writes.
    const at = batch.at.toISOString()
    let last = 0n
    const entries = planned.map(({ change, current, quantity }) => {
      const { lastInsertRowid } = record.run(change.petId, heads.get(change.petId) ?? null, current.quantity, quantity, change.reason, change.note,
        change.reference ?? null, batch.keyId, batch.requestId, batch.batchId, at)
      update.run(quantity, lastInsertRowid, change.petId)
      // A crossing of the pet's reorder point writes its event row after the change, in this transaction.
      last = trackLowStock(this.#db, change.petId, quantity, batch.at, batch.keyId, batch.requestId) ?? BigInt(lastInsertRowid)
      return { ...current, quantity, revision: current.revision + 1n }
    })
    const version = (readVersion.get() as { v: bigint }).v
    if (claim !== undefined) recordKey.run(claim.scope, claim.key, claim.fingerprint, entriesText(entries), at, claim.expiresAt.toISOString())
    // The place of the write's last change: with the version, what the listing moves to when it patches the write in.
    const epoch = this.#epoch.current()
    return { status: 'updated', entries, version, ...(epoch === undefined ? {} : { feed: { order: 0n, id: last, epoch } }) }
  }
}
