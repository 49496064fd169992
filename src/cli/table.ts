/** Aligned text tables for the CLI's human output (machine output is --json). */
import { printable } from '../domain/text.js'

export interface TableFit {
  /** The widest a line may be. */
  width: number
  /** The column that gives way (cut, ending in "…") when the lines would be wider; never below its header. */
  shrink: number
}

/**
 * The header and rows as columns padded to their widest cell, two spaces apart, one line each. Cells are shown
 * printable: a character a terminal would interpret (stored before such text was refused) appears escaped. With
 * `fit`, one column is cut so that no line is wider than fit.width (as long as the other columns leave it room).
 */
export function table (header: readonly string[], rows: ReadonlyArray<readonly string[]>, fit?: TableFit): string {
  let cells = rows.map((row) => row.map(printable))
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] as string).length)))
  if (fit !== undefined) {
    const others = widths.reduce((sum, w, i) => i === fit.shrink ? sum : sum + w, 0) + 2 * (widths.length - 1)
    const room = Math.max((header[fit.shrink] as string).length, fit.width - others)
    if ((widths[fit.shrink] as number) > room) {
      widths[fit.shrink] = room
      cells = cells.map((r) => r.map((cell, i) => i === fit.shrink && cell.length > room ? `${cell.slice(0, room - 1)}…` : cell))
    }
  }
  return [header, ...cells].map((r) => r.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd()).join('\n') + '\n'
}
