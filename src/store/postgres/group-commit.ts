/**
 * The PostgreSQL store's group commit for single-row writes (the stock area's setQuantity and adjustQuantity): writes
 * arriving while this instance's commit is in flight wait, and the next batch runs as one transaction on one client:
 * each write's statement as it would run alone, then COMMIT, all in one round trip; each caller is answered only after
 * that commit, with its own statement's outcome. Every stock-writing transaction takes the store-wide rows
 * inventory_version (statement trigger) and feed_clock (commit trigger) and holds them until its commit has been
 * flushed, so writers never overlap: a batch pays that wait and that WAL flush once for all its writes
 * (docs/adr/0043-postgres-group-commit.md).
 *
 * Lock order. Everything else that writes stock locks its inventory rows first (in pet order where there are several:
 * batches, holds), then inventory_version, then feed_clock. A batch keeps that order: its first statement locks every
 * row its writes will touch, in pet order, and only then do its statements take inventory_version. Without that, a
 * batch holding inventory_version after its first write and waiting for the row of its second could deadlock with a
 * transaction holding that row and waiting for inventory_version. In one round trip, with the statements prepared
 * once per connection, the batch holds inventory_version for the statements' execution and the commit's flush only.
 *
 * A write that fails (a constraint, an idempotency key another instance recorded meanwhile, a timeout, a deadlock)
 * makes PostgreSQL skip the rest of the batch's query, its COMMIT included: the transaction is rolled back and every
 * write of the batch runs again alone, as it would without the group commit, so that the failing one fails alone. A
 * lost connection fails the whole batch (nothing is retried: whether it committed is unknown, as for a single
 * statement whose connection drops). A batch of one runs alone at once.
 */
import pg from 'pg'
import { storeError, type PostgresDatabase } from './database.js'

/**
 * One write: its statement inside the batch's transaction (the batch's statements go in one round trip), what the
 * statement's result says, and the same write alone (autocommit, its own retries).
 */
export interface GroupedWrite<R> {
  /** The inventory row it writes: locked, with the batch's other rows, in pet order before any statement runs. */
  petId: bigint
  /**
   * One statement with parameters ($1, ...) and its values, and a name for it: on PostgreSQL itself it is prepared once
   * per connection under that name and run as EXECUTE (no parse and plan per write); through a pooler in transaction
   * mode, which keeps no session, it is sent with its values inlined.
   */
  statement: { name: string, sql: string, values: readonly unknown[] }
  /** Its outcome from the statement's result, once the batch has committed (it may look at the store again). */
  outcome: (result: pg.QueryResult) => Promise<R>
  /** The write on its own, as when it is the only one waiting or after its batch failed. */
  alone: () => Promise<R>
}

/**
 * A value as a literal, for a simple query holding several statements: null, finite numbers, bigints, bigint arrays,
 * Dates (timestamptz) and strings (quoted by the driver's escapeLiteral, E'' when it holds a backslash).
 */
export function literal (value: unknown): string {
  if (value === null || value === undefined) return 'NULL'
  if (typeof value === 'bigint') return `'${value}'::bigint`
  if (typeof value === 'number' && Number.isFinite(value)) return String(value)
  if (typeof value === 'string') return pg.escapeLiteral(value)
  if (value instanceof Date) return `'${value.toISOString()}'::timestamptz`
  if (Array.isArray(value) && value.every((item) => typeof item === 'bigint')) return `'{${value.join(',')}}'::bigint[]`
  throw new TypeError(`no literal for ${typeof value}`)
}

/** A parameterized statement ($1, $2, ...) with its values as literals. */
export function inline (sql: string, values: readonly unknown[]): string {
  return sql.replace(/\$(\d+)/g, (_, n: string) => {
    const index = Number(n) - 1
    if (index >= values.length) throw new RangeError(`no value for $${n}`)
    return literal(values[index])
  })
}

interface Queued {
  write: GroupedWrite<unknown>
  resolve: (result: unknown) => void
  reject: (error: unknown) => void
}

/** What the group commit has done since the store opened: transactions of more than one write, and their writes. */
export interface GroupCommitStats {
  batches: number
  batchedWrites: number
  /** Batches rolled back because a write failed, whose writes then ran alone. */
  retriedAlone: number
}

/**
 * Whether PostgreSQL answered the batch's query with an error (a SQLSTATE), so that its transaction did not commit;
 * not a lost connection (class 08), a server shutting down (57P0x) or the client giving up, after which the commit
 * may or may not have happened.
 */
function refusedByServer (error: unknown): boolean {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !/^(08|57P)/.test(code)
}

