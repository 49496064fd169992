/**
 * Stock: the entries the listing shows, their writes, the ledger that records every change, and the change feed that
 * serves the ledger in commit order. Implemented by both stores; one contract suite (test/store/stock.contract.ts).
 */
import type { ChangeType, InventoryItem, LedgerEntry, StockChangeEntry, StockEntry, StockReason } from '../../model.js'
import type { IdempotencyClaim } from '../idempotency/types.js'

/** One stock change through the API: the new quantity and what the ledger records about it. */
export interface StockChange {
  petId: bigint
  quantity: number
  /**
   * Compare-and-set: the change applies only when the entry's current revision is one of these (If-Match);
   * null applies it unconditionally.
   */
  expectedRevisions: readonly bigint[] | null
  reason: StockReason
  note: string | null
  /** What the change was for (an order, an invoice, a count sheet); absent or null when none was sent. */
  reference?: string | null
  keyId: string | null
  requestId: string | null
  at: Date
  /**
   * The idempotency key the change is sent with: the change applies only when no unexpired record of that key
   * exists (else `recorded`, nothing changed), and its record is written in the change's own transaction.
   */
  idempotency?: IdempotencyClaim
}

/** One relative stock change through the API: add `delta` (negative to remove) to the entry's quantity. */
export type StockAdjustment = Omit<StockChange, 'quantity'> & {
  delta: number
  /** The quantities the result may have (the domain's rule); outside them nothing changes. */
  allowed: { min: number, max: number }
}

export type StockChangeResult =
  /**
   * `version`: the inventory version right after this change, and `feed`: the change's place in the feed, where the
   * store can tell (SQLite).
   */
  | { status: 'updated', entry: StockEntry, version?: bigint, feed?: FeedPlace }
  | { status: 'not_found' }
  /** The entry's revision is not one of expectedRevisions: nothing was changed. */
  | { status: 'stale', current: StockEntry }
  /** An unexpired record of the change's idempotency key exists: nothing was changed. */
  | { status: 'recorded' }

/** What an adjustment can also meet: a result outside the allowed quantities, so nothing was changed. */
export type StockAdjustmentResult = StockChangeResult | { status: 'out_of_range', current: StockEntry }

/** One change of a batch: an absolute quantity or a delta for one pet, optionally compare-and-set. */
export type BatchChange = ({ quantity: number } | { delta: number }) & {
  petId: bigint
  /** The revisions the entry may have for the change to apply; null: unconditional. */
  expectedRevisions: readonly bigint[] | null
  reason: StockReason
  note: string | null
  /** As for StockChange: absent or null when none was sent. */
  reference?: string | null
}

/** Changes applied together: all of them in one transaction, or none. No pet appears twice. */
export interface StockBatch {
  changes: readonly BatchChange[]
  /** The quantities a result may have (the domain's rule), for absolute and relative changes alike. */
  allowed: { min: number, max: number }
  /** Shared by the ledger rows of the batch. */
  batchId: string
  keyId: string | null
  requestId: string | null
  at: Date
  idempotency?: IdempotencyClaim
}

/** Why one change of a batch cannot apply. */
export interface BatchFailure {
  /** The change's position in the batch, from 0. */
  index: number
  petId: bigint
  reason: 'not_found' | 'stale' | 'out_of_range'
  /** The entry as it is (absent for not_found). */
  current?: StockEntry
}

export type StockBatchResult =
  /** Every change applied: the entries as they are now, in the batch's order (version and feed: as for one change). */
  | { status: 'updated', entries: StockEntry[], version?: bigint, feed?: FeedPlace }
  /** At least one change cannot apply: nothing was changed; every failing change is listed. */
  | { status: 'refused', failures: BatchFailure[] }
  /** An unexpired record of the batch's idempotency key exists: nothing was changed. */
  | { status: 'recorded' }

/**
 * A place in the change feed: after the change at (order, id). The order is the store's: 0 for SQLite (one writer at a
 * time commits ledger rows in id order), the writing transaction's commit position for PostgreSQL.
 */
export interface FeedPosition {
  order: bigint
  id: bigint
}

/**
 * A place in the feed as its cursors name it: the position, and the store epoch of the change there (null: a change
 * from before the store had epochs, whose cursor and event id keep the earlier forms).
 */
export interface FeedPlace extends FeedPosition {
  epoch: string | null
}

