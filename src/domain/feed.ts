/**
 * The change feed: every stock change (the ledger, imports included) in commit order, which a reader can page through
 * without ever missing or repeating one, also while other instances write, and in which each pet's changes come in the
 * order they were made. Each change carries the cursor of its place, for a client to store and resume from.
 *
 * A cursor names a place and the store epoch of the change there (src/store/stock/types.ts StoreEpoch), and is checked
 * against the store's history before it is used: a place past the feed's last change was never issued (400), and a
 * place of an epoch whose history after it the store no longer has (a restore, a failover that lost commits, a move to
 * another store) is refused as expired (410) rather than taken to mean whatever change has that place now.
 */
import { AppError } from '../errors.js'
import { decodePairCursor, encodePairCursor, InvalidCursorError } from './cursor.js'
import { CHANGE_TYPES, LOW_STOCK, STOCK_CHANGED, type ChangeType, type HoldEvent, type LedgerReason, type PetStatus } from '../model.js'
import type { FeedChange, FeedHistory, FeedPlace, FeedPosition, StockReads } from '../store/stock/types.js'

export const DEFAULT_FEED_LIMIT = 100
export const MAX_FEED_LIMIT = 1000
/**
 * The first version of the feed's cursors, without an epoch: still the cursor of the changes made before the store had
 * epochs (so what was sent for them stays the same), and read as a place of the store's first epoch.
 */
export const FEED_CURSOR_PREFIX = 'f1:'
/** The feed's cursors with the epoch: `f2:<epoch>:<order>.<id>`, base64url. */
export const EPOCH_CURSOR_PREFIX = 'f2:'
const EPOCH = /^[0-9a-f]{16}$/

/** A cursor that names a place of a history the store no longer has after it: the reader must start again from a listing. */
export class CursorExpiredError extends AppError {
  constructor () {
    super('cursor_expired', 'The cursor names a place in a history the store no longer has after it (restored, failed over or moved ' +
      'since it was issued); start again from a listing and the feed place it reflects.')
  }
}

/** A cursor past the feed's last change: no such cursor was ever issued. */
export class CursorAheadError extends AppError {
  constructor () {
    super('invalid_request', 'The cursor points past the last change of the feed: it is not one the feed issued.')
  }
}

