/**
 * SQL of the SQLite store that more than one area runs inside its own transactions: the feed's head (the stock area's
 * listings and feed, a webhook subscription's start) and the inventory version. Like everything in this folder it
 * knows no area: the head is a FeedPlace (../stock/types.ts) by its shape.
 */
import type Database from 'better-sqlite3'
import { EPOCH_OF } from '../rows.js'

/** The inventory version (migration 3's triggers move it with every change to what the listing shows). */
export const VERSION_SQL = 'SELECT v FROM inventory_version WHERE id = 1'

/**
 * The feed's last change (ledger rows commit in id order: the largest id) and its epoch, read inside the caller's
 * transaction, on the connection whose statements `prepare` makes (the store's own cache, or a listing's second
 * connection).
 */
export function feedHead (prepare: (sql: string) => Database.Statement): { order: bigint, id: bigint, epoch: string | null } | null {
  const { id, epoch } = prepare(`SELECT h.id, ${EPOCH_OF('0', 'h.id')} AS epoch FROM (SELECT max(id) AS id FROM stock_ledger) h`)
    .get() as { id: bigint | null, epoch: string | null }
  return id === null ? null : { order: 0n, id, epoch }
}

/**
 * The epoch new ledger rows are of, read once per transaction of the group commit, inside it (under the write lock
 * already held, a read of a page in the cache); undefined on a store from before epochs (not migrated yet). One per
 * area that writes ledger rows (stock, selling).
 */
export class TransactionEpoch {
  readonly #db: { readonly writes: { readonly transaction: number }, prepare: (sql: string) => Database.Statement }
  #read: { transaction: number, epoch: string | undefined } | null = null

  constructor (db: { readonly writes: { readonly transaction: number }, prepare: (sql: string) => Database.Statement }) {
    this.#db = db
  }

  current (): string | undefined {
    const transaction = this.#db.writes.transaction
    if (this.#read?.transaction !== transaction) {
      let epoch: string | undefined
      try {
        epoch = this.#db.prepare('SELECT epoch FROM store_epochs ORDER BY seq DESC LIMIT 1').pluck().get() as string | undefined
      } catch {
        epoch = undefined
      }
      this.#read = { transaction, epoch }
    }
    return this.#read.epoch
  }
}
