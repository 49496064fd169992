import { AppError } from '../errors.js'
import { randomUUID } from 'node:crypto'
import type { ImportedCurrent, ImportedStockChange } from '../store/catalog/types.js'
import type { IdempotencyClaim } from '../store/idempotency/types.js'
import type { BatchChange, FeedPlace, StockAdjustment, StockBatch, StockChange, StockReads, StockWrites } from '../store/stock/types.js'
import type { IdempotencyKeys, Keyed, KeyedResult } from './idempotency.js'
import { MAX_QUANTITY, type PetImport, type StockChangeEntry, type StockEntry, type StockReason } from '../model.js'

/** What a stock update asks for; the quantity, note and reference are already validated at the edge. */
export interface StockUpdate {
  quantity: number
  reason: StockReason
  note: string | null
  /** What the change was for (an order, an invoice, a count sheet); absent or null when none was sent. */
  reference?: string | null
  /** Compare-and-set: the revisions the entry may have for the change to apply; null: unconditional. */
  expectedRevisions: readonly bigint[] | null
}

/** Who makes a change, as the ledger records it. */
export interface Actor {
  keyId: string | null
  requestId: string | null
}

/** Pages of the inventory listing, when a client asks for pages (without, the listing is the whole array). */
export const DEFAULT_INVENTORY_LIMIT = 100
export const MAX_INVENTORY_LIMIT = 1000
/** The version of the inventory listing's cursors. */
export const INVENTORY_CURSOR_PREFIX = 'i1:'

/**
 * An applied stock change: the entry as it is now and, where the store tells, the inventory version it made and the
 * change's place in the feed; or, `replayed`, the entry as an earlier request with the same idempotency key left it
 * (nothing was applied now).
 */
export interface AppliedChange {
  entry: StockEntry
  version?: bigint
  feed?: FeedPlace
  replayed: boolean
}

/** The version and feed place a store told of an applied write, where it told them. */
export function madeBy (result: { version?: bigint, feed?: FeedPlace }): { version?: bigint, feed?: FeedPlace } {
  return { ...(result.version === undefined ? {} : { version: result.version }), ...(result.feed === undefined ? {} : { feed: result.feed }) }
}

/** A write sent with an idempotency key: the process's keys, and the key the caller sent. */
export interface IdempotentRequest {
  keys: IdempotencyKeys
  key: string
  /**
   * Whose idempotency keys these are: the caller's quota id (null: no API key), so a key made by rotation answers the
   * retries of writes its predecessor sent (a client switching keys mid-retry applies nothing twice).
   */
  owner: string | null
}

/** The entry changed since the revision a conditional update was based on; nothing was changed. */
export class StaleEntryError extends AppError {
  constructor (readonly current: StockEntry) {
    super('precondition_failed', `The inventory entry of pet ${current.petId} has changed since the revision the update was based on.`)
  }
}

/**
 * Sets the stock of one pet and records the change in the ledger, atomically.
 * A quantity change never changes the pet's status: status is the pet's, not the stock's
 * (docs/adr/0010-stock-changes-set-adjust-or-batch.md).
 */
export async function updateQuantity (store: { readonly stock: Pick<StockWrites, 'setQuantity'> }, petId: bigint, update: StockUpdate, actor: Actor, clock: () => number,
  idempotency?: IdempotentRequest): Promise<AppliedChange> {
  const change: StockChange = { petId, ...update, ...actor, at: new Date(clock()) }
  const request = ['set', petId, update.quantity, update.reason, update.note, conditionOf(update.expectedRevisions), ...referenceOf(update.reference)]
  return appliedOrThrow(petId, await keyed(idempotency, request, (claim) => store.stock.setQuantity(claim === undefined ? change : { ...change, at: new Date(clock()), idempotency: claim })))
}

/** A write through its idempotency key, when it has one. */
async function keyed<R extends { status: string }> (idempotency: IdempotentRequest | undefined, request: readonly unknown[],
  write: (claim?: IdempotencyClaim) => Promise<R>): Promise<Keyed<R>> {
  if (idempotency === undefined) return await write() as Keyed<R>
  // Keys are the caller's own: the same key sent by two callers names two requests (the keys of one quota are one caller).
  if (idempotency.owner === null) throw new Error('An idempotency key needs the API key it belongs to')
  return await idempotency.keys.once(idempotency.owner, idempotency.key, request, write)
}

/** A compare-and-set condition in one spelling, whatever order the revisions came in. */
const conditionOf = (revisions: readonly bigint[] | null): string[] | null =>
  revisions === null ? null : [...new Set(revisions)].sort((a, b) => a < b ? -1 : a > b ? 1 : 0).map(String)