/** A change as the feed shows it to one caller. */
export interface ChangeView {
  changeId: bigint
  petId: bigint
  previousQuantity: number | null
  quantity: number
  reason: LedgerReason
  note: string | null
  reference: string | null
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

/** A stock change with its type: how the feed shows it when the request names `types`. */
export type TypedChangeView = ChangeView & { type: typeof STOCK_CHANGED }

/** One pet's part of a hold event, as the feed shows it: the pet's on-hand, held and available units right after it. */
export interface HoldEventView {
  type: HoldEvent
  changeId: bigint
  petId: bigint
  holdId: string
  reference: string | null
  quantity: number
  held: number
  /** max(0, quantity - held). */
  available: number
  at: Date
  cursor: string
}

/** A pet's on-hand quantity at or below its reorder point, as the feed shows it. */
export interface LowStockView {
  type: typeof LOW_STOCK
  changeId: bigint
  petId: bigint
  quantity: number
  reorderPoint: number
  at: Date
  cursor: string
}

/** An entry of the feed, of any type. */
export type EntryView = TypedChangeView | HoldEventView | LowStockView

export interface ChangePage {
  /** Entries of the types asked for, in feed order (stock changes only when none were named). */
  changes: EntryView[]
  /** The cursor to ask for the next page with: after the last change, or the one given when there was none. */
  next: string | null
}

/** The types a reader follows when it names none: stock changes, as the feed served before it had other types. */
export const DEFAULT_CHANGE_TYPES: readonly ChangeType[] = [STOCK_CHANGED]

/**
 * The types a comma-separated list names (`types=inventory.changed,hold.placed`), each once, in the feed's own order.
 * An unknown or empty item is refused naming its position, never quoting it (a message never repeats what a client
 * sent: it may be anything, a key pasted into the wrong field included).
 */
export function changeTypes (list: string): ChangeType[] {
  const items = list.split(',')
  const unknown = items.flatMap((item, index) => (CHANGE_TYPES as readonly string[]).includes(item) ? [] : [index + 1])
  if (unknown.length > 0) {
    throw new AppError('invalid_request', `querystring.types: item ${unknown.join(', ')} ${unknown.length > 1 ? 'are not known types' : 'is not a known type'}; ` +
      `known: ${CHANGE_TYPES.join(', ')}.`)
  }
  return CHANGE_TYPES.filter((type) => items.includes(type))
}

/**
 * One page of the feed after `cursor` (from the start when null), as `keyId` may see it: entries of `types` only,
 * filtered by the store, so that a page is full while more follow and its last entry is where the next begins. The
 * cursor is checked against the store's history first: InvalidCursorError, CursorAheadError or CursorExpiredError.
 */
export async function listChanges (
  store: { readonly stock: Pick<StockReads, 'listChanges' | 'feedHistory'> }, query: { cursor: string | null, limit: number, types?: readonly ChangeType[] },
  keyId: string | null
): Promise<ChangePage> {
  const place = query.cursor === null ? null : feedPlace(query.cursor)
  if (place !== null) checkPlace(await store.stock.feedHistory(), place)
  const changes = (await store.stock.listChanges(place, query.limit, query.types ?? DEFAULT_CHANGE_TYPES)).map((change) => viewEntry(change, keyId !== null && change.keyId === keyId))
  return { changes, next: changes.at(-1)?.cursor ?? query.cursor }
}

/** The place a cursor the feed issued names, with its epoch (null for an `f1:` cursor); InvalidCursorError for any other text. */
export function feedPlace (cursor: string): FeedPlace {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  let epoch: string | null = null
  let prefix = FEED_CURSOR_PREFIX
  if (text.startsWith(EPOCH_CURSOR_PREFIX)) {
    epoch = text.slice(EPOCH_CURSOR_PREFIX.length, EPOCH_CURSOR_PREFIX.length + 16)
    if (!EPOCH.test(epoch)) throw new InvalidCursorError()
    prefix = `${EPOCH_CURSOR_PREFIX}${epoch}:`
  }
  const [order, id] = decodePairCursor(prefix, cursor)
  // The feed issues no negative place; one would point before everything or, read unsigned, after everything.
  if (order < 0n || id < 0n) throw new InvalidCursorError()
  return { order, id, epoch }
}

/** The cursor of a place in the feed: where a reader resumes after it. A place from before epochs keeps its `f1:` form. */
export function feedCursor (place: FeedPlace): string {
  return place.epoch === null
    ? encodePairCursor(FEED_CURSOR_PREFIX, place.order, place.id)
    : encodePairCursor(`${EPOCH_CURSOR_PREFIX}${place.epoch}:`, place.order, place.id)
}

/** -1, 0 or 1 as `a` comes before, at or after `b` in the feed. */
export function comparePositions (a: FeedPosition, b: FeedPosition): number {
  if (a.order !== b.order) return a.order < b.order ? -1 : 1
  return a.id === b.id ? 0 : a.id < b.id ? -1 : 1
}

/**
 * Whether the store's history still holds `place` as it was when issued, else why not. A place of epoch E (an `f1:`
 * place: the first epoch) is good up to where E ends in this history: where the next epoch began, or the feed's head
 * for the current one. Every history that has E has the same changes up to there (an epoch's changes are made in one
 * history only: each restore, move or failover starts a new one), so the place names the same change it named when it
 * was issued, wherever it was issued. Past the head of the current epoch: never issued (CursorAheadError). Past the
 * end of an earlier epoch, or of an epoch this store never had: issued in a history that went on elsewhere
 * (CursorExpiredError).
 */
export function checkPlace (history: FeedHistory, place: FeedPlace): void {
  const { epochs, head } = history
  const index = place.epoch === null ? 0 : epochs.findIndex((e) => e.epoch === place.epoch)
  if (index === -1) throw new CursorExpiredError()
  const next = epochs[index + 1]
  const end = next?.after ?? head ?? { order: 0n, id: 0n }
  if (comparePositions(place, end) <= 0) return
  throw next === undefined ? new CursorAheadError() : new CursorExpiredError()
}

/**
 * An entry as the feed shows it: a stock change with its request id only to whoever made it (`own`: others' request ids
 * are theirs), an event with what is available after it.
 */
export function viewEntry (change: FeedChange, own: boolean): EntryView {
  const cursor = feedCursor({ ...change.position, epoch: change.epoch })
  const place = { changeId: change.id, petId: change.petId }
  switch (change.event) {
    case null:
      return { type: STOCK_CHANGED, ...viewChange(change, own) }
    case LOW_STOCK:
      return { type: change.event, ...place, quantity: change.quantity, reorderPoint: change.reorderPoint, at: change.at, cursor }
    default:
      return {
        type: change.event,
        ...place,
        holdId: change.holdId,
        reference: change.reference,
        quantity: change.quantity,
        held: change.held,
        available: Math.max(0, change.quantity - change.held),
        at: change.at,
        cursor
      }
  }
}

/** A stock change as the feed shows it; its request id only to whoever made it (`own`): others' request ids are theirs. */
export function viewChange (change: Extract<FeedChange, { event: null }>, own: boolean): ChangeView {
  return {
    changeId: change.id,
    petId: change.petId,
    previousQuantity: change.previousQuantity,
    quantity: change.quantity,
    reason: change.reason,
    note: change.note,
    reference: change.reference,
    at: change.at,
    batchId: change.batchId,
    status: change.status,
    previousStatus: change.previousStatus,
    requestId: own ? change.requestId : null,
    cursor: feedCursor({ ...change.position, epoch: change.epoch })
  }
}
