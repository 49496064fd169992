import type { SchemaStatus } from './migrations.js'
import type { WebhookStore } from './webhook-types.js'
import type { ApiKeyRecord, Ban, KeyScope, InventoryItem, LedgerEntry, Order, OrderStatus, Pet, PetImport, PetStatus, StockEntry, StockReason } from '../domain/model.js'

export interface OrderPage {
  /** Orders with id > afterId, ascending; at most `limit` of them. */
  orders: Order[]
  /** True when more orders match after the last one returned. */
  hasMore: boolean
}

export interface NewApiKey {
  id: string
  keyHash: string
  name: string | null
  plan: ApiKeyRecord['plan']
  perMinute: number | null
  perDay: number | null
  createdAt: Date
  /** Default: write (full access). */
  scope?: KeyScope
  /** Default: null (never expires). */
  expiresAt?: Date | null
  /** The quota id of the key a rotation replaces (windows, strikes and bans shared); default: the key's own. */
  quotaId?: string
}

/** How a rotation ended: done, or refused because the key is unknown, revoked or expired, or already replaced. */
export type RotationOutcome = 'rotated' | 'not_found' | 'inactive' | 'replaced'

export interface ImportResult { pets: number, orders: number }

/** A pet as the store holds it when an import reaches it: its entry's quantity (null: none) and status (null: no pet). */
export interface ImportedCurrent { quantity: number | null, status: PetStatus | null }

/**
 * What an import changes in what the listing shows of one pet, as the ledger records it: the previous (null: the entry
 * is new) and new quantity, and the new and previous status where they are part of the change (else null).
 */
export interface ImportedStockChange {
  previous: number | null
  quantity: number
  status: PetStatus | null
  previousStatus: PetStatus | null
}

/**
 * What an imported pet changes, given what the store holds now: nothing, or the change the ledger records. The
 * domain's rule (importedStockChange); the stores only persist it.
 */
export type ImportedStockRule = (pet: PetImport, current: ImportedCurrent) => ImportedStockChange | null

export interface ImportOptions {
  /** Decides, inside the import's transaction, which stock each pet changes. */
  stockChange: ImportedStockRule
  /** Called as records are written (pets first, then orders): records written so far, and the total. */
  onProgress?: (written: number, total: number) => void
  /** The time recorded in the stock ledger for the quantities the import sets; now by default. */
  at?: Date
}

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
  keyId: string | null
  requestId: string | null
  at: Date
  /**
   * The idempotency key the change is sent with: the change applies only when no unexpired record of that key
   * exists (else `recorded`, nothing changed), and its record is written in the change's own transaction.
   */
  idempotency?: IdempotencyClaim
}

/** What a write sent with an idempotency key records with its change, in the same transaction. */
export interface IdempotencyClaim {
  /** Whose key it is: keys of different API keys never meet. */
  scope: string
  key: string
  /** The request's fingerprint, to tell a retry from another request reusing the key. */
  fingerprint: string
  /** When the record expires: from then on the key is free again. */
  expiresAt: Date
}

