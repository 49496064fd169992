/**
 * The connection pool every area of the PostgreSQL store works on, and how statements run on it: alone, or in a
 * transaction on one client; with the statement timeout where a pooler in between keeps no session setting; and with
 * failures reported as the store reports them (StoreUnavailableError for an outage, ConfigError for a pooler that
 * refuses the connection's settings). Writes are single statements or one transaction, so nothing partial is ever
 * visible and concurrent updates do not get lost. TLS and other connection settings come from the URL (e.g.
 * ?sslmode=require).
 */
import pg from 'pg'
import { ConfigError, StoreUnavailableError } from '../../errors.js'
import { DATABASE_DEFAULTS, type DatabasePooler, type PostgresOptions } from './options.js'

const INT8_OID = 20

// bigint columns come back as bigint (pg's default is a string); everything else keeps pg's parsers.
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (text: string) => BigInt(text) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser
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
export function storeError (error: unknown): unknown {
  if (error instanceof StoreUnavailableError || error instanceof ConfigError) return error
  return refusedStartupParameter(error) ??
    (isUnavailable(error) ? new StoreUnavailableError('PostgreSQL is unavailable', { cause: error }) : error)
}

/** A failure to get a connection: any reason but a refused startup parameter means the database is unavailable. */
function connectError (error: unknown): Error {
  return refusedStartupParameter(error) ?? new StoreUnavailableError('PostgreSQL is unavailable', { cause: error })
}

/** What runs a statement: the pool (each statement on any connection) or one client inside a transaction. */
export type Queryable = pg.Pool | pg.PoolClient

export class PostgresDatabase {
  readonly #pool: pg.Pool
  readonly #poolSize: number
  readonly #pooler: DatabasePooler
  readonly #statementTimeoutMs: number
  /** The event triggers the schema check leaves out (PostgresOptions.trustedEventTriggers). */
  readonly trustedEventTriggers: readonly string[]
  /** Transaction mode: whether the server's own statement_timeout bounds single statements (asked once; null: not yet). */
  #serverTimeout: Promise<boolean> | null = null

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
    this.trustedEventTriggers = Object.freeze([...options.trustedEventTriggers ?? []])
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
  }

  /** What stands between the store and PostgreSQL: with 'none', a client's session (its prepared statements) lasts. */
  get pooler (): DatabasePooler {
    return this.#pooler
  }

  /** The statement that opens a transaction (`begin`, e.g. with an isolation level), with its statement timeout where connections have none. */
  begin (begin = 'BEGIN'): string {
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
  async statements<T> (work: (db: Queryable) => Promise<T>): Promise<T> {
    if (this.#pooler === 'transaction' && !(await this.#serverTimeoutHolds())) return await this.transaction(work)
    try {
      return await work(this.#pool)
    } catch (error) {
      throw storeError(error)
    }
  }

  /** Runs a query, reporting connection trouble as StoreUnavailableError. */
  async query<R extends pg.QueryResultRow> (text: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
    return await this.statements((db) => db.query<R>(text, values))
  }

  /**
   * A client of the pool for several statements, given back with its release(). While a client is checked out the pool
   * no longer listens for its errors, and a connection that ends between two statements (pg_terminate_backend, a
   * restart, a network reset) is emitted as 'error' on the client: without a listener, an uncaught exception that
   * ends the process. The failure reaches the work anyway, as the next statement's error ("not queryable"), and the
   * pool drops the client when it is released (the release given here, which also removes the listener).
   */
  async checkOut (): Promise<{ client: pg.PoolClient, release: () => void }> {
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
  async transaction<T> (work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const { client, release } = await this.checkOut()
    try {
      await client.query(this.begin())
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

  async ping (): Promise<void> {
    await this.query('SELECT 1')
  }

  async close (): Promise<void> {
    if (!this.#pool.ended) await this.#pool.end()
  }

  /** The pool's state (the store's PoolStats, ../store.ts). */
  poolStats (): { total: number, idle: number, waiting: number, max: number } {
    return { total: this.#pool.totalCount, idle: this.#pool.idleCount, waiting: this.#pool.waitingCount, max: this.#poolSize }
  }
}
