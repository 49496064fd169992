import pg from 'pg'
import { ConfigError, DATABASE_DEFAULTS, type DatabasePooler } from '../../config.js'
import type { ApiKeyRecord, Ban, InventoryItem, LedgerEntry, Order, OrderStatus, Pet, PetImport, PetStatus, StockEntry } from '../../domain/model.js'
import { StoreUnavailableError } from '../../errors.js'
import {
  ENTRY_COLUMNS, EPOCH_COLUMNS, EPOCH_OF, headOf, IDEMPOTENCY_COLUMNS, INVENTORY_COLUMNS, KEY_COLUMNS, LEDGER_COLUMNS, newEpochId, ORDER_COLUMNS, PET_COLUMNS, petColumns, progressReporter,
  entriesText, toEpoch, toIdempotencyRecord, toInventoryItem, toKey, toLedgerEntry, toOrder, toPet, toStockEntry,
  type EntryRow, type EpochRow, type IdempotencyRow, type InventoryRow, type KeyRow, type LedgerRow, type OrderRow, type PetRow
} from '../rows.js'
import type {
  EpochConfirmation, FeedChange, FeedHistory, FeedPlace, FeedPosition, IdempotencyClaim, IdempotencyRecord, ImportedCurrent, ImportedStockRule, ImportOptions, ImportResult, InventoryPage, NewApiKey, OrderPage, PoolStats, RotationOutcome, StockAdjustment, StockAdjustmentResult, StockChange,
  StockBatch, StockBatchResult, StockChangeResult, Store
} from '../types.js'
import { aheadError, appliedChecksum, appliedHistory, checksum, schemaStatus, type AppliedMigration, type SchemaStatus } from '../migrations.js'
import { planBatch } from '../batch.js'
import { BOOKKEEPING, PLAN } from './migrations.js'
import { requirePostgresSchema } from './schema.js'
import { PostgresWebhooks } from './webhooks.js'
import type {
  AttemptOutcome, ClaimedDelivery, ClaimRequest, EnqueueResult, FailureRun, NewWebhook, WebhookBacklog, WebhookDelivery, WebhookRecord, WebhookUpdate
} from '../webhook-types.js'

const INT8_OID = 20

// bigint columns come back as bigint (pg's default is a string); everything else keeps pg's parsers.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (text: string) => BigInt(text) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser
}

/** No PostgreSQL migration shares a name with an earlier variant, so no store is ever asked which one it ran. */
const NOTHING_DETECTED: ReadonlyMap<string, boolean> = new Map()

/** Migrations of all instances take this advisory lock, so concurrent starters apply each version once. */
const MIGRATION_LOCK = 7_265_001_042n
/**
 * Imports take this advisory lock, one at a time: an import reads what the pets are before it replaces them, and a pet
 * another import has inserted but not committed is invisible to it (nothing to lock), so two at once could each take a
 * pet for new and record its status change as nothing, or as a second creation.
 */
const IMPORT_LOCK = 7_265_001_043n

/** The largest int8: an epoch that begins after (position, this) takes every change from the next position on. */
const AFTER_EVERY_ID = 9_223_372_036_854_775_807n

/** What identifies the database a store is on (each part null where it cannot be read); see confirmEpoch. */
interface DatabaseIdentity {
  /** The cluster's, from pg_control_system(): a new one for another cluster (initdb, pg_upgrade), kept by physical copies. */
  systemIdentifier: string | null
  /** The database's oid: another for a database restored with pg_restore (or made as a copy of a template). */
  databaseOid: bigint | null
  /** The oid of the store's own store_epochs table: another once pg_restore --clean has dropped and made it again. */
  tableOid: bigint | null
  /** The WAL timeline: a new one after point-in-time recovery or the promotion of a replica. */
  timeline: bigint | null
}

/** The outcome row of a stock change: the entry before (old_*) and, when it applied, after. */
interface ChangeRow { pet_id: bigint, old_quantity: number, old_revision: bigint, status: PetStatus, quantity: number | null, revision: bigint | null }

/**
 * A stock change in one statement (one round trip, autocommit): lock the entry, compare its revision, update
 * it, and record the ledger row. FOR UPDATE makes a concurrent change wait and then read the committed
 * quantity, so each ledger row's previous quantity is the one the change replaced.
 * With an idempotency key ($9 scope, $10 key, $11 fingerprint, $12 expiry), the entry is read only while no
 * unexpired record of the key exists, and the key's record is inserted from the updated row: a concurrent insert of
 * the same key (another instance) waits for this statement's commit and then fails, undoing its whole statement.
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
  ), recorded AS (
    INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, note, key_id, request_id, created_at)
    SELECT pet_id, previous, quantity, $4, $5, $6, $7, $8 FROM updated
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
/** Adds $2 to the locked, committed quantity, only when the result lies within $13..$14. */
const ADJUST_SQL = changeSql('old.quantity + $2::bigint', ' AND old.quantity + $2::bigint BETWEEN $13::bigint AND $14::bigint')

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

// Errors that mean "the database cannot serve right now": connection failures, timeouts, shutdowns, overload.
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN'])
const UNAVAILABLE_SQLSTATE = /^(08|53|57P0[1-4]|57014|40001|40P01)/

function isUnavailable (error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true
  const message = error instanceof Error ? error.message : ''
  // pg's own messages for pool and connection timeouts and dropped connections carry no code.
  return /timeout|Connection terminated|connect|not queryable|Client was closed/i.test(message)
}