/** The record of a write applied with an idempotency key. */
export interface IdempotencyRecord {
  fingerprint: string
  /** The entries as the write left them: what a retry is answered. */
  entries: StockEntry[]
  createdAt: Date
  expiresAt: Date
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

/** What confirming a store's epoch found: the epoch now current, whether it began just now. */
export interface EpochConfirmation {
  epoch: StoreEpoch
  started: boolean
  /** What identifies the database and could not be read (PostgreSQL without the right): detection is weaker then. */
  unreadable: string[]
}

/** A ledger entry as the change feed serves it, with its place and the epoch it was made in (null: before epochs). */
export interface FeedChange extends LedgerEntry {
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

/** A connection pool's state, for metrics. */
export interface PoolStats {
  /** Connections open (idle or in use). */
  total: number
  idle: number
  /** Callers waiting for a connection. */
  waiting: number
  /** The pool's cap (DATABASE_POOL_SIZE). */
  max: number
}

/**
 * Everything the domain needs from persistence. Implementations: SQLite (embedded default) and PostgreSQL.
 * Methods throw StoreUnavailableError when the database cannot be reached; every write is atomic.
 */
export interface Store extends WebhookStore {
  /** A short name for logs and /readyz: "sqlite" or "postgres". */
  readonly kind: string
  /**
   * Validates the applied migrations against this release (checksums), records the checksums of rows written
   * before checksums, and applies pending migrations; returns how many were applied. Idempotent. Throws
   * SchemaError when a released migration was edited, or when the store is ahead of this release.
   */
  migrate (): Promise<number>
  /** Where the schema stands against this release, changing nothing; throws SchemaError for an edited migration. */
  schemaStatus (): Promise<SchemaStatus>
  /**
   * Starts a new epoch when the store's history may have forked since it was last confirmed, before anything else
   * writes to it: SQLite, a copy made by `petstore backup` or `petstore restore` (marked as such) opened as the store
   * for the first time; PostgreSQL, a database other than the one last confirmed (its cluster's system identifier,
   * its oid, the oid of the store's own table) or a new WAL timeline. Otherwise records what identifies the database,
   * where not known yet. With `restored` (the operator says the store was just restored by means nothing detects), a
   * new epoch begins in any case. Run by every process that writes (serve, migrate, the CLI's writes); idempotent
   * without `restored`, and safe for instances starting at once.
   */
  confirmEpoch (options?: { restored?: boolean }): Promise<EpochConfirmation>
  /** The store's epochs and the feed's head, from one snapshot: what a cursor is checked against. */
  feedHistory (): Promise<FeedHistory>
  /** Resolves when the database answers a trivial query. */
  ping (): Promise<void>
  close (): Promise<void>
  /** The connection pool's state; null for a store without a pool (SQLite: one connection in process). */
  poolStats (): PoolStats | null

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
  /** The record of an idempotency key, if one exists that has not expired at `at`. */
  findIdempotencyRecord (scope: string, key: string, at: Date): Promise<IdempotencyRecord | null>
  /** Deletes at most `limit` records that expired at `before` or earlier; returns how many it deleted. */
  purgeIdempotencyRecords (before: Date, limit: number): Promise<number>
  /** One stock entry with its revision; null when there is no entry for petId. */
  getStockEntry (petId: bigint): Promise<StockEntry | null>
  /**
   * The change feed: ledger entries after `after` (from the start when null), at most `limit`, in commit order (the
   * entries of one transaction in id order): no entry the feed has not served yet can ever come before one it has,
   * and each pet's changes come in the order they were made. Paging by the last position never skips or repeats one.
   */
  listChanges (after: FeedPosition | null, limit: number): Promise<FeedChange[]>
  /** The newest `limit` ledger entries of a pet, oldest first. */
  stockHistory (petId: bigint, limit: number): Promise<LedgerEntry[]>

  getPet (id: bigint): Promise<Pet | null>
  countPets (): Promise<number>

  listOrders (query: { afterId: bigint | null, limit: number, status: OrderStatus | null }): Promise<OrderPage>

  /**
   * Upserts all pets and orders in one transaction, and the stock `options.stockChange` says each pet changes:
   * each such change writes the entry and a ledger entry with reason `import`, and grows the entry's revision (a
   * changed pet status does too).
   */
  importData (data: { pets: PetImport[], orders: Order[] }, options: ImportOptions): Promise<ImportResult>

  createApiKey (key: NewApiKey): Promise<void>
  findApiKeyByHash (keyHash: string): Promise<ApiKeyRecord | null>
  listApiKeys (): Promise<ApiKeyRecord[]>
  /** Marks a key revoked; false when no key has this id. Revoking twice keeps the first time. */
  revokeApiKey (id: string, at: Date): Promise<boolean>
  /**
   * In one transaction: creates `replacement`, carrying over the ban the key `id` has then, and
   * ends the key `id` at `endsAt` (or at its own expiry, if sooner), recording which key replaced it. Refused, changing nothing, when no key has this id, when it is revoked or
   * expired at `replacement.createdAt`, or when it was already replaced.
   */
  rotateApiKey (id: string, replacement: NewApiKey & { quotaId: string }, endsAt: Date): Promise<RotationOutcome>
  /** Records a ban of a key and of every key sharing its quota; false when no key has this id. */
  banApiKey (id: string, ban: Ban): Promise<boolean>
  /** Ends the ban of a key and of every key sharing its quota at `at`, if in force then; false when no key has this id. */
  unbanApiKey (id: string, at: Date): Promise<boolean>
  /**
   * Moves a key's last-use time to `usedAt`, and its last deprecated use to `deprecatedAt` when given, never
   * backwards (instances record in any order).
   */
  recordKeyUse (id: string, usedAt: Date, deprecatedAt: Date | null): Promise<void>
}
