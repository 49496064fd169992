/**
 * The change feed: every stock change (the ledger, imports included) in commit order, which a reader can page through
 * without ever missing or repeating one, also while other instances write, and in which each pet's changes come in the
 * order they were made. Each change carries the cursor of its place, for a client to store and resume from.
 */
import { decodePairCursor, encodePairCursor, InvalidCursorError } from './cursor.js'
import type { LedgerReason, PetStatus } from '../model.js'
import type { FeedChange, FeedPosition, StockReads } from '../store/stock/types.js'

export const DEFAULT_FEED_LIMIT = 100
export const MAX_FEED_LIMIT = 1000
/** The version of the feed's cursors. */
export const FEED_CURSOR_PREFIX = 'f1:'

/** A change as the feed shows it to one caller. */
export interface ChangeView {
  changeId: bigint
  petId: bigint
  previousQuantity: number | null
  quantity: number
  reason: LedgerReason
  note: string | null
  at: Date
  batchId: string | null
  /** The pet's status after the change when the change set it (an import), else null; and the one before. */
  status: PetStatus | null
  previousStatus: PetStatus | null
  /** The request that made the change, only when the caller's own key made it: others' request ids are theirs. */
  requestId: string | null
  /** Where the feed resumes after this change. */
  cursor: string
}

export interface ChangePage {
  changes: ChangeView[]
  /** The cursor to ask for the next page with: after the last change, or the one given when there was none. */
  next: string | null
}

/** One page of the feed after `cursor` (from the start when null), as `keyId` may see it. */
export async function listChanges (store: { readonly stock: Pick<StockReads, 'listChanges'> }, query: { cursor: string | null, limit: number }, keyId: string | null): Promise<ChangePage> {
  const changes = (await store.stock.listChanges(query.cursor === null ? null : feedPosition(query.cursor), query.limit))
    .map((change) => viewChange(change, keyId !== null && change.keyId === keyId))
  return { changes, next: changes.at(-1)?.cursor ?? query.cursor }
}

/** The place a cursor the feed issued names; InvalidCursorError for any other text. */
export function feedPosition (cursor: string): FeedPosition {
  const [order, id] = decodePairCursor(FEED_CURSOR_PREFIX, cursor)
  // The feed issues no negative place; one would point before everything or, read unsigned, after everything.
  if (order < 0n || id < 0n) throw new InvalidCursorError()
  return { order, id }
}

/** The cursor of a place in the feed: where a reader resumes after it. */
export function feedCursor (position: FeedPosition): string {
  return encodePairCursor(FEED_CURSOR_PREFIX, position.order, position.id)
}

/** A change as the feed shows it; its request id only to whoever made it (`own`): others' request ids are theirs. */
export function viewChange (change: FeedChange, own: boolean): ChangeView {
  return {
    changeId: change.id,
    petId: change.petId,
    previousQuantity: change.previousQuantity,
    quantity: change.quantity,
    reason: change.reason,
    note: change.note,
    at: change.at,
    batchId: change.batchId,
    status: change.status,
    previousStatus: change.previousStatus,
    requestId: own ? change.requestId : null,
    cursor: feedCursor(change.position)
  }
}