/**
 * PgBouncer (in every pool mode) refuses a startup parameter it does not know, such as statement_timeout, with
 * "unsupported startup parameter: <name>" (SQLSTATE 08P01) before anything else: a configuration error, not an
 * outage, since every retry gets the same answer.
 */
function refusedStartupParameter (error: unknown): ConfigError | null {
  const message = error instanceof Error ? error.message : ''
  const match = /unsupported startup parameter:\s*(\S+)/i.exec(message)
  if (match === null) return null
  return new ConfigError(`DATABASE_URL leads to a connection pooler (PgBouncer) that refused the startup parameter "${match[1]}": ` +
    'set DATABASE_POOLER=transaction, which sends no session settings at connect (right for PgBouncer in any pool mode)')
}

/** A failure as the store reports it: a pooler refusing the connection's settings, the database unavailable, or as it came. */
function storeError (error: unknown): unknown {
  if (error instanceof StoreUnavailableError || error instanceof ConfigError) return error
  return refusedStartupParameter(error) ??
    (isUnavailable(error) ? new StoreUnavailableError('PostgreSQL is unavailable', { cause: error }) : error)
}

/** A failure to get a connection: any reason but a refused startup parameter means the database is unavailable. */
function connectError (error: unknown): Error {
  return refusedStartupParameter(error) ?? new StoreUnavailableError('PostgreSQL is unavailable', { cause: error })
}

/** What runs a statement: the pool (each statement on any connection) or one client inside a transaction. */
type Queryable = pg.Pool | pg.PoolClient

export interface PostgresOptions {
  /** Pool size per instance. */
  poolSize?: number
  /** Server-side limit per statement (statement_timeout) and client-side wait for an answer, in ms. */
  statementTimeoutMs?: number
  /** How long to wait for a connection from the pool (or a new one), in ms. */
  connectTimeoutMs?: number
  /** A schema to work in (search_path), for isolated test runs; the URL's database default otherwise. Not with pooler 'transaction'. */
  schema?: string
  /**
   * What stands between the store and PostgreSQL (DATABASE_POOLER). 'none': PostgreSQL itself (or a pooler that
   * passes session settings), and the statement timeout is a setting of each connection. 'transaction': a pooler
   * such as PgBouncer that hands a server connection to a client for one transaction at a time and refuses session
   * settings at connect; the store then sends none, and keeps its statement timeout in every transaction instead
   * (see the constructor).
   */
  pooler?: DatabasePooler
}

/**
 * The shared store for scale-out: PostgreSQL through a pg pool. Writes are single statements or one
 * transaction, so nothing partial is ever visible and concurrent updates do not get lost. TLS and other
 * connection settings come from the URL (e.g. ?sslmode=require).
 */
