/** Aligned text tables for the CLI's human output (machine output is --json). */

/** The header and rows as columns padded to their widest cell, two spaces apart, one line each. */
export function table (header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] as string).length)))
  return [header, ...rows].map((r) => r.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd()).join('\n') + '\n'
}