/**
 * The reference as a request's fingerprint holds it: appended only when sent, so the fingerprint of a request without
 * one is what it was before references existed (a retry across an upgrade is still a retry).
 */
const referenceOf = (reference: string | null | undefined): string[] => reference === null || reference === undefined ? [] : [reference]

/** The change a store applied or an earlier request with the key left, or the error that says why it applied nothing. */
function appliedOrThrow (petId: bigint, result: KeyedResult, outOfRange?: (current: StockEntry) => AppError): AppliedChange {
  switch (result.status) {
    case 'updated':
      return { entry: result.entry, ...madeBy(result), replayed: false }
    case 'replayed':
      return { entry: result.entries[0] as StockEntry, replayed: true }
    case 'not_found':
      throw new AppError('not_found', `No inventory entry exists for pet ${petId}.`)
    case 'stale':
      throw new StaleEntryError(result.current)
    case 'out_of_range':
      throw outOfRange?.(result.current) ?? new AppError('stock_out_of_range')
  }
}

/** What a relative stock change asks for: a non-zero delta, already validated at the edge. */
export interface StockAdjustmentRequest {
  delta: number
  reason: StockReason
  note: string | null
  /** What the change was for (an order, an invoice, a count sheet); absent or null when none was sent. */
  reference?: string | null
  /** Compare-and-set, as for updateQuantity; null: unconditional. */
  expectedRevisions: readonly bigint[] | null
}

/**
 * Adds `delta` to the stock of one pet and records the change in the ledger, atomically: the quantity it adds to
 * is the committed one (no lost update under concurrency). The result must stay within 0..MAX_QUANTITY, else
 * nothing changes (stock_out_of_range, naming the current quantity).
 */
export async function adjustQuantity (store: { readonly stock: Pick<StockWrites, 'adjustQuantity'> }, petId: bigint, adjustment: StockAdjustmentRequest, actor: Actor, clock: () => number,
  idempotency?: IdempotentRequest): Promise<AppliedChange> {
  const change: StockAdjustment = { petId, ...adjustment, ...actor, at: new Date(clock()), allowed: { min: 0, max: MAX_QUANTITY } }
  const request = ['adjust', petId, adjustment.delta, adjustment.reason, adjustment.note, conditionOf(adjustment.expectedRevisions),
    ...referenceOf(adjustment.reference)]
  const result = await keyed(idempotency, request, (claim) => store.stock.adjustQuantity(claim === undefined ? change : { ...change, at: new Date(clock()), idempotency: claim }))
  return appliedOrThrow(petId, result, (current) => new AppError('stock_out_of_range', `Adding ${adjustment.delta} to the stock of pet ` +
    `${petId} (now ${current.quantity}) would leave ${current.quantity + adjustment.delta}, outside 0 to ${MAX_QUANTITY}; nothing was changed.`))
}

/** One change of a batch as the domain takes it: validated at the edge, its If-Match already read as revisions. */
export type BatchChangeRequest = BatchChange

/** An applied batch: the entries as they are now, in the batch's order; or, `replayed`, as an earlier request left them. */
export interface AppliedBatch {
  entries: StockEntry[]
  version?: bigint
  /** The place of the batch's last change. */
  feed?: FeedPlace
  replayed: boolean
}

/** Why one change of a refused batch cannot apply, with the catalogue code a single change would answer. */
export interface BatchChangeFailure {
  index: number
  petId: bigint
  code: 'not_found' | 'precondition_failed' | 'stock_out_of_range'
  message: string
  /** The entry as it is (absent for not_found). */
  current?: StockEntry
}

/** A batch of which at least one change cannot apply: nothing was changed. */
export class BatchRefusedError extends AppError {
  constructor (readonly failures: BatchChangeFailure[], total: number) {
    super('batch_refused', `${failures.length} of ${total} changes cannot be applied; nothing was changed.`)
  }
}

/** A batch changes each pet at most once; invalid_request naming both changes otherwise. */
export function requireDistinctPets (changes: readonly BatchChangeRequest[]): void {
  const seen = new Map<bigint, number>()
  changes.forEach((change, index) => {
    const earlier = seen.get(change.petId)
    if (earlier !== undefined) {
      throw new AppError('invalid_request', `body.changes[${index}] changes pet ${change.petId} again (body.changes[${earlier}] already does); ` +
        'a batch changes each pet at most once.')
    }
    seen.set(change.petId, index)
  })
}

