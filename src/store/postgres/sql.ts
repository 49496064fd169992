/**
 * SQL of the PostgreSQL store that more than one area runs inside its own transactions: the feed's head (the stock
 * area's feed, a webhook subscription's start and its fan-out). Like everything in this folder it knows no area: the
 * head is a FeedPlace (../stock/types.ts) by its shape.
 */
import type pg from 'pg'
import { EPOCH_OF } from '../rows.js'

/** The feed's last change: the highest commit position and the last ledger row of its transaction. */
export const HEAD_SQL = `SELECT f.position, (SELECT max(l.id) FROM stock_ledger l WHERE l.txid = f.txid) AS id
  FROM feed_positions f ORDER BY f.position DESC LIMIT 1`
/** The feed's last change with its epoch. */
const HEAD_PLACE_SQL = `SELECT h.position, h.id, ${EPOCH_OF('h.position', 'h.id')} AS epoch FROM (${HEAD_SQL}) h`

/** The feed's last change and its epoch, read by `query` (the pool, or a client inside the caller's transaction). */
export async function feedHead (query: (text: string, values?: unknown[]) => Promise<pg.QueryResult>): Promise<{ order: bigint, id: bigint, epoch: string | null } | null> {
  const { rows: [row] } = await query(HEAD_PLACE_SQL) as pg.QueryResult<{ position: bigint, id: bigint | null, epoch: string | null }>
  // A position without ledger rows is migration 7's own, on a ledger that was empty: the feed is empty.
  return row === undefined || row.id === null ? null : { order: row.position, id: row.id, epoch: row.epoch }
}