const KEY_INSERT_SQL = `INSERT INTO api_keys (id, key_hash, name, plan, per_minute, per_day, created_at, scope, expires_at, quota_id)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

/**
 * The keys sharing the quota of the key with id `param`: the quota's first key (its id is the quota id) and those
 * rotation made (quota_id). Two indexed lookups (the primary key, api_keys_quota), not a scan of every key.
 */
const SAME_QUOTA_AS = (param: string): string => {
  const quota = `(SELECT coalesce(quota_id, id) FROM api_keys WHERE id = ${param})`
  return `id = ${quota} OR quota_id = ${quota}`
}

/** The values of KEY_INSERT_SQL: a key of its own quota stores none (its id is its quota id). */
function keyValues (key: NewApiKey): unknown[] {
  return [key.id, key.keyHash, key.name, key.plan, key.perMinute, key.perDay, key.createdAt, key.scope ?? 'write', key.expiresAt ?? null,
    key.quotaId === undefined || key.quotaId === key.id ? null : key.quotaId]
}

export class PostgresStore implements Store {
  readonly kind = 'postgres'
  readonly #pool: pg.Pool
  readonly #poolSize: number
  readonly #pooler: DatabasePooler
  readonly #statementTimeoutMs: number
  /** Transaction mode: whether the server's own statement_timeout bounds single statements (asked once; null: not yet). */
  #serverTimeout: Promise<boolean> | null = null
  readonly #webhooks: PostgresWebhooks

  /**
   * With pooler 'transaction' no session setting survives a transaction (the next one may run on another server
   * connection, after another client's), so the statement timeout is set where it holds: every explicit transaction
   * begins with SET LOCAL statement_timeout (in the BEGIN's round trip); a single statement runs as it is when the
   * server's own default for the role and database (ALTER ROLE ... SET statement_timeout) is on and no longer than
   * the store's, and otherwise in a transaction of its own with that SET LOCAL (two more round trips). The
   * client-side query timeout stays as the bound on a dead connection. A schema (search_path) is a session setting
   * too: it is refused with the pooler.
   */
  constructor (connectionString: string, options: PostgresOptions = {}) {
    const statementTimeout = options.statementTimeoutMs ?? DATABASE_DEFAULTS.statementTimeoutMs
    if (!Number.isSafeInteger(statementTimeout) || statementTimeout < 1) {
      throw new RangeError(`statementTimeoutMs must be a positive integer, got ${statementTimeout}`)
    }
    this.#pooler = options.pooler ?? 'none'
    if (this.#pooler === 'transaction' && options.schema !== undefined) {
      throw new Error('a schema (search_path) is a session setting, which a pooler in transaction mode does not keep: ' +
        'give the store a database of its own instead of a schema')
    }
    this.#statementTimeoutMs = statementTimeout
    this.#poolSize = options.poolSize ?? DATABASE_DEFAULTS.poolSize
    this.#pool = new pg.Pool({
      connectionString,
      max: this.#poolSize,
      connectionTimeoutMillis: options.connectTimeoutMs ?? DATABASE_DEFAULTS.connectTimeoutMs,
      idleTimeoutMillis: 30_000,
      // Startup parameters: PgBouncer accepts application_name (and a few others), not statement_timeout or options.
      ...(this.#pooler === 'transaction' ? {} : { statement_timeout: statementTimeout }),
      // The client gives up a little after the server would have cancelled, covering a dead connection.
      query_timeout: statementTimeout + 1000,
      application_name: 'petstore-inventory',
      types,
      ...(options.schema === undefined ? {} : { options: `-c search_path=${options.schema}` })
    })
    // An idle client losing its connection emits 'error' on the pool; without a listener it would crash.
    this.#pool.on('error', () => {})
    this.#webhooks = new PostgresWebhooks((text, values) => this.#query(text, values), (work) => this.#transaction(work))
  }

  /** The statement that opens a transaction (`begin`, e.g. with an isolation level), with its statement timeout where connections have none. */
  #begin (begin = 'BEGIN'): string {
    // One simple query, so one round trip: the SET LOCAL lasts until the transaction ends, on whichever connection.
    return this.#pooler === 'transaction' ? `${begin}; SET LOCAL statement_timeout = ${this.#statementTimeoutMs}` : begin
  }

  /** Transaction mode: whether the server's default statement_timeout is on and no longer than the store's. */
  async #serverTimeoutHolds (): Promise<boolean> {
    this.#serverTimeout ??= this.#pool.query<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'statement_timeout'`)
      .then(({ rows }) => {
        const ms = Number(rows[0]?.setting)
        return ms > 0 && ms <= this.#statementTimeoutMs
      })
      .catch((error: unknown) => {
        // Asked again next time: an outage at start must not decide it for the store's lifetime.
        this.#serverTimeout = null
        throw storeError(error)
      })
    return await this.#serverTimeout
  }

  /**
   * Runs statements that need no transaction: on the pool, or, in transaction mode when the server's default does
   * not bound them, in one transaction that sets the timeout. Failures come as the store reports them.
   */
  async #statements<T> (work: (db: Queryable) => Promise<T>): Promise<T> {
    if (this.#pooler === 'transaction' && !(await this.#serverTimeoutHolds())) return await this.#transaction(work)
    try {
      return await work(this.#pool)
    } catch (error) {
      throw storeError(error)
    }
  }

  /** Runs a query, reporting connection trouble as StoreUnavailableError. */
  async #query<R extends pg.QueryResultRow> (text: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    return await this.#statements((db) => db.query<R>(text, values))
  }

  /**
   * A client of the pool for several statements, given back with its release(). While a client is checked out the pool
   * no longer listens for its errors, and a connection that ends between two statements (pg_terminate_backend, a
   * restart, a network reset) is emitted as 'error' on the client: without a listener, an uncaught exception that
   * ends the process. The failure reaches the work anyway, as the next statement's error ("not queryable"), and the
   * pool drops the client when it is released (the release given here, which also removes the listener).
   */
  async #checkOut (): Promise<{ client: pg.PoolClient, release: () => void }> {
    let client: pg.PoolClient
    try {
      client = await this.#pool.connect()
    } catch (error) {
      throw connectError(error)
    }
    const ignore = (): void => {}
    client.on('error', ignore)
    return {
      client,
      release: () => {
        client.off('error', ignore)
        client.release()
      }
    }
  }

  /** Runs work in one transaction on one client. */
  async #transaction<T> (work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const { client, release } = await this.#checkOut()
    try {
      await client.query(this.#begin())
      const result = await work(client)
      await client.query('COMMIT')
      return result
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      throw storeError(error)
    } finally {
      release()
    }
  }

  /** The rows of schema_migrations (checksums null where not recorded); none when the table does not exist. */
  async #appliedMigrations (client: Queryable): Promise<AppliedMigration[]> {
    const { rows: [table] } = await client.query<{ found: boolean, checksum: boolean }>(
      `SELECT to_regclass('schema_migrations') IS NOT NULL AS found,
         EXISTS (SELECT 1 FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = 'schema_migrations' AND column_name = 'checksum') AS checksum`)
    if (table?.found !== true) return []
    const { rows } = await client.query<AppliedMigration>(
      `SELECT version, name, ${table.checksum ? 'checksum' : 'NULL AS checksum'} FROM schema_migrations ORDER BY version`)
    return rows
  }

  /**
   * Where the schema stands against this release, its objects compared with what its migrations make
   * (src/store/postgres/schema.ts: in a transaction, for the scratch schema's savepoint); SchemaError when a migration
   * was edited or the objects differ.
   */
  async schemaStatus (): Promise<SchemaStatus> {
    return await this.#transaction(async (client) => {
      const applied = await this.#appliedMigrations(client)
      const status = schemaStatus(applied, PLAN, NOTHING_DETECTED)
      return { ...status, ...await this.#requireSchema(client, applied, status) }
    })
  }

  /** The schema check, for a store not ahead of this release: nothing, or why it could not run here. */
  async #requireSchema (client: pg.PoolClient, applied: AppliedMigration[], status: SchemaStatus): Promise<{ objectsUnchecked?: string }> {
    if (status.ahead.length > 0) return {}
    const unchecked = await requirePostgresSchema(client, appliedHistory(applied, PLAN, NOTHING_DETECTED), status.version)
    return unchecked === null ? {} : { objectsUnchecked: unchecked }
  }

  /**
   * Validates the applied migrations, records the checksums of rows from before checksums, and applies what is
   * pending, in one transaction under an advisory lock, so that instances migrating at once apply each version
   * once. A store ahead of this release, or with an edited migration, is left as it is.
   */
  async migrate (): Promise<number> {
    return this.#transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
      await client.query(BOOKKEEPING.create)
      await client.query(BOOKKEEPING.addChecksum)
      const applied = await this.#appliedMigrations(client)
      const status = schemaStatus(applied, PLAN, NOTHING_DETECTED)
      if (status.ahead.length > 0) throw aheadError(status)
      // A store that ran no migration yet holds nothing of the service to compare; anything else in its schema is
      // named by the next schemaStatus, which every command and serve asks before and after migrating. (Skipping it
      // here saves each new store the catalog reads, 0.3 s on a server whose catalogs many schemas have grown.)
      if (applied.length > 0) await this.#requireSchema(client, applied, status)
      for (const row of applied) {
        if (row.checksum !== null) continue
        await client.query('UPDATE schema_migrations SET checksum = $1 WHERE version = $2', [appliedChecksum(row, PLAN, NOTHING_DETECTED), row.version])
      }
      for (const migration of status.pending) {
        await client.query(migration.sql ?? '')
        await client.query('INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES ($1, $2, now(), $3)',
          [migration.version, migration.name, checksum(migration)])
      }
      return status.pending.length
    })
  }

  async ping (): Promise<void> {
    await this.#query('SELECT 1')
  }

  /** What identifies the database now; a part that cannot be read (no right to it, a standby's WAL) is null and named. */
  async #identity (): Promise<{ identity: DatabaseIdentity, unreadable: string[] }> {
    const unreadable: string[] = []
    const read = async <T> (name: string, sql: string): Promise<T | null> => {
      try {
        const { rows } = await this.#query<{ v: T | null }>(sql)
        return rows[0]?.v ?? null
      } catch (error) {
        if (error instanceof StoreUnavailableError) throw error
        unreadable.push(name)
        return null
      }
    }
    const identity = {
      systemIdentifier: await read<string>('system identifier (pg_control_system)', 'SELECT system_identifier::text AS v FROM pg_control_system()'),
      databaseOid: await read<bigint>('database oid', 'SELECT oid::int8 AS v FROM pg_database WHERE datname = current_database()'),
      tableOid: await read<bigint>('table oid', "SELECT 'store_epochs'::regclass::oid::int8 AS v"),
      // The timeline is the first 8 hexadecimal digits of a WAL file's name, the one being written now.
      timeline: await read<bigint>('WAL timeline (pg_walfile_name, pg_current_wal_lsn)',
        "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 AS v")
    }
    return { identity, unreadable }
  }

  /**
   * Compares what identifies the database now with what the current epoch recorded (and the feed clock's timeline),
   * under the feed clock's lock, so that no writer takes a feed position meanwhile and instances starting at once
   * start one epoch: another cluster, database or table (pg_restore, also with --clean into the same database; a copy)
   * or another timeline (point-in-time recovery, a promotion this store's commits have not met yet) starts a new epoch
   * after the last position taken; so does `restored`. A part not recorded yet (an epoch made by a migration, or by
   * the commit trigger) is recorded; a part that cannot be read is not compared.
   */
  async confirmEpoch ({ restored = false }: { restored?: boolean } = {}): Promise<EpochConfirmation> {
    const { identity, unreadable } = await this.#identity()
    return await this.#transaction(async (client) => {
      const { rows: [clock] } = await client.query<{ position: bigint, timeline: bigint | null }>('SELECT position, timeline FROM feed_clock WHERE id = 1 FOR UPDATE')
      const { rows: [latest] } = await client.query<EpochRow & { seq: number, system_identifier: string | null, database_oid: bigint | null, table_oid: bigint | null, timeline: bigint | null }>(
        `SELECT e.seq, ${EPOCH_COLUMNS}, e.system_identifier, e.database_oid, e.table_oid, e.timeline FROM store_epochs e ORDER BY e.seq DESC LIMIT 1`)
      if (clock === undefined || latest === undefined) throw new Error('the store has no feed clock or no epoch: run petstore migrate')
      const differs = <T> (recorded: T | null, now: T | null): boolean => recorded !== null && now !== null && recorded !== now
      const elsewhere = differs(latest.system_identifier, identity.systemIdentifier) || differs(latest.database_oid, identity.databaseOid) ||
        differs(latest.table_oid, identity.tableOid)
      const timeline = differs(clock.timeline ?? latest.timeline, identity.timeline)
      if (elsewhere || timeline || restored) {
        const { rows: [row] } = await client.query<EpochRow>(
          `INSERT INTO store_epochs (seq, epoch, after_order, after_id, reason, system_identifier, database_oid, table_oid, timeline)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING epoch, after_order, after_id, started_at, reason`,
          [latest.seq + 1, newEpochId(), clock.position, AFTER_EVERY_ID, elsewhere ? 'new database' : timeline ? 'new timeline' : 'restored',
            identity.systemIdentifier, identity.databaseOid, identity.tableOid, identity.timeline])
        await client.query('UPDATE feed_clock SET timeline = $1 WHERE id = 1', [identity.timeline])
        return { epoch: toEpoch(row as EpochRow), started: true, unreadable }
      }
      const missing = (latest.system_identifier === null && identity.systemIdentifier !== null) || (latest.database_oid === null && identity.databaseOid !== null) ||
        (latest.table_oid === null && identity.tableOid !== null) || (latest.timeline === null && identity.timeline !== null)
      if (missing) {
        await client.query(`UPDATE store_epochs SET system_identifier = coalesce(system_identifier, $1), database_oid = coalesce(database_oid, $2),
          table_oid = coalesce(table_oid, $3), timeline = coalesce(timeline, $4) WHERE seq = $5`,
        [identity.systemIdentifier, identity.databaseOid, identity.tableOid, identity.timeline, latest.seq])
      }
      if (identity.timeline !== null && clock.timeline !== identity.timeline) {
        await client.query('UPDATE feed_clock SET timeline = $1 WHERE id = 1', [identity.timeline])
      }
      return { epoch: toEpoch(latest), started: false, unreadable }
    })
  }

  /** The epochs and the head from one statement (one snapshot). */
  async feedHistory (): Promise<FeedHistory> {
    const { rows } = await this.#query<EpochRow & { head_order: bigint | null, head_id: bigint | null }>(
      `SELECT ${EPOCH_COLUMNS}, h.position AS head_order, h.id AS head_id FROM store_epochs e LEFT JOIN (
         SELECT f.position, (SELECT max(l.id) FROM stock_ledger l WHERE l.txid = f.txid) AS id FROM feed_positions f ORDER BY f.position DESC LIMIT 1
       ) h ON true ORDER BY e.seq`)
    return { epochs: rows.map(toEpoch), head: headOf(rows[0]?.head_order, rows[0]?.head_id) }
  }

  async close (): Promise<void> {
    if (!this.#pool.ended) await this.#pool.end()
  }

  poolStats (): PoolStats {
    return { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount, max: this.#poolSize }
  }

  async listInventory (): Promise<InventoryItem[]> {
    const { rows } = await this.#query<InventoryRow>(
      `SELECT ${INVENTORY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id ORDER BY i.pet_id`)
    return rows.map(toInventoryItem)
  }

  async inventoryVersion (): Promise<bigint> {
    const { rows } = await this.#query<{ v: bigint }>('SELECT v FROM inventory_version WHERE id = 1')
    return rows[0]?.v ?? 0n
  }

  /** Pages of the listing from one REPEATABLE READ transaction: every page sees the same snapshot. */
  async * inventoryPages (size: number): AsyncGenerator<InventoryPage> {
    const { client, release } = await this.#checkOut()
    // Open from the first statement on: "BEGIN; SET LOCAL ..." can fail after its BEGIN (a ROLLBACK without a
    // transaction only warns).
    let open = true
    try {
      await client.query(this.#begin('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'))
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

  /** Runs a change statement; with an idempotency key, tells a key recorded by another transaction (`recorded`). */
  async #change (sql: string, change: StockChange | StockAdjustment, amount: unknown[], more: unknown[] = []): Promise<StockAdjustmentResult> {
    const claim = change.idempotency
    const values = [change.petId, ...amount, change.expectedRevisions, change.reason, change.note, change.keyId, change.requestId, change.at,
      ...claimValues(claim), ...more]
    for (let attempt = 1; ; attempt++) {
      try {
        const { rows } = await this.#query<ChangeRow>(sql, values)
        const result = changeResult(rows[0], change.expectedRevisions)
        // Nothing applied: because the key is recorded (the statement read no entry), or recorded meanwhile by a
        // transaction this one waited for (a retry on another instance, whose change this one then saw as stale).
        if (result.status !== 'updated' && claim !== undefined && (await this.#query(KEY_LIVE_SQL, [claim.scope, claim.key, change.at])).rows.length > 0) {
          return { status: 'recorded' }
        }
        return result
      } catch (error) {
        if (claim === undefined || !isKeyTaken(error)) throw error
        // The key's row exists: recorded by a transaction that committed while this statement ran, or expired and
        // not purged yet, which is removed before the change is tried once more.
        const { rowCount } = await this.#query(DROP_EXPIRED_KEY_SQL, [claim.scope, claim.key, change.at])
        if ((rowCount ?? 0) === 0 || attempt === 3) return { status: 'recorded' }
      }
    }
  }

  /**
   * A batch in one transaction: the key's record looked up, the entries locked in pet order (two batches over the
   * same pets never deadlock), every change checked, and only then all written, with the ledger rows and the key's
   * record. A same key committed meanwhile by another instance makes the record's insert fail and undoes it all.
   */
  async applyBatch (batch: StockBatch): Promise<StockBatchResult> {
    const claim = batch.idempotency
    try {
      return await this.#transaction(async (client): Promise<StockBatchResult> => {
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
        await client.query(
          `INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, note, key_id, request_id, batch_id, created_at)
           SELECT pet_id, previous, quantity, reason, note, $6, $7, $8, $9
           FROM unnest($1::bigint[], $2::integer[], $3::integer[], $4::text[], $5::text[]) WITH ORDINALITY AS t (pet_id, previous, quantity, reason, note, n)
           ORDER BY n`,
          [planned.map((p) => p.change.petId), planned.map((p) => p.current.quantity), planned.map((p) => p.quantity),
            planned.map((p) => p.change.reason), planned.map((p) => p.change.note), batch.keyId, batch.requestId, batch.batchId, batch.at])
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

  async findIdempotencyRecord (scope: string, key: string, at: Date): Promise<IdempotencyRecord | null> {
    const { rows } = await this.#query<IdempotencyRow>(
      `SELECT ${IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND expires_at > $3`, [scope, key, at])
    return rows[0] === undefined ? null : toIdempotencyRecord(rows[0])
  }

  /** Instances purging at once skip each other's rows instead of waiting for them. */
  async purgeIdempotencyRecords (before: Date, limit: number): Promise<number> {
    const { rowCount } = await this.#query(
      `DELETE FROM idempotency_keys k USING (
         SELECT scope, idempotency_key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ) expired WHERE k.scope = expired.scope AND k.idempotency_key = expired.idempotency_key`, [before, limit])
    return rowCount ?? 0
  }

  async getStockEntry (petId: bigint): Promise<StockEntry | null> {
    const { rows } = await this.#query<EntryRow>(
      `SELECT ${ENTRY_COLUMNS} FROM inventory i JOIN pets p ON p.id = i.pet_id WHERE i.pet_id = $1`, [petId])
    return rows[0] === undefined ? null : toStockEntry(rows[0])
  }

  /** In commit order: the position each writing transaction took as it committed (migration 7), then the row id. */
  async listChanges (after: FeedPosition | null, limit: number): Promise<FeedChange[]> {
    const { rows } = await this.#query<LedgerRow & { position: bigint, epoch: string | null }>(
      `SELECT ${LEDGER_COLUMNS}, f.position, ${EPOCH_OF('f.position', 'l.id')} AS epoch FROM feed_positions f JOIN stock_ledger l ON l.txid = f.txid
       WHERE $1::bigint IS NULL OR (f.position, l.id) > ($1::bigint, $2::bigint)
       ORDER BY f.position, l.id LIMIT $3`, [after?.order ?? null, after?.id ?? null, limit])
    return rows.map((row) => ({ ...toLedgerEntry(row), position: { order: row.position, id: row.id }, epoch: row.epoch }))
  }

  async stockHistory (petId: bigint, limit: number): Promise<LedgerEntry[]> {
    const { rows } = await this.#query<LedgerRow>(
      `SELECT * FROM (SELECT ${LEDGER_COLUMNS} FROM stock_ledger l WHERE l.pet_id = $1 ORDER BY l.id DESC LIMIT $2) newest ORDER BY id`, [petId, limit])
    return rows.map(toLedgerEntry)
  }

  async getPet (id: bigint): Promise<Pet | null> {
    const { rows } = await this.#query<PetRow>(
      `SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`, [id])
    return rows[0] === undefined ? null : toPet(rows[0])
  }

  async countPets (): Promise<number> {
    const { rows } = await this.#query<{ n: bigint }>('SELECT count(*) AS n FROM pets')
    return Number(rows[0]?.n ?? 0n)
  }

  async listOrders ({ afterId, limit, status }: { afterId: bigint | null, limit: number, status: OrderStatus | null }): Promise<OrderPage> {
    const { rows } = await this.#query<OrderRow>(
      `SELECT ${ORDER_COLUMNS} FROM orders
       WHERE ($1::bigint IS NULL OR id > $1) AND ($2::text IS NULL OR status = $2)
       ORDER BY id LIMIT $3`, [afterId, status, limit + 1])
    return { orders: rows.slice(0, limit).map(toOrder), hasMore: rows.length > limit }
  }

  async importData ({ pets, orders }: { pets: PetImport[], orders: Order[] }, options: ImportOptions): Promise<ImportResult> {
    const CHUNK = 5000
    const report = progressReporter(pets.length + orders.length, options.onProgress)
    const at = options.at ?? new Date()
    await this.#transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [IMPORT_LOCK])
      // Every stock entry the import may write, locked before its first write. A chunk's writes take the inventory
      // version's row lock (its triggers) until the commit; a PATCH of a pet in a later chunk holds that entry's lock
      // and waits for the version row, so locking entries chunk by chunk could deadlock with it. Locked up front, the
      // import waits for such PATCHes before it holds the version row, and later ones wait for the import.
      // Their quantities stay as read until the import reaches each pet (a pet appears once in an import).
      const { rows: locked } = await client.query<{ pet_id: bigint, quantity: number }>(
        'SELECT pet_id, quantity FROM inventory WHERE pet_id = ANY ($1::bigint[]) ORDER BY pet_id FOR UPDATE', [pets.map((pet) => pet.id)])
      const quantities = new Map(locked.map((row) => [row.pet_id, row.quantity]))
      // Multi-row upserts from arrays (unnest): one round trip per chunk instead of one per record.
      for (let i = 0; i < pets.length; i += CHUNK) {
        const chunk = pets.slice(i, i + CHUNK)
        const current = await this.#importCurrent(client, chunk, quantities)
        const columns = chunk.map((pet) => [pet.id, ...petColumns(pet)])
        await client.query(
          `INSERT INTO pets (id, name, status, category_id, category_name, photo_urls, tags)
           SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])
           ON CONFLICT (id) DO UPDATE SET name = excluded.name, status = excluded.status, category_id = excluded.category_id,
             category_name = excluded.category_name, photo_urls = excluded.photo_urls, tags = excluded.tags`,
          [0, 1, 2, 3, 4, 5, 6].map((c) => columns.map((row) => row[c] ?? null)))
        await this.#importStock(client, chunk, current, options.stockChange, at)
        report(chunk.length)
      }
      for (let i = 0; i < orders.length; i += CHUNK) {
        const chunk = orders.slice(i, i + CHUNK)
        await client.query(
          `INSERT INTO orders (id, pet_id, quantity, ship_date, status, complete)
           SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::text[], $5::text[], $6::boolean[])
           ON CONFLICT (id) DO UPDATE SET pet_id = excluded.pet_id, quantity = excluded.quantity,
             ship_date = excluded.ship_date, status = excluded.status, complete = excluded.complete`,
          [chunk.map((o) => o.id), chunk.map((o) => o.petId), chunk.map((o) => o.quantity), chunk.map((o) => o.shipDate),
            chunk.map((o) => o.status), chunk.map((o) => o.complete)])
        report(chunk.length)
      }
    })
    return { pets: pets.length, orders: orders.length }
  }

  /**
   * What the store holds of the pets an import chunk is about to replace: their status and their entry's quantity
   * (the quantities as importData read them when it locked the entries; imports run one at a time), so that what the ledger records as before
   * is what the import replaces.
   */
  async #importCurrent (client: pg.PoolClient, pets: PetImport[], quantities: ReadonlyMap<bigint, number>): Promise<Map<bigint, ImportedCurrent>> {
    const { rows: statuses } = await client.query<{ id: bigint, status: PetStatus }>(
      'SELECT id, status FROM pets WHERE id = ANY ($1::bigint[])', [pets.map((pet) => pet.id)])
    const current = new Map<bigint, ImportedCurrent>(statuses.map((row) => [row.id, { status: row.status, quantity: null }]))
    for (const pet of pets) {
      const quantity = quantities.get(pet.id)
      if (quantity !== undefined) current.set(pet.id, { status: current.get(pet.id)?.status ?? null, quantity })
    }
    return current
  }

  /** Writes what the imported pets change in the listing (the domain's rule decides), with a ledger row each. */
  async #importStock (client: pg.PoolClient, pets: PetImport[], current: Map<bigint, ImportedCurrent>, stockChange: ImportedStockRule, at: Date): Promise<void> {
    const changed = pets.flatMap((pet) => {
      const change = stockChange(pet, current.get(pet.id) ?? { quantity: null, status: null })
      return change === null ? [] : [{ petId: pet.id, ...change }]
    })
    if (changed.length === 0) return
    const ids = changed.map((change) => change.petId)
    const quantities = changed.map((change) => change.quantity)
    // One change grows the revision once: a changed status has grown it already (the pets trigger), so the entry's own
    // write grows it only when the status stayed.
    for (const statusChanged of [false, true]) {
      const rows = changed.filter((change) => (change.previousStatus !== null) === statusChanged)
      if (rows.length === 0) continue
      await client.query(
        `INSERT INTO inventory (pet_id, quantity) SELECT * FROM unnest($1::bigint[], $2::integer[])
         ON CONFLICT (pet_id) DO UPDATE SET quantity = excluded.quantity${statusChanged ? '' : ', revision = inventory.revision + 1'}`,
        [rows.map((change) => change.petId), rows.map((change) => change.quantity)])
    }
    await client.query(
      `INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, status, previous_status, created_at)
       SELECT pet_id, previous, quantity, 'import', status, previous_status, $6
       FROM unnest($1::bigint[], $2::integer[], $3::integer[], $4::text[], $5::text[]) AS t (pet_id, previous, quantity, status, previous_status)`,
      [ids, changed.map((change) => change.previous), quantities, changed.map((change) => change.status),
        changed.map((change) => change.previousStatus), at])
  }

  async createApiKey (key: NewApiKey): Promise<void> {
    await this.#query(KEY_INSERT_SQL, keyValues(key))
  }

  async rotateApiKey (id: string, replacement: NewApiKey & { quotaId: string }, endsAt: Date): Promise<RotationOutcome> {
    return await this.#transaction(async (client): Promise<RotationOutcome> => {
      // The row lock makes two rotations of one key take turns: the second sees replaced_by set.
      const { rows } = await client.query<{ inactive: boolean, replaced: boolean }>(
        `SELECT revoked_at IS NOT NULL OR coalesce(expires_at <= $2, false) AS inactive, replaced_by IS NOT NULL AS replaced
         FROM api_keys WHERE id = $1 FOR UPDATE`, [id, replacement.createdAt])
      const old = rows[0]
      if (old === undefined) return 'not_found'
      if (old.replaced) return 'replaced'
      if (old.inactive) return 'inactive'
      await client.query(KEY_INSERT_SQL, keyValues(replacement))
      // The ban as it stands now, under the row lock (one recorded since the caller read the key is not lost).
      await client.query(`UPDATE api_keys SET (banned_at, banned_until, ban_seconds) =
        (SELECT banned_at, banned_until, ban_seconds FROM api_keys WHERE id = $1) WHERE id = $2`, [id, replacement.id])
      await client.query('UPDATE api_keys SET expires_at = least(expires_at, $1), replaced_by = $2 WHERE id = $3', [endsAt, replacement.id, id])
      return 'rotated'
    })
  }

  async recordKeyUse (id: string, usedAt: Date, deprecatedAt: Date | null): Promise<void> {
    await this.#query(`UPDATE api_keys SET last_used_at = greatest(last_used_at, $1),
      last_deprecated_use_at = greatest(last_deprecated_use_at, $2) WHERE id = $3`, [usedAt, deprecatedAt, id])
  }

  async findApiKeyByHash (keyHash: string): Promise<ApiKeyRecord | null> {
    const { rows } = await this.#query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = $1`, [keyHash])
    return rows[0] === undefined ? null : toKey(rows[0])
  }

  async listApiKeys (): Promise<ApiKeyRecord[]> {
    const { rows } = await this.#query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, id`)
    return rows.map(toKey)
  }

  async revokeApiKey (id: string, at: Date): Promise<boolean> {
    const { rowCount } = await this.#query('UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2', [at, id])
    return (rowCount ?? 0) > 0
  }

  async banApiKey (id: string, ban: Ban): Promise<boolean> {
    const { rowCount } = await this.#query(
      `UPDATE api_keys SET banned_at = $1, banned_until = $2, ban_seconds = $3 WHERE ${SAME_QUOTA_AS('$4')}`, [ban.since, ban.until, ban.seconds, id])
    return (rowCount ?? 0) > 0
  }

  async unbanApiKey (id: string, at: Date): Promise<boolean> {
    const { rows } = await this.#query<{ found: boolean }>(
      `WITH lifted AS (UPDATE api_keys SET banned_until = $1 WHERE banned_until > $1 AND (${SAME_QUOTA_AS('$2')}) RETURNING id)
       SELECT EXISTS (SELECT 1 FROM api_keys WHERE id = $2) AS found`, [at, id])
    return rows[0]?.found === true
  }

  // Webhooks and change streams (./webhooks.ts).
  async feedHead (): Promise<FeedPlace | null> { return await this.#webhooks.feedHead() }
  async createWebhook (webhook: NewWebhook, maxPerQuota: number): Promise<WebhookRecord | 'limit'> { return await this.#webhooks.createWebhook(webhook, maxPerQuota) }
  async listWebhooks (quotaId: string | null): Promise<WebhookRecord[]> { return await this.#webhooks.listWebhooks(quotaId) }
  async getWebhook (id: string): Promise<WebhookRecord | null> { return await this.#webhooks.getWebhook(id) }
  async updateWebhook (id: string, update: WebhookUpdate, at: Date): Promise<WebhookRecord | null> { return await this.#webhooks.updateWebhook(id, update, at) }
  async deleteWebhook (id: string): Promise<boolean> { return await this.#webhooks.deleteWebhook(id) }
  async rotateWebhookSecret (id: string, secret: string, previousUntil: Date, at: Date): Promise<WebhookRecord | null> {
    return await this.#webhooks.rotateWebhookSecret(id, secret, previousUntil, at)
  }
  async enqueueWebhookDeliveries (at: Date, giveUpAt: Date, limit: number): Promise<EnqueueResult> { return await this.#webhooks.enqueueWebhookDeliveries(at, giveUpAt, limit) }
  async claimWebhookDeliveries (request: ClaimRequest): Promise<ClaimedDelivery[]> { return await this.#webhooks.claimWebhookDeliveries(request) }
  async releaseWebhookLeases (owner: string, deliveryIds: readonly bigint[]): Promise<void> { await this.#webhooks.releaseWebhookLeases(owner, deliveryIds) }
  async recordWebhookAttempts (outcomes: readonly AttemptOutcome[]): Promise<FailureRun[]> { return await this.#webhooks.recordWebhookAttempts(outcomes) }
  async listWebhookDeliveries (webhookId: string, beforeId: bigint | null, limit: number): Promise<WebhookDelivery[]> {
    return await this.#webhooks.listWebhookDeliveries(webhookId, beforeId, limit)
  }
  async getWebhookDelivery (webhookId: string, deliveryId: bigint): Promise<WebhookDelivery | null> { return await this.#webhooks.getWebhookDelivery(webhookId, deliveryId) }
  async retryWebhookDelivery (webhookId: string, deliveryId: bigint, at: Date, giveUpAt: Date): Promise<WebhookDelivery | null> {
    return await this.#webhooks.retryWebhookDelivery(webhookId, deliveryId, at, giveUpAt)
  }
  async webhookBacklog (): Promise<WebhookBacklog[]> { return await this.#webhooks.webhookBacklog() }
  async purgeWebhookDeliveries (before: Date, limit: number): Promise<number> { return await this.#webhooks.purgeWebhookDeliveries(before, limit) }
  async openEventStream (id: string, quotaId: string, keyId: string, expiresAt: Date, at: Date, max: number): Promise<boolean> {
    return await this.#webhooks.openEventStream(id, quotaId, keyId, expiresAt, at, max)
  }
  async renewEventStreams (ids: readonly string[], expiresAt: Date): Promise<void> { await this.#webhooks.renewEventStreams(ids, expiresAt) }
  async closeEventStream (id: string): Promise<void> { await this.#webhooks.closeEventStream(id) }
}