/**
 * Applies stock changes of several pets together, each an absolute quantity or a delta, optionally compare-and-set:
 * all in one transaction, or none when any cannot apply (then every failing change is reported). A pet may appear
 * once: a second change of the same pet would have to say whether its If-Match means before or after the first.
 */
export async function applyBatch (store: { readonly stock: Pick<StockWrites, 'applyBatch'> }, changes: readonly BatchChangeRequest[], actor: Actor, clock: () => number,
  idempotency?: IdempotentRequest): Promise<AppliedBatch> {
  requireDistinctPets(changes)
  const batch: StockBatch = { changes, allowed: { min: 0, max: MAX_QUANTITY }, batchId: randomUUID(), ...actor, at: new Date(clock()) }
  const request = ['batch', changes.map((change) => ['delta' in change ? ['delta', change.delta] : ['quantity', change.quantity],
    change.petId, change.reason, change.note, conditionOf(change.expectedRevisions), ...referenceOf(change.reference)])]
  const result = await keyed(idempotency, request, (claim) => store.stock.applyBatch(claim === undefined ? batch : { ...batch, at: new Date(clock()), idempotency: claim }))
  switch (result.status) {
    case 'updated':
      return { entries: result.entries, ...madeBy(result), replayed: false }
    case 'replayed':
      return { entries: result.entries, replayed: true }
    case 'refused':
      throw new BatchRefusedError(result.failures.map((failure) => {
        const change = changes[failure.index] as BatchChangeRequest
        const { index, petId, current } = failure
        switch (failure.reason) {
          case 'not_found':
            return { index, petId, code: 'not_found', message: `No inventory entry exists for pet ${petId}.` }
          case 'stale':
            return { index, petId, code: 'precondition_failed', message: `The inventory entry of pet ${petId} has changed since the revision the change was based on.`, current }
          case 'out_of_range':
            return {
              index,
              petId,
              code: 'stock_out_of_range',
              message: 'delta' in change
                ? `Adding ${change.delta} to the stock of pet ${petId} (now ${current?.quantity}) would leave ${(current?.quantity ?? 0) + change.delta}, outside 0 to ${MAX_QUANTITY}.`
                : `The quantity of pet ${petId} must stay within 0 to ${MAX_QUANTITY}.`,
              current
            }
        }
      }), changes.length)
  }
}

/** One stock entry; throws not_found when the pet has none. */
export async function getStockEntry (store: { readonly stock: Pick<StockReads, 'getStockEntry'> }, petId: bigint): Promise<StockEntry> {
  const entry = await store.stock.getStockEntry(petId)
  if (entry === null) throw new AppError('not_found', `No inventory entry exists for pet ${petId}.`)
  return entry
}

/**
 * What importing a pet changes in what the listing shows of it: nothing, or the change the ledger records, which the
 * change feed then serves. The listing shows a pet that has a stock entry, with the pet's status, so the import
 * changes it when it sets a quantity the entry does not hold (`previous` null: the import creates the entry), or a
 * status the pet does not have while it has (or gets) an entry. A re-import of an unchanged catalogue changes nothing
 * (revisions, ETags and the ledger stay as they are). `status` is set when the status changed or the entry is new
 * (an entry that appears carries all it shows); `previousStatus` when an existing entry's status changed.
 */
export function importedStockChange (pet: Pick<PetImport, 'quantity' | 'status'>, current: ImportedCurrent): ImportedStockChange | null {
  const quantity = pet.quantity ?? current.quantity
  // No entry before or after: the listing does not show the pet, whatever its status.
  if (quantity === null) return null
  const created = current.quantity === null
  const statusChanged = current.status !== pet.status
  if (!created && quantity === current.quantity && !statusChanged) return null
  return {
    previous: current.quantity,
    quantity,
    status: created || statusChanged ? pet.status : null,
    previousStatus: !created && statusChanged ? current.status : null
  }
}

/**
 * The newest `limit` stock changes of a pet, oldest first (the events of its ledger, holds and low stock, are the
 * feed's, not its history's); null when the pet has neither stock nor history.
 */
export async function stockHistory (store: { readonly stock: Pick<StockReads, 'stockHistory' | 'getStockEntry'> }, petId: bigint, limit: number): Promise<StockChangeEntry[] | null> {
  const entries = await store.stock.stockHistory(petId, limit)
  if (entries.length > 0) return entries
  // No recorded change: an entry that predates the ledger has an empty history; no entry at all is unknown.
  return await store.stock.getStockEntry(petId) === null ? null : entries
}
