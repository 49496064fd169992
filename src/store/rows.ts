/**
 * What the row codecs of every area share (each area's rows.ts maps its own tables). The two drivers differ only in
 * how a column arrives (SQLite: every integer a bigint, times as ISO text, booleans as 0/1; PostgreSQL: int4 a number,
 * int8 a bigint, timestamptz a Date, boolean a boolean); the mappers take either.
 */

export type Int = bigint | number
export type Time = string | Date

export const num = (value: Int): number => Number(value)
export const numOrNull = (value: Int | null): number | null => value === null ? null : Number(value)
export const time = (value: Time): Date => value instanceof Date ? value : new Date(value)
export const timeOrNull = (value: Time | null): Date | null => value === null ? null : time(value)

/**
 * The store epoch of the change at feed position (`order`, `id`), two SQL expressions: the last epoch that began before
 * it (migration 11), or null for a change from before the store had epochs (an upgraded store's first changes). The
 * epochs are a handful of rows; the subquery reads them per change. The feed's queries of every area use it, and
 * the dialects' SQL of the feed's head.
 */
export const EPOCH_OF = (order: string, id: string): string =>
  `(SELECT e.epoch FROM store_epochs e WHERE (e.after_order, e.after_id) < (${order}, ${id}) ORDER BY e.seq DESC LIMIT 1)`
