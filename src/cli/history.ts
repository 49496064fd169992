/** How `petstore inventory history` shows a pet's stock ledger: a table for people, JSON for programs. */
import { stringify } from 'lossless-json'
import type { StockChangeEntry } from '../model.js'
import { table } from './table.js'

/**
 * The ledger as a JSON array; int64 ids are bare numbers, digit for digit (like the API). Each change with the fields it
 * always had, and `holdId` (the hold a sale confirmed); the event fields, null on every stock change, are left out.
 */
export function historyJson (entries: StockChangeEntry[]): string {
  return (stringify(entries.map((entry) => ({
    id: entry.id,
    petId: entry.petId,
    previousQuantity: entry.previousQuantity,
    quantity: entry.quantity,
    reason: entry.reason,
    note: entry.note,
    reference: entry.reference,
    keyId: entry.keyId,
    requestId: entry.requestId,
    batchId: entry.batchId,
    status: entry.status,
    previousStatus: entry.previousStatus,
    holdId: entry.holdId,
    at: entry.at.toISOString()
  }))) ?? '[]') + '\n'
}

/** The ledger as an aligned table, oldest change first; the note, free text, comes last, after the reference. */
export function historyTable (entries: StockChangeEntry[]): string {
  const header = ['TIME', 'REASON', 'FROM', 'TO', 'STATUS', 'KEY', 'REQUEST', 'REFERENCE', 'NOTE']
  const rows = entries.map((e) => [
    e.at.toISOString(), e.reason, e.previousQuantity === null ? '-' : String(e.previousQuantity), String(e.quantity),
    statusText(e), e.keyId ?? '-', e.requestId ?? '-', e.reference ?? '-', e.note ?? '-'
  ])
  return table(header, rows)
}

/** The status a change set: "available->sold" when it changed, "sold" for a new entry, "-" when it stayed. */
function statusText (entry: StockChangeEntry): string {
  if (entry.status === null) return '-'
  return entry.previousStatus === null ? entry.status : `${entry.previousStatus}->${entry.status}`
}
