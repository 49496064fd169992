/** Idempotency records on SQLite (the stock area writes them with its writes: ../stock/sqlite.ts). */
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { IDEMPOTENCY_COLUMNS, toIdempotencyRecord, type IdempotencyRow } from './rows.js'
import type { IdempotencyRecord, IdempotencyStore } from './types.js'

export class SqliteIdempotency implements IdempotencyStore {
  readonly #db: SqliteDatabase

  constructor (db: SqliteDatabase) {
    this.#db = db
  }

  async findIdempotencyRecord (scope: string, key: string, at: Date): Promise<IdempotencyRecord | null> {
    return guard(() => {
      const row = this.#db.prepare(`SELECT ${IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE scope = ? AND idempotency_key = ? AND expires_at > ?`)
        .get(scope, key, at.toISOString()) as IdempotencyRow | undefined
      return row === undefined ? null : toIdempotencyRecord(row)
    })
  }

  async purgeIdempotencyRecords (before: Date, limit: number): Promise<number> {
    return guard(() => this.#db.prepare(`DELETE FROM idempotency_keys WHERE rowid IN
      (SELECT rowid FROM idempotency_keys WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`).run(before.toISOString(), limit).changes)
  }
}
