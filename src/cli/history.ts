/** How `petstore inventory history` shows a pet's stock ledger: a table for people, JSON for programs. */
import { stringify } from 'lossless-json'
import type { LedgerEntry } from '../model.js'
import { table } from './table.js'

/** The ledger as a JSON array; int64 ids are bare numbers, digit for digit (like the API). */
export function historyJson (entries: LedgerEntry[]): string {
  return (stringify(entries.map((entry) => ({ ...entry, at: entry.at.toISOString() }))) ?? '[]') + '\n'
}

/** The ledger as an aligned table, oldest change first; the note, free text, comes last, after the reference. */
export function historyTable (entries: LedgerEntry[]): string {
  const header = ['TIME', 'REASON', 'FROM', 'TO', 'STATUS', 'KEY', 'REQUEST', 'REFERENCE', 'NOTE']
  const rows = entries.map((e) => [
    e.at.toISOString(), e.reason, e.previousQuantity === null ? '-' : String(e.previousQuantity), String(e.quantity),
    statusText(e), e.keyId ?? '-', e.requestId ?? '-', e.reference ?? '-', e.note ?? '-'
  ])
  return table(header, rows)
}

/** The status a change set: "available->sold" when it changed, "sold" for a new entry, "-" when it stayed. */
function statusText (entry: LedgerEntry): string {
  if (entry.status === null) return '-'
  return entry.previousStatus === null ? entry.status : `${entry.previousStatus}->${entry.status}`
}
