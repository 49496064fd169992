/**
 * The SQLite store's group commit: writes queued while the event loop is busy run together in one IMMEDIATE
 * transaction, so they share one fsync (synchronous=FULL); each caller is answered only after that commit. Any area's
 * writes may join it (stock writes do).
 */
import type Database from 'better-sqlite3'
import { translate } from './errors.js'

/**
 * What watches the commits (the tracing of a traced process, src/tracing/commits.ts): it keeps something of each
 * write as it is queued, and is told when a commit starts and ends.
 */
export interface CommitObserver {
  /** Called as a write is queued, in the caller's context: what to keep with it (a trace context, say). */
  queued (): unknown
  /**
   * Called as a commit starts, with what `queued` kept of each of its writes, in order; returns what to call when it
   * ends (with the error that failed the whole commit, if any), or null.
   */
  committing (writes: readonly unknown[]): ((error?: unknown) => void) | null
}

interface Queued {
  work: () => unknown
  resolve: (result: unknown) => void
  reject: (error: unknown) => void
  /** What the observer kept at enqueue. */
  kept: unknown
}

type Outcome = { result: unknown } | { error: unknown }

export class GroupCommit {
  readonly #db: Database.Database
  readonly #observer: CommitObserver | undefined
  /** Writes waiting for the next commit. */
  #pending: Queued[] = []
  #transactions = 0

  constructor (db: Database.Database, observer?: CommitObserver) {
    this.#db = db
    this.#observer = observer
  }

  /**
   * Runs `work` (synchronous statements) inside the next group commit; resolves with what it returned once the commit
   * is durable. The work runs in a savepoint of its own when another write of the commit fails, so that it fails
   * alone: it must leave nothing behind but its statements.
   */
  run<R> (work: () => R): Promise<R> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ work, resolve: resolve as (result: unknown) => void, reject, kept: this.#observer?.queued() })
      if (this.#pending.length === 1) setImmediate(() => { this.#commitPending() })
    })
  }

  /**
   * Which transaction of the group commit is running (or ran last): the writes of one transaction see the same number,
   * so that what they all read the same (the store's epoch) is read once per transaction.
   */
  get transaction (): number {
    return this.#transactions
  }

  /**
   * Commits the writes that are waiting. It runs from setImmediate, where an exception would end the process:
   * whatever fails here (a schema that does not match this code, SQLITE_IOERR, a full disk, a constraint) fails
   * the requests of this commit, and only them, and the server keeps serving.
   */
  #commitPending (): void {
    const batch = this.#pending
    this.#pending = []
    const end = this.#observer === undefined ? null : this.#observer.committing(batch.map((item) => item.kept))
    let outcomes: Outcome[]
    try {
      outcomes = this.#apply(batch)
    } catch (error) {
      end?.(translate(error))
      for (const item of batch) item.reject(translate(error))
      return
    }
    end?.()
    outcomes.forEach((outcome, i) => {
      const item = batch[i] as Queued
      if ('error' in outcome) item.reject(translate(outcome.error))
      else item.resolve(outcome.result)
    })
  }

  /**
   * One transaction for the batch. It first runs every write straight through: writes almost never fail one by one
   * (the input is validated, and a full disk fails the commit, not a statement), and a savepoint per write costs a
   * tenth of the write. If any write throws, the whole transaction has been rolled back and the batch runs again with
   * each write in its own savepoint, so that one failing write fails only its own request.
   */
  #apply (batch: readonly Queued[]): Outcome[] {
    try {
      return this.#db.transaction(() => {
        this.#transactions++
        return batch.map((item) => ({ result: item.work() }))
      }).immediate()
    } catch (error) {
      if (batch.length === 1) return [{ error }]
    }
    const one = this.#db.transaction((work: () => unknown) => work())
    return this.#db.transaction(() => {
      this.#transactions++
      return batch.map((item): Outcome => {
        try {
          return { result: one(item.work) }
        } catch (error) {
          return { error }
        }
      })
    }).immediate()
  }
}