/** Writes per transaction at most: bounds the time the batch's rows stay locked and the wait of the last write. */
export const MAX_BATCH_WRITES = 64

export class PostgresGroupCommit {
  readonly #db: PostgresDatabase
  readonly #maxWrites: number
  #pending: Queued[] = []
  #running = false
  /** The statements prepared on each connection (PostgreSQL itself: a client keeps its session). */
  readonly #prepared = new WeakMap<pg.PoolClient, Set<string>>()
  readonly #stats: GroupCommitStats = { batches: 0, batchedWrites: 0, retriedAlone: 0 }

  constructor (db: PostgresDatabase, maxWrites = MAX_BATCH_WRITES) {
    this.#db = db
    this.#maxWrites = maxWrites
  }

  /** Runs `write` in the next batch; resolves with its outcome once that batch has committed. */
  run<R> (write: GroupedWrite<R>): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#pending.push({ write: write as GroupedWrite<unknown>, resolve: resolve as (result: unknown) => void, reject })
      if (!this.#running) {
        this.#running = true
        // After the writes of this turn of the event loop have queued: they share the first batch.
        setImmediate(() => { void this.#drain() })
      }
    })
  }

  get stats (): GroupCommitStats {
    return { ...this.#stats }
  }

  /** One batch at a time, until nothing waits: the writes that arrive during a commit form the next batch. */
  async #drain (): Promise<void> {
    try {
      while (this.#pending.length > 0) {
        const batch = this.#pending.splice(0, this.#maxWrites)
        if (batch.length === 1) await this.#alone(batch)
        else await this.#commit(batch)
      }
    } finally {
      this.#running = false
    }
  }

  /** Each write on its own, in the order they came; each answered with its own outcome. */
  async #alone (batch: readonly Queued[]): Promise<void> {
    for (const item of batch) {
      try {
        item.resolve(await item.write.alone())
      } catch (error) {
        item.reject(error)
      }
    }
  }

  /**
   * The batch's statements as text: EXECUTE of a statement prepared on this connection (prepared first, once, in a
   * round trip of its own, outside any transaction), or, through a pooler in transaction mode, inlined.
   */
  async #statements (client: pg.PoolClient, batch: readonly Queued[]): Promise<string[]> {
    if (this.#db.pooler !== 'none') return batch.map(({ write: { statement } }) => inline(statement.sql, statement.values))
    let prepared = this.#prepared.get(client)
    if (prepared === undefined) this.#prepared.set(client, prepared = new Set())
    for (const { write: { statement } } of batch) {
      if (prepared.has(statement.name)) continue
      try {
        await client.query(`PREPARE ${statement.name} AS ${statement.sql}`)
      } catch (error) {
        // 42P05: prepared already on this connection.
        if ((error as { code?: unknown }).code !== '42P05') throw error
      }
      prepared.add(statement.name)
    }
    return batch.map(({ write: { statement } }) => `EXECUTE ${statement.name} (${statement.values.map(literal).join(', ')})`)
  }

  async #commit (batch: readonly Queued[]): Promise<void> {
    let checkedOut: { client: pg.PoolClient, release: () => void }
    try {
      checkedOut = await this.#db.checkOut()
    } catch (error) {
      for (const item of batch) item.reject(error)
      return
    }
    const { client, release } = checkedOut
    let answers: pg.QueryResult[]
    try {
      const ids = [...new Set(batch.map((item) => item.write.petId))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      const statements = await this.#statements(client, batch)
      // One round trip: the transaction, its rows locked in pet order, every write's statement, the commit (a simple
      // query of several statements answers one result each, in order, and stops at the first error).
      answers = await client.query([
        this.#db.begin(),
        `SELECT pet_id FROM inventory WHERE pet_id = ANY ('{${ids.join(',')}}'::bigint[]) ORDER BY pet_id FOR UPDATE`,
        ...statements,
        'COMMIT'
      ].join(';\n')) as unknown as pg.QueryResult[]
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      release()
      if (refusedByServer(error)) {
        // A statement failed (or the commit's own checks did): nothing was committed, and the writes run again alone.
        this.#stats.retriedAlone++
        await this.#alone(batch)
      } else {
        // The connection failed: whether the commit happened is unknown, as for a single statement.
        for (const item of batch) item.reject(storeError(error))
      }
      return
    }
    release()
    this.#stats.batches++
    this.#stats.batchedWrites += batch.length
    const own = answers.slice(answers.length - 1 - batch.length, answers.length - 1)
    for (const [i, item] of batch.entries()) {
      try {
        item.resolve(await item.write.outcome(own[i] as pg.QueryResult))
      } catch (error) {
        item.reject(error)
      }
    }
  }
}
