/** Idempotency records on PostgreSQL (the stock area writes them with its writes: ../stock/postgres.ts). */
import type { PostgresDatabase } from '../postgres/database.js'
import { IDEMPOTENCY_COLUMNS, toIdempotencyRecord, type IdempotencyRow } from './rows.js'
import type { IdempotencyRecord, IdempotencyStore } from './types.js'

export class PostgresIdempotency implements IdempotencyStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  async findIdempotencyRecord (scope: string, key: string, at: Date): Promise<IdempotencyRecord | null> {
    const { rows } = await this.#db.query<IdempotencyRow>(
      `SELECT ${IDEMPOTENCY_COLUMNS} FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND expires_at > $3`, [scope, key, at])
    return rows[0] === undefined ? null : toIdempotencyRecord(rows[0])
  }

  /** Instances purging at once skip each other's rows instead of waiting for them. */
  async purgeIdempotencyRecords (before: Date, limit: number): Promise<number> {
    const { rowCount } = await this.#db.query(
      `DELETE FROM idempotency_keys k USING (
         SELECT scope, idempotency_key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ) expired WHERE k.scope = expired.scope AND k.idempotency_key = expired.idempotency_key`, [before, limit])
    return rowCount ?? 0
  }
}
