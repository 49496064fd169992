import Database from 'better-sqlite3'
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import type { ApiKeyRecord, Ban, InventoryItem, LedgerEntry, Order, OrderStatus, Pet, PetImport, PetStatus, StockEntry } from '../../domain/model.js'
import { StoreUnavailableError } from '../../errors.js'
import type {
  BatchFailure, EpochConfirmation, FeedChange, FeedHistory, FeedPlace, FeedPosition, IdempotencyRecord, ImportOptions, ImportResult, InventoryPage, NewApiKey, OrderPage, StockAdjustment, StockAdjustmentResult, StockBatch,
  RotationOutcome, StockBatchResult, StockChange, StockChangeResult, Store
} from '../types.js'
import { aheadError, appliedChecksum, appliedHistory, checksum, detectQueries, schemaStatus, type AppliedMigration, type SchemaStatus } from '../migrations.js'
import { planBatch } from '../batch.js'
import { applyMigration, BOOKKEEPING, PLAN } from './migrations.js'
import { requireSqliteSchema } from './schema.js'
import { SqliteWebhooks } from './webhooks.js'
import { activeContext, endSpan, linkTo, SpanKind, startSpan, tracingOn } from '../../tracing/spans.js'
import type { Context, Span } from '@opentelemetry/api'
import type {
  AttemptOutcome, ClaimedDelivery, ClaimRequest, EnqueueResult, FailureRun, NewWebhook, WebhookBacklog, WebhookDelivery, WebhookRecord, WebhookUpdate
} from '../webhook-types.js'
import {
  entriesText, EPOCH_COLUMNS, EPOCH_OF, headOf, newEpochId, IDEMPOTENCY_COLUMNS, INVENTORY_COLUMNS, KEY_COLUMNS, LEDGER_COLUMNS, ORDER_COLUMNS, PET_COLUMNS, petColumns, progressReporter,
  toEpoch, toIdempotencyRecord, toInventoryItem, toKey, toLedgerEntry, toOrder, toPet, toStockEntry,
  type EntryRow, type EpochRow, type IdempotencyRow, type InventoryRow, type KeyRow, type LedgerRow, type OrderRow, type PetRow
} from '../rows.js'

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
/** The inventory version (migration 3's triggers move it with every change to what the listing shows). */
const VERSION_SQL = 'SELECT v FROM inventory_version WHERE id = 1'
/** Appends a ledger row linked to the pet's previous one (the entry's ledger_head, which the caller then moves). */
const LEDGER_INSERT_SQL = `INSERT INTO stock_ledger (pet_id, previous_id, previous_quantity, quantity, reason, note, key_id, request_id, batch_id, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
/** An import's ledger row: the status where the import changed it, or created the entry. */
const IMPORT_LEDGER_SQL = `INSERT INTO stock_ledger (pet_id, previous_id, previous_quantity, quantity, reason, status, previous_status, created_at)
  VALUES (?, ?, ?, ?, 'import', ?, ?, ?)`
/** The newest `limit` ledger rows of a pet, following its chain from the head; oldest first. */
const HISTORY_SQL = `
  WITH RECURSIVE chain (id, depth) AS (
    SELECT ledger_head, 1 FROM inventory WHERE pet_id = ? AND ledger_head IS NOT NULL
    UNION ALL
    SELECT l.previous_id, chain.depth + 1 FROM chain JOIN stock_ledger l ON l.id = chain.id
    WHERE chain.depth < ? AND l.previous_id IS NOT NULL
  )
  SELECT ${LEDGER_COLUMNS} FROM chain JOIN stock_ledger l ON l.id = chain.id ORDER BY l.id`

/**
 * The keys sharing the quota of the key whose id is bound (twice): the quota's first key and those rotation made. Two
 * indexed lookups (the primary key, api_keys_quota), not a scan of every key.
 */
const SAME_QUOTA_AS = `id = (SELECT coalesce(quota_id, id) FROM api_keys WHERE id = ?)
  OR quota_id = (SELECT coalesce(quota_id, id) FROM api_keys WHERE id = ?)`

// SQLite conditions that mean "the database cannot serve right now", not "this request is wrong".
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|CANTOPEN|IOERR|FULL|READONLY|NOMEM|PROTOCOL)/

/** A locked, missing or failing database file as StoreUnavailableError; other errors as they are. */
function translate (error: unknown): unknown {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && UNAVAILABLE.test(code)
    ? new StoreUnavailableError(`SQLite is unavailable (${code})`, { cause: error })
    : error
}

/** Runs a statement, reporting a locked, missing or failing database file as StoreUnavailableError. */
function guard<T> (work: () => T): T {
  try {
    return work()
  } catch (error) {
    throw translate(error)
  }
}

/** guard for the webhook methods: their statements run synchronously inside the returned promise's executor. */
async function guardAsync<T> (work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    throw translate(error)
  }
}

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

/**
 * The feed's last change (ledger rows commit in id order: the largest id) and its epoch, read inside the caller's
 * transaction, on the connection whose statements `prepare` makes (the store's own cache, or a listing's second
 * connection).
 */
function feedHead (prepare: (sql: string) => Database.Statement): FeedPlace | null {
  const { id, epoch } = prepare(`SELECT h.id, ${EPOCH_OF('0', 'h.id')} AS epoch FROM (SELECT max(id) AS id FROM stock_ledger) h`)
    .get() as { id: bigint | null, epoch: string | null }
  return id === null ? null : { order: 0n, id, epoch }
}

/**
 * The mark of a copy of the store's file (PRAGMA user_version, which SQLite keeps for applications): set on every
 * copy made with onlineCopy (petstore backup, the copy petstore restore puts in place, the one kept before a
 * migration), never on the store itself. The first time such a copy is opened as the store, its history may fork
 * from the one the original went on with, so a new epoch begins and the mark is cleared. "COPY" in ASCII.
 */
export const COPY_MARK = 0x434f5059

function hasEpochs (db: Database.Database): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_epochs'").get() !== undefined
}

/**
 * Starts a new epoch in a marked copy opened as the store (or in any store, `always`), and clears the mark, in one
 * IMMEDIATE transaction (two processes opening the copy at once start one epoch); the epoch, or null when the file is
 * not a marked copy (or has no epochs yet: migrate() does it once it has).
 */
function startEpochOfCopy (db: Database.Database, always = false): EpochRow | null {
  const marked = (): boolean => always || Number(db.pragma('user_version', { simple: true })) === COPY_MARK
  if (!marked() || !hasEpochs(db)) return null
  return db.transaction((): EpochRow | null => {
    if (!marked()) return null
    const { seq, head } = db.prepare('SELECT (SELECT max(seq) FROM store_epochs) AS seq, (SELECT max(id) FROM stock_ledger) AS head').get() as { seq: bigint, head: bigint | null }
    const row: EpochRow = { epoch: newEpochId(), after_order: 0n, after_id: head ?? 0n, started_at: new Date().toISOString(), reason: 'restored' }
    db.prepare('INSERT INTO store_epochs (seq, epoch, after_order, after_id, started_at, reason) VALUES (?, ?, ?, ?, ?, ?)')
      .run(seq + 1n, row.epoch, row.after_order, row.after_id, row.started_at, row.reason)
    db.pragma('user_version = 0')
    return row
  }).immediate()
}

/** The rows of schema_migrations (checksums null where not recorded); none when the table does not exist. */
export function appliedMigrations (db: Database.Database): AppliedMigration[] {
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get() === undefined) return []
  const hasChecksum = db.prepare("SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'").get() !== undefined
  const rows = db.prepare(`SELECT version, name, ${hasChecksum ? 'checksum' : 'NULL AS checksum'} FROM schema_migrations ORDER BY version`)
    .all() as Array<{ version: bigint | number, name: string, checksum: string | null }>
  return rows.map((row) => ({ version: Number(row.version), name: row.name, checksum: row.checksum }))
}

/**
 * Where the schema of the SQLite database on `db` stands against this release; throws SchemaError when an applied
 * migration was edited, or when the file's schema objects are not those its migrations make ('altered'; a store
 * ahead of this release is not compared: its later migrations are unknown here, and it is served read-only). Also
 * for files that are not the store (a backup being checked). It reads the schema and schema_migrations only.
 */
export function sqliteSchemaStatus (db: Database.Database, applied: AppliedMigration[] = appliedMigrations(db)): SchemaStatus {
  const detected = new Map(detectQueries(PLAN).map((query) => [query, Number(db.prepare(query).pluck().get()) === 1]))
  const status = schemaStatus(applied, PLAN, detected)
  if (status.ahead.length === 0) requireSqliteSchema(db, appliedHistory(applied, PLAN, detected), status.version)
  return status
}

/** Pages per step of an online backup: all of them. */
const WHOLE_FILE = 0x7fffffff

/**
 * Copies the database on `db` to a new file at `path` with SQLite's online backup API, in one step. A step reads one
 * snapshot, so the copy is consistent while other connections go on writing (WAL: they do not wait for it). In
 * steps of better-sqlite3's default 100 pages, a write by another connection between two steps restarts the copy from
 * its first page, and under steady writes it may never finish.
 */
export async function onlineCopy (db: Database.Database, path: string): Promise<void> {
  await db.backup(path, { progress: () => WHOLE_FILE })
  // Marked as a copy (COPY_MARK): whoever opens it as the store first starts a new epoch in it.
  const copy = new Database(path, { fileMustExist: true })
  try {
    copy.pragma(`user_version = ${COPY_MARK}`)
  } finally {
    copy.close()
  }
}

/** What the group commit applies: an absolute change (quantity), a relative one (delta), or a batch of them. */
type Write = StockChange | StockAdjustment | StockBatch
type WriteResult = StockAdjustmentResult | StockBatchResult

interface PendingUpdate {
  change: Write
  resolve: (result: WriteResult) => void
  reject: (error: unknown) => void
  /** Where the update was asked for, when the process traces: the commit's span links to it. */
  context: Context | undefined
}

/**
 * The span of a group commit (a traced process only): the transaction's statements, under the store call that asked
 * first (the commit runs from its setImmediate) and linked to the others it serves.
 */
function commitSpan (batch: readonly PendingUpdate[]): Span | null {
  const links = batch.slice(1).map((item) => linkTo(item.context)).filter((link) => link !== null)
  return startSpan('sqlite commit', SpanKind.CLIENT, { 'db.system.name': 'sqlite', 'petstore.sqlite.writes': batch.length }, links)
}

/**
 * The embedded store: one SQLite file through better-sqlite3, in WAL mode with synchronous=FULL so that an
 * acknowledged write survives a crash or power loss. All integers are read as bigint (safeIntegers) so int64
 * ids stay exact.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite'
  readonly #db: Database.Database
  readonly #path: string
  #dataVersion = 0
  readonly #statements = new Map<string, Database.Statement>()
  /** Stock updates waiting for the next group commit. */
  #pending: PendingUpdate[] = []
  readonly #webhooks: SqliteWebhooks
  /** The epoch this process started in a marked copy, until confirmEpoch() reports it. */
  #started: EpochRow | null = null

  constructor (path: string, options: { busyTimeoutMs?: number } = {}) {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
    this.#path = path
    this.#db = new Database(path)
    this.#db.defaultSafeIntegers(true)
    // Small pages for a new database: a group commit of stock updates writes every page it touched to the WAL,
    // and inventory rows are a few bytes; 1 KiB pages cut that copying and PATCH cost
    // (docs/adr/0003-embedded-sqlite-by-default-postgresql-to-scale-out.md). A no-op
    // on an existing database.
    this.#db.pragma('page_size = 1024')
    this.#db.pragma('journal_mode = WAL')
    this.#db.pragma('synchronous = FULL')
    this.#db.pragma('foreign_keys = ON')
    // The CLI may write while a server runs: wait for the lock instead of failing at once.
    this.#db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`)
    this.#webhooks = new SqliteWebhooks(this.#db, (sql) => this.#prepare(sql), () => feedHead((sql) => this.#prepare(sql)))
    // A copy opened as the store: a new epoch before anything can write to it, whichever command opens it first.
    if (path !== ':memory:') this.#started = guard(() => startEpochOfCopy(this.#db))
  }

  /** Prepared statements are compiled once per connection and reused. */
  #prepare (sql: string): Database.Statement {
    let statement = this.#statements.get(sql)
    if (statement === undefined) {
      statement = this.#db.prepare(sql)
      this.#statements.set(sql, statement)
    }
    return statement
  }

  /** The durability settings in force on the connection (for tests and diagnostics). */
  durability (): { journalMode: string, synchronous: 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA' } {
    const journalMode = String(this.#db.pragma('journal_mode', { simple: true }))
    const level = Number(this.#db.pragma('synchronous', { simple: true }))
    return { journalMode, synchronous: (['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const)[level] ?? 'OFF' }
  }

  async schemaStatus (): Promise<SchemaStatus> {
    return guard(() => sqliteSchemaStatus(this.#db))
  }

  /**
   * Validates the applied migrations, records the checksums of rows from before checksums, and applies what is
   * pending, all in one IMMEDIATE transaction (it takes the write lock first, so two processes migrating at once
   * apply each version once). A store ahead of this release, or with an edited migration, is left as it is.
   */
  async migrate (): Promise<number> {
    const db = this.#db
    const apply = db.transaction(() => {
      db.exec(BOOKKEEPING.create)
      if (db.prepare("SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'").get() === undefined) {
        db.exec(BOOKKEEPING.addChecksum)
      }
      const applied = appliedMigrations(db)
      const status = sqliteSchemaStatus(db, applied)
      if (status.ahead.length > 0) throw aheadError(status)
      const detected = new Map(detectQueries(PLAN).map((query) => [query, Number(db.prepare(query).pluck().get()) === 1]))
      const record = db.prepare('UPDATE schema_migrations SET checksum = ? WHERE version = ?')
      for (const row of applied) {
        if (row.checksum === null) record.run(appliedChecksum(row, PLAN, detected), row.version)
      }
      const insert = db.prepare('INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES (?, ?, ?, ?)')
      for (const migration of status.pending) {
        applyMigration(db, migration)
        insert.run(migration.version, migration.name, new Date().toISOString(), checksum(migration))
      }
      return status.pending.length
    })
    const applied = guard(() => apply.immediate())
    // A copy of a store from before epochs gets its new epoch once the migrations have made the table.
    this.#started ??= guard(() => startEpochOfCopy(this.#db))
    return applied
  }

  async confirmEpoch ({ restored = false }: { restored?: boolean } = {}): Promise<EpochConfirmation> {
    return guard(() => {
      this.#started ??= startEpochOfCopy(this.#db, restored)
      const started = this.#started
      this.#started = null
      const current = this.#prepare(`SELECT ${EPOCH_COLUMNS} FROM store_epochs e ORDER BY e.seq DESC LIMIT 1`).get() as EpochRow
      return { epoch: toEpoch(current), started: started !== null && started.epoch === current.epoch, unreadable: [] }
    })
  }

  async feedHistory (): Promise<FeedHistory> {
    return guard(() => this.#db.transaction((): FeedHistory => {
      const epochs = (this.#prepare(`SELECT ${EPOCH_COLUMNS} FROM store_epochs e ORDER BY e.seq`).all() as EpochRow[]).map(toEpoch)
      const { id } = this.#prepare('SELECT max(id) AS id FROM stock_ledger').get() as { id: bigint | null }
      return { epochs, head: headOf(id === null ? null : 0n, id) }
    })())
  }

  /** Copies the database to `path` with SQLite's online backup (a consistent copy while others may write). */
  async backup (path: string): Promise<void> {
    await onlineCopy(this.#db, path)
  }

  async ping (): Promise<void> {
    return guard(() => {
      this.#prepare('SELECT 1').get()
    })
  }

  async close (): Promise<void> {
    if (this.#db.open) this.#db.close()
  }

  poolStats (): null {
    return null
  }

  async listInventory (): Promise<InventoryItem[]> {
    return guard(() => {
      const rows = this.#prepare(
        `SELECT ${INVENTORY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id ORDER BY i.pet_id`
      ).all() as InventoryRow[]
      return rows.map(toInventoryItem)
    })
  }

  async inventoryVersion (): Promise<bigint> {
    return guard(() => (this.#prepare(VERSION_SQL).get() as { v: bigint }).v)
  }

  /**
   * Pages of the listing from one read transaction on a read-only connection of its own: WAL gives it a snapshot
   * that writes on the main connection do not disturb, and it may stay open between pages while the server goes
   * on serving. (An in-memory database has no second connection: it is read in one go.)
   */
  async * inventoryPages (size: number): AsyncGenerator<InventoryPage> {
    const db = this.#path === ':memory:' ? this.#db : guard(() => new Database(this.#path, { readonly: true }))
    if (db !== this.#db) db.defaultSafeIntegers(true)
    const list = `SELECT ${INVENTORY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id ORDER BY i.pet_id`
    if (db === this.#db) {
      const [version, feed, rows] = guard(() => db.transaction(() => [
        (db.prepare(VERSION_SQL).get() as { v: bigint }).v,
        feedHead((sql) => db.prepare(sql)),
        db.prepare(list).all() as InventoryRow[]
      ] as const)())
      yield * pagesOf(version, feed, rows, size)
      return
    }
    guard(() => db.exec('BEGIN'))
    try {
      const version = guard(() => (db.prepare(VERSION_SQL).get() as { v: bigint }).v)
      const feed = guard(() => feedHead((sql) => db.prepare(sql)))
      yield * pagesOf(version, feed, db.prepare(list).iterate() as IterableIterator<InventoryRow>, size)
    } catch (error) {
      throw translate(error)
    } finally {
      db.close()
    }
  }

  changedElsewhere (): boolean {
    const version = Number(this.#db.pragma('data_version', { simple: true }))
    const changed = version !== this.#dataVersion
    this.#dataVersion = version
    return changed
  }

  /**
   * Group commit: updates that arrive while the event loop is busy are applied together in one transaction,
   * so they share one fsync (synchronous=FULL); each caller is answered only after that commit. Each update
   * (read, compare, write, ledger row) runs in its own savepoint, so one failing update does not fail the others.
   */
  setQuantity (change: StockChange): Promise<StockChangeResult> {
    return this.#enqueue(change) as Promise<StockChangeResult>
  }

  /** Joins the same group commit: the quantity it adds to is read inside the commit's write transaction. */
  adjustQuantity (change: StockAdjustment): Promise<StockAdjustmentResult> {
    return this.#enqueue(change) as Promise<StockAdjustmentResult>
  }

  /** Joins the same group commit, in a savepoint of its own: its changes apply together or not at all. */
  applyBatch (batch: StockBatch): Promise<StockBatchResult> {
    return this.#enqueue(batch) as Promise<StockBatchResult>
  }

  #enqueue (change: Write): Promise<WriteResult> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ change, resolve, reject, context: activeContext() })
      if (this.#pending.length === 1) setImmediate(() => this.#commitPending())
    })
  }

  /**
   * Commits the updates that are waiting. It runs from setImmediate, where an exception would end the process:
   * whatever fails here (a schema that does not match this code, SQLITE_IOERR, a full disk, a constraint) fails
   * the requests of this commit, and only them, and the server keeps serving.
   */
  #commitPending (): void {
    const batch = this.#pending
    this.#pending = []
    const span = tracingOn() ? commitSpan(batch) : null
    let outcomes: Array<{ result: WriteResult } | { error: unknown }>
    try {
      outcomes = this.#applyBatch(batch)
    } catch (error) {
      if (span !== null) endSpan(span, translate(error))
      for (const item of batch) item.reject(translate(error))
      return
    }
    if (span !== null) endSpan(span)
    outcomes.forEach((outcome, i) => {
      const item = batch[i] as PendingUpdate
      if ('error' in outcome) item.reject(translate(outcome.error))
      else item.resolve(outcome.result)
    })
  }

  /**
   * One transaction for the batch. It first runs every update straight through: updates almost never fail one by
   * one (the input is validated, and a full disk fails the commit, not a statement), and a savepoint per update
   * costs a tenth of the write. If any update throws, the whole transaction has been rolled back and the batch runs
   * again with each update in its own savepoint, so that one failing update fails only its own request.
   */
  #applyBatch (batch: PendingUpdate[]): Array<{ result: WriteResult } | { error: unknown }> {
    const apply = this.#updateStatements()
    try {
      return this.#db.transaction(() => batch.map((item) => ({ result: apply(item.change) }))).immediate()
    } catch (error) {
      if (batch.length === 1) return [{ error }]
    }
    const one = this.#db.transaction(apply)
    return this.#db.transaction(() => batch.map((item) => {
      try {
        return { result: one(item.change) }
      } catch (error) {
        return { error }
      }
    })).immediate()
  }

  /**
   * One write (read, compare, write, ledger rows, the idempotency key's record), to be run inside a transaction. A
   * single change is a batch of one without a batch id: the same checks, the same writes.
   */
  #updateStatements (): (change: Write) => WriteResult {
    const read = this.#prepare(ENTRY_SQL)
    const update = this.#prepare('UPDATE inventory SET quantity = ?, revision = revision + 1, ledger_head = ? WHERE pet_id = ?')
    const record = this.#prepare(LEDGER_INSERT_SQL)
    const readVersion = this.#prepare(VERSION_SQL)
    const findKey = this.#prepare('SELECT expires_at FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?')
    const dropKey = this.#prepare('DELETE FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?')
    const recordKey = this.#prepare(`INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, entries, created_at, expires_at)
      VALUES (?, ?, ?, ?, ?, ?)`)
    // New changes are of the epoch now current: read once per commit, inside its transaction (under the write lock
    // already held, a read of a page in the cache).
    let epoch: string | undefined | null = null
    const apply = (batch: StockBatch | (Omit<StockBatch, 'batchId'> & { batchId: null })): StockBatchResult => {
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
          batch.keyId, batch.requestId, batch.batchId, at)
        update.run(quantity, lastInsertRowid, change.petId)
        last = BigInt(lastInsertRowid)
        return { ...current, quantity, revision: current.revision + 1n }
      })
      const version = (readVersion.get() as { v: bigint }).v
      if (claim !== undefined) recordKey.run(claim.scope, claim.key, claim.fingerprint, entriesText(entries), at, claim.expiresAt.toISOString())
      // The place of the write's last change: with the version, what the listing moves to when it patches the write in.
      if (epoch === null) epoch = this.#currentEpoch()
      return { status: 'updated', entries, version, ...(epoch === undefined ? {} : { feed: { order: 0n, id: last, epoch } }) }
    }
    return (change) => {
      if ('changes' in change) return apply(change)
      const { petId, expectedRevisions, reason, note } = change
      const one = 'delta' in change
        ? { petId, expectedRevisions, reason, note, delta: change.delta }
        : { petId, expectedRevisions, reason, note, quantity: change.quantity }
      const allowed = 'delta' in change ? change.allowed : { min: Number.NEGATIVE_INFINITY, max: Number.POSITIVE_INFINITY }
      const result = apply({ ...change, changes: [one], allowed, batchId: null })
      return singleResult(result)
    }
  }

  /** The epoch now current; undefined on a store from before epochs (not migrated yet). */
  #currentEpoch (): string | undefined {
    try {
      return this.#prepare('SELECT epoch FROM store_epochs ORDER BY seq DESC LIMIT 1').pluck().get() as string | undefined
    } catch {
      return undefined
    }
  }

  async findIdempotencyRecord (scope: string, key: string, at: Date): Promise<IdempotencyRecord | null> {
    return guard(() => {
      const row = this.#prepare(`SELECT ${IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE scope = ? AND idempotency_key = ? AND expires_at > ?`)
        .get(scope, key, at.toISOString()) as IdempotencyRow | undefined
      return row === undefined ? null : toIdempotencyRecord(row)
    })
  }

  async purgeIdempotencyRecords (before: Date, limit: number): Promise<number> {
    return guard(() => this.#prepare(`DELETE FROM idempotency_keys WHERE rowid IN
      (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`).run(before.toISOString(), limit).changes)
  }

  async getStockEntry (petId: bigint): Promise<StockEntry | null> {
    return guard(() => {
      const row = this.#prepare(ENTRY_SQL).get(petId) as EntryRow | undefined
      return row === undefined ? null : toStockEntry(row)
    })
  }

  /** One writer at a time: ledger rows commit in id order, so the id alone is the feed's order. */
  async listChanges (after: FeedPosition | null, limit: number): Promise<FeedChange[]> {
    return guard(() => {
      const rows = this.#prepare(`SELECT ${LEDGER_COLUMNS}, ${EPOCH_OF('0', 'l.id')} AS epoch FROM stock_ledger l WHERE l.id > ? ORDER BY l.id LIMIT ?`)
        .all(after?.id ?? 0n, limit) as Array<LedgerRow & { epoch: string | null }>
      return rows.map((row) => ({ ...toLedgerEntry(row), position: { order: 0n, id: row.id }, epoch: row.epoch }))
    })
  }

  async stockHistory (petId: bigint, limit: number): Promise<LedgerEntry[]> {
    return guard(() => {
      const rows = this.#prepare(HISTORY_SQL).all(petId, limit) as LedgerRow[]
      return rows.map(toLedgerEntry)
    })
  }

  async getPet (id: bigint): Promise<Pet | null> {
    return guard(() => {
      const row = this.#prepare(
        `SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`
      ).get(id) as PetRow | undefined
      return row === undefined ? null : toPet(row)
    })
  }

  async countPets (): Promise<number> {
    return guard(() => {
      const row = this.#prepare('SELECT count(*) AS n FROM pets').get() as { n: bigint }
      return Number(row.n)
    })
  }

  async listOrders ({ afterId, limit, status }: { afterId: bigint | null, limit: number, status: OrderStatus | null }): Promise<OrderPage> {
    return guard(() => {
      const rows = this.#prepare(
        `SELECT ${ORDER_COLUMNS} FROM orders
         WHERE (? IS NULL OR id > ?) AND (? IS NULL OR status = ?)
         ORDER BY id LIMIT ?`
      ).all(afterId, afterId, status, status, limit + 1) as OrderRow[]
      const hasMore = rows.length > limit
      return { orders: rows.slice(0, limit).map(toOrder), hasMore }
    })
  }

  async importData ({ pets, orders }: { pets: PetImport[], orders: Order[] }, options: ImportOptions): Promise<ImportResult> {
    return guard(() => {
      const db = this.#db
      const upsertPet = db.prepare(
        `INSERT INTO pets (id, name, status, category_id, category_name, photo_urls, tags) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, status = excluded.status, category_id = excluded.category_id,
           category_name = excluded.category_name, photo_urls = excluded.photo_urls, tags = excluded.tags`
      )
      // The pet as it is before the record replaces it: its status and its entry (a left join: a pet may have none).
      const readCurrent = db.prepare(
        'SELECT p.status, i.quantity, i.ledger_head FROM pets p LEFT JOIN inventory i ON i.pet_id = p.id WHERE p.id = ?')
      // One change grows the revision once: a changed status has grown it already (the pets trigger), so the entry's own
      // write grows it (the last parameter, 1 or 0) only when the status stayed.
      const upsertStock = db.prepare(
        `INSERT INTO inventory (pet_id, quantity, ledger_head) VALUES (?, ?, ?)
         ON CONFLICT (pet_id) DO UPDATE SET quantity = excluded.quantity, revision = revision + ?, ledger_head = excluded.ledger_head`
      )
      const record = db.prepare(IMPORT_LEDGER_SQL)
      const at = (options.at ?? new Date()).toISOString()
      const upsertOrder = db.prepare(
        `INSERT INTO orders (id, pet_id, quantity, ship_date, status, complete) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET pet_id = excluded.pet_id, quantity = excluded.quantity,
           ship_date = excluded.ship_date, status = excluded.status, complete = excluded.complete`
      )
      const total = pets.length + orders.length
      const report = progressReporter(total, options.onProgress)
      db.transaction(() => {
        for (const pet of pets) {
          const before = readCurrent.get(pet.id) as { status: PetStatus, quantity: bigint | null, ledger_head: bigint | null } | undefined
          upsertPet.run(pet.id, ...petColumns(pet))
          const change = options.stockChange(pet, {
            quantity: before === undefined || before.quantity === null ? null : Number(before.quantity),
            status: before?.status ?? null
          })
          if (change !== null) {
            const { lastInsertRowid } = record.run(pet.id, before?.ledger_head ?? null, change.previous, change.quantity, change.status,
              change.previousStatus, at)
            upsertStock.run(pet.id, change.quantity, lastInsertRowid, change.previousStatus === null ? 1 : 0)
          }
          report(1)
        }
        for (const order of orders) {
          upsertOrder.run(order.id, order.petId, order.quantity, order.shipDate, order.status, order.complete ? 1 : 0)
          report(1)
        }
      }).immediate()
      return { pets: pets.length, orders: orders.length }
    })
  }

  async createApiKey (key: NewApiKey): Promise<void> {
    return guard(() => {
      this.#insertKey(key)
    })
  }

  #insertKey (key: NewApiKey): void {
    this.#prepare(
      `INSERT INTO api_keys (id, key_hash, name, plan, per_minute, per_day, created_at, scope, expires_at, quota_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
    ).run(key.id, key.keyHash, key.name, key.plan, key.perMinute, key.perDay, key.createdAt.toISOString(), key.scope ?? 'write',
      key.expiresAt?.toISOString() ?? null, key.quotaId === undefined || key.quotaId === key.id ? null : key.quotaId)
  }

  async rotateApiKey (id: string, replacement: NewApiKey & { quotaId: string }, endsAt: Date): Promise<RotationOutcome> {
    const at = replacement.createdAt.toISOString()
    const rotate = this.#db.transaction((): RotationOutcome => {
      const old = this.#prepare('SELECT revoked_at, expires_at, replaced_by FROM api_keys WHERE id = ?').get(id) as
        { revoked_at: string | null, expires_at: string | null, replaced_by: string | null } | undefined
      if (old === undefined) return 'not_found'
      if (old.replaced_by !== null) return 'replaced'
      if (old.revoked_at !== null || (old.expires_at !== null && old.expires_at <= at)) return 'inactive'
      this.#insertKey(replacement)
      // The ban as it stands now, inside the write lock (one recorded since the caller read the key is not lost).
      this.#prepare(`UPDATE api_keys SET (banned_at, banned_until, ban_seconds) =
        (SELECT banned_at, banned_until, ban_seconds FROM api_keys WHERE id = ?) WHERE id = ?`).run(id, replacement.id)
      // ISO-8601 UTC strings of one format compare in time order: the sooner of the two ends.
      this.#prepare('UPDATE api_keys SET expires_at = min(coalesce(expires_at, ?), ?), replaced_by = ? WHERE id = ?')
        .run(endsAt.toISOString(), endsAt.toISOString(), replacement.id, id)
      return 'rotated'
    })
    return guard(() => rotate.immediate())
  }

  async recordKeyUse (id: string, usedAt: Date, deprecatedAt: Date | null): Promise<void> {
    guard(() => this.#prepare(`UPDATE api_keys SET last_used_at = max(coalesce(last_used_at, ''), ?),
      last_deprecated_use_at = CASE WHEN ? IS NULL THEN last_deprecated_use_at ELSE max(coalesce(last_deprecated_use_at, ''), ?) END WHERE id = ?`)
      .run(usedAt.toISOString(), deprecatedAt?.toISOString() ?? null, deprecatedAt?.toISOString() ?? null, id))
  }

  async findApiKeyByHash (keyHash: string): Promise<ApiKeyRecord | null> {
    return guard(() => {
      const row = this.#prepare(
        `SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = ?`
      ).get(keyHash) as KeyRow | undefined
      return row === undefined ? null : toKey(row)
    })
  }

  async listApiKeys (): Promise<ApiKeyRecord[]> {
    return guard(() => {
      const rows = this.#prepare(
        `SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`
      ).all() as KeyRow[]
      return rows.map(toKey)
    })
  }

  async revokeApiKey (id: string, at: Date): Promise<boolean> {
    return guard(() => {
      const result = this.#prepare(
        'UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?'
      ).run(at.toISOString(), id)
      return result.changes > 0
    })
  }

  async banApiKey (id: string, ban: Ban): Promise<boolean> {
    return guard(() => {
      const result = this.#prepare(
        `UPDATE api_keys SET banned_at = ?, banned_until = ?, ban_seconds = ? WHERE ${SAME_QUOTA_AS}`
      ).run(ban.since.toISOString(), ban.until.toISOString(), ban.seconds, id, id)
      return result.changes > 0
    })
  }

  async unbanApiKey (id: string, at: Date): Promise<boolean> {
    return guard(() => {
      const found = this.#prepare('SELECT 1 FROM api_keys WHERE id = ?').get(id) !== undefined
      // ISO-8601 UTC strings of one format compare in time order.
      this.#prepare(`UPDATE api_keys SET banned_until = ? WHERE banned_until > ? AND (${SAME_QUOTA_AS})`)
        .run(at.toISOString(), at.toISOString(), id, id)
      return found
    })
  }

  // Webhooks and change streams (./webhooks.ts), each a transaction of its own.
  async feedHead (): Promise<FeedPlace | null> { return await guardAsync(() => this.#webhooks.feedHead()) }
  async createWebhook (webhook: NewWebhook, maxPerQuota: number): Promise<WebhookRecord | 'limit'> { return await guardAsync(() => this.#webhooks.createWebhook(webhook, maxPerQuota)) }
  async listWebhooks (quotaId: string | null): Promise<WebhookRecord[]> { return await guardAsync(() => this.#webhooks.listWebhooks(quotaId)) }
  async getWebhook (id: string): Promise<WebhookRecord | null> { return await guardAsync(() => this.#webhooks.getWebhook(id)) }
  async updateWebhook (id: string, update: WebhookUpdate, at: Date): Promise<WebhookRecord | null> { return await guardAsync(() => this.#webhooks.updateWebhook(id, update, at)) }
  async deleteWebhook (id: string): Promise<boolean> { return await guardAsync(() => this.#webhooks.deleteWebhook(id)) }
  async rotateWebhookSecret (id: string, secret: string, previousUntil: Date, at: Date): Promise<WebhookRecord | null> {
    return await guardAsync(() => this.#webhooks.rotateWebhookSecret(id, secret, previousUntil, at))
  }
  async enqueueWebhookDeliveries (at: Date, giveUpAt: Date, limit: number): Promise<EnqueueResult> { return await guardAsync(() => this.#webhooks.enqueueWebhookDeliveries(at, giveUpAt, limit)) }
  async claimWebhookDeliveries (request: ClaimRequest): Promise<ClaimedDelivery[]> { return await guardAsync(() => this.#webhooks.claimWebhookDeliveries(request)) }
  async releaseWebhookLeases (owner: string, deliveryIds: readonly bigint[]): Promise<void> { await guardAsync(() => this.#webhooks.releaseWebhookLeases(owner, deliveryIds)) }
  async recordWebhookAttempts (outcomes: readonly AttemptOutcome[]): Promise<FailureRun[]> { return await guardAsync(() => this.#webhooks.recordWebhookAttempts(outcomes)) }
  async listWebhookDeliveries (webhookId: string, beforeId: bigint | null, limit: number): Promise<WebhookDelivery[]> {
    return await guardAsync(() => this.#webhooks.listWebhookDeliveries(webhookId, beforeId, limit))
  }
  async getWebhookDelivery (webhookId: string, deliveryId: bigint): Promise<WebhookDelivery | null> { return await guardAsync(() => this.#webhooks.getWebhookDelivery(webhookId, deliveryId)) }
  async retryWebhookDelivery (webhookId: string, deliveryId: bigint, at: Date, giveUpAt: Date): Promise<WebhookDelivery | null> {
    return await guardAsync(() => this.#webhooks.retryWebhookDelivery(webhookId, deliveryId, at, giveUpAt))
  }
  async webhookBacklog (): Promise<WebhookBacklog[]> { return await guardAsync(() => this.#webhooks.webhookBacklog()) }
  async purgeWebhookDeliveries (before: Date, limit: number): Promise<number> { return await guardAsync(() => this.#webhooks.purgeWebhookDeliveries(before, limit)) }
  async openEventStream (id: string, quotaId: string, keyId: string, expiresAt: Date, at: Date, max: number): Promise<boolean> {
    return await guardAsync(() => this.#webhooks.openEventStream(id, quotaId, keyId, expiresAt, at, max))
  }
  async renewEventStreams (ids: readonly string[], expiresAt: Date): Promise<void> { await guardAsync(() => this.#webhooks.renewEventStreams(ids, expiresAt)) }
  async closeEventStream (id: string): Promise<void> { await guardAsync(() => this.#webhooks.closeEventStream(id)) }
}
