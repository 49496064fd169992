/** Aligned text tables for the CLI's human output (machine output is --json). */
import { printable } from '../domain/text.js'

/**
 * The header and rows as columns padded to their widest cell, two spaces apart, one line each. Cells are shown
 * printable: a character a terminal would interpret (stored before such text was refused) appears escaped.
 */
export function table (header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const cells = rows.map((row) => row.map(printable))
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] as string).length)))
  return [header, ...cells].map((r) => r.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd()).join('\n') + '\n'
}
