/** What the hold and order writes share: their answer, and whether it replays an earlier try with the same key. */
import type { Answer } from './transport.js'
import type { SellingResult } from './types.js'

/** A hold or order write's result from its answer; `replayed` when the service answered from its record of the key. */
export function sellingResult<T> ({ meta, body }: Answer, idempotencyKey: string): SellingResult<T> {
  return { ...meta, data: body as T, replayed: meta.headers.get('idempotent-replayed') === 'true', idempotencyKey }
}
