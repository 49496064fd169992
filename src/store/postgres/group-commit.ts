/**
 * The PostgreSQL store's group commit for single-row writes (the stock area's setQuantity and adjustQuantity): writes
 * arriving while this instance's commit is in flight wait, and the next batch runs as one transaction on one client,
 * each write's statement as it would run alone, then one COMMIT; each caller is answered only after that commit, with
 * its own statement's outcome. Every stock-writing transaction takes the store-wide rows inventory_version (statement
 * trigger) and feed_clock (commit trigger) and holds them until its commit has been flushed, so writers never overlap:
 * a batch pays that wait and that WAL flush once for all its writes (docs/adr/0043-postgres-group-commit.md).
 *
 * Lock order. Everything else that writes stock locks its inventory rows first (in pet order where there are several:
 * batches, holds), then inventory_version, then feed_clock. A batch keeps that order: its first statement locks every
 * row its writes will touch, in pet order, in the BEGIN's round trip, and only then do its statements take
 * inventory_version. Without it, a batch holding inventory_version after its first write and waiting for the row of its
 * second could deadlock with a transaction holding that row and waiting for inventory_version.
 *
 * A write that fails (a constraint, an idempotency key another instance recorded meanwhile, a timeout) aborts the
 * transaction: it is rolled back and every write of the batch runs again alone, as it would without the group commit,
 * so that the failing one fails alone. A failed COMMIT fails the whole batch (nothing is retried: whether it
 * committed is unknown, as for a single statement whose connection drops). A batch of one runs alone at once.
 */
import type pg from 'pg'
import { storeError, type PostgresDatabase } from './database.js'

/** One write: its statements inside the batch's transaction, and the same write alone (autocommit, its own retries). */
export interface GroupedWrite<R> {
  /** The inventory row it writes: locked, with the batch's other rows, in pet order before any statement runs. */
  petId: bigint
  /** Its statements on the batch's client, inside the transaction; throws when one fails. */
  inBatch: (client: pg.PoolClient) => Promise<R>
  /** The write on its own, as when it is the only one waiting or after its batch failed. */
  alone: () => Promise<R>
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

/** Writes per transaction at most: bounds the time the batch's rows stay locked and the wait of the last write. */
export const MAX_BATCH_WRITES = 64

export class PostgresGroupCommit {
  readonly #db: PostgresDatabase
  readonly #maxWrites: number
  #pending: Queued[] = []
  #running = false
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

  async #commit (batch: readonly Queued[]): Promise<void> {
    let checkedOut: { client: pg.PoolClient, release: () => void }
    try {
      checkedOut = await this.#db.checkOut()
    } catch (error) {
      for (const item of batch) item.reject(error)
      return
    }
    const { client, release } = checkedOut
    const results: unknown[] = []
    let committing = false
    try {
      // Pet ids are bigints: their decimal text is safe to inline, which keeps the lock in the BEGIN's round trip.
      const ids = [...new Set(batch.map((item) => item.write.petId))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      await client.query(`${this.#db.begin()}; SELECT pet_id FROM inventory WHERE pet_id = ANY ('{${ids.join(',')}}'::bigint[]) ORDER BY pet_id FOR UPDATE`)
      for (const item of batch) results.push(await item.write.inBatch(client))
      committing = true
      await client.query('COMMIT')
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {})
      release()
      if (committing) {
        for (const item of batch) item.reject(storeError(error))
      } else {
        this.#stats.retriedAlone++
        await this.#alone(batch)
      }
      return
    }
    release()
    this.#stats.batches++
    this.#stats.batchedWrites += batch.length
    batch.forEach((item, i) => { item.resolve(results[i]) })
  }
}