/**
 * A generation of the store's history. A store gets its first epoch when it is created (or, for a store that held
 * changes already, when it is upgraded to epochs), and a new one whenever its history may have forked: a restored
 * copy opened for the first time, a PostgreSQL database that is not the one the store was last confirmed on (a
 * restore into another database or cluster), a new WAL timeline (a promoted replica, point-in-time recovery). Each
 * epoch begins after a place of the feed; a change belongs to the last epoch that began before it. Event ids and
 * cursors carry the epoch, so a change made after a restore never takes the id or cursor of one the restore undid.
 * The schema area starts them (confirmEpoch, ../schema/types.ts).
 */
export interface StoreEpoch {
  /** 16 lowercase hexadecimal digits, random. */
  epoch: string
  /** The feed's place it begins after: every change after it (until the next epoch) is of this epoch. */
  after: FeedPosition
  startedAt: Date
  /** Why it began: created, upgraded, restored, new database, new timeline. */
  reason: string
}

/** What the store's history is now: its epochs, oldest first, and the feed's last change. */
export interface FeedHistory {
  epochs: StoreEpoch[]
  head: FeedPosition | null
}

/** A ledger entry as the change feed serves it, with its place and the epoch it was made in (null: before epochs). */
export type FeedChange = LedgerEntry & {
  position: FeedPosition
  epoch: string | null
}

/** A page of a consistent listing. */
export interface InventoryPage {
  /** The inventory version of the snapshot the page comes from: the same on every page of one listing. */
  version: bigint
  /**
   * The change feed's place this snapshot reflects: after its last change (every change up to it is in the snapshot,
   * none after it); null when the feed is empty. The same on every page of one listing.
   */
  feed: FeedPlace | null
  items: InventoryItem[]
}

export interface StockReads {
  listInventory (): Promise<InventoryItem[]>
  /**
   * A number that changes, in the same transaction, whenever what listInventory returns may change (a stock
   * entry written or removed, a pet's status changed).
   */
  inventoryVersion (): Promise<bigint>
  /**
   * The whole listing, ordered by petId, `size` entries a page, every page from one snapshot of the store (the
   * version it carries is the version of exactly these entries). Between pages other work may run.
   */
  inventoryPages (size: number): AsyncIterable<InventoryPage>
  /**
   * Whether another process has committed to the store since the last call: a check without a query (SQLite's
   * data_version). Absent where the store cannot tell cheaply (PostgreSQL).
   */
  changedElsewhere?(): boolean
  /** One stock entry with its revision; null when there is no entry for petId. */
  getStockEntry (petId: bigint): Promise<StockEntry | null>
  /** The newest `limit` stock changes of a pet, oldest first (its ledger's events are not among them). */
  stockHistory (petId: bigint, limit: number): Promise<StockChangeEntry[]>
  /**
   * The change feed: ledger entries after `after` (from the start when null), at most `limit`, in commit order (the
   * entries of one transaction in id order): no entry the feed has not served yet can ever come before one it has,
   * and each pet's changes come in the order they were made. Paging by the last position never skips or repeats one.
   * Only rows of `types` (stock changes alone when omitted: inventory.changed) are read, filtered in the query: a page
   * is full whenever that many of them follow, and the last one's position is where the next page starts.
   */
  listChanges (after: FeedPosition | null, limit: number, types?: readonly ChangeType[]): Promise<FeedChange[]>
  /** The feed's last change now, with its epoch (null: the feed is empty): where a new subscription's or stream's events begin. */
  feedHead (): Promise<FeedPlace | null>
  /** The store's epochs and the feed's head, from one snapshot: what a cursor is checked against. */
  feedHistory (): Promise<FeedHistory>
}

export interface StockWrites {
  /**
   * Sets the quantity of an existing entry and records the change in the stock ledger, in one transaction:
   * either both are durable or neither. The entry's revision grows by one.
   */
  setQuantity (change: StockChange): Promise<StockChangeResult>
  /**
   * Adds `delta` to the quantity of an existing entry and records the change in the stock ledger, atomically: the
   * quantity it adds to is the committed one at that moment, so concurrent adjustments never lose one another.
   * A result outside `allowed` changes nothing (out_of_range); a stale revision changes nothing (stale).
   */
  adjustQuantity (change: StockAdjustment): Promise<StockAdjustmentResult>
  /**
   * Applies every change of the batch and records each in the ledger with the batch id, in one transaction; when
   * any change cannot apply (no entry, stale revision, a result outside `allowed`), nothing is changed and every
   * failing change is reported. The quantities a relative change adds to are the committed ones.
   */
  applyBatch (batch: StockBatch): Promise<StockBatchResult>
}

export type StockStore = StockReads & StockWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const STOCK_WRITES = {
  setQuantity: 'refuse',
  adjustQuantity: 'refuse',
  applyBatch: 'refuse'
} as const satisfies Record<keyof StockWrites, 'refuse' | 'skip'>
