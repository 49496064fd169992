/**
 * What both stores decide for a batch once its entries are read (and locked) inside the write transaction: which
 * changes cannot apply, and the quantity each of the others writes. All or nothing: the writes start only when no
 * change failed.
 */
import type { StockEntry } from '../../model.js'
import type { BatchChange, BatchFailure, StockBatch } from './types.js'

export interface PlannedChange {
  change: BatchChange
  current: StockEntry
  quantity: number
}

/** Every failing change of the batch, or else the plan of every change, in the batch's order. */
export function planBatch (batch: Pick<StockBatch, 'changes' | 'allowed'>, entryOf: (petId: bigint) => StockEntry | undefined):
  { failures: BatchFailure[], planned: PlannedChange[] } {
  const failures: BatchFailure[] = []
  const planned: PlannedChange[] = []
  batch.changes.forEach((change, index) => {
    const current = entryOf(change.petId)
    if (current === undefined) {
      failures.push({ index, petId: change.petId, reason: 'not_found' })
      return
    }
    const quantity = 'delta' in change ? current.quantity + change.delta : change.quantity
    if (change.expectedRevisions !== null && !change.expectedRevisions.includes(current.revision)) {
      failures.push({ index, petId: change.petId, reason: 'stale', current })
    } else if (quantity < batch.allowed.min || quantity > batch.allowed.max) {
      failures.push({ index, petId: change.petId, reason: 'out_of_range', current })
    } else {
      planned.push({ change, current, quantity })
    }
  })
  return { failures, planned: failures.length === 0 ? planned : [] }
}
