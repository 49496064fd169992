/**
 * Progress of a long CLI command on a terminal: one status line on stderr, redrawn in place with a carriage
 * return and at most every `intervalMs`, so that a 100,000-record import neither looks stuck nor floods a
 * terminal. Disabled (no output at all) when stderr is not a terminal, so that logs and pipes stay clean.
 */

/** Formats a byte count in decimal units: "950 B", "12.3 kB", "27.1 MB", "1.2 GB". */
function formatBytes (bytes: number): string {
  if (bytes < 1000) return `${bytes} B`
  const units = ['kB', 'MB', 'GB', 'TB']
  let value = bytes / 1000
  let unit = 0
  while (value >= 999.95 && unit < units.length - 1) {
    value /= 1000
    unit++
  }
  return `${value.toFixed(1)} ${units[unit] as string}`
}

/** "12,345": counts grouped by thousands, the same on every locale. */
function formatCount (n: number): string {
  return n.toLocaleString('en-US')
}

/** Whole percent, rounded down so that 100% means done; a zero total counts as done. */
export function percent (done: number, total: number): number {
  return total <= 0 ? 100 : Math.min(100, Math.floor((done * 100) / total))
}

export interface StatusLineOptions {
  /** False: every call is a no-op. */
  enabled: boolean
  /** The terminal's width; longer lines are cut so that a wrapped line cannot defeat the carriage return. */
  columns?: number
  /** The least time between two redraws. */
  intervalMs?: number
  /** Milliseconds since the epoch: the command's clock. */
  now: () => number
}

/** One line of status text, redrawn in place (`\r` + text + erase to the end of the line). */
export class StatusLine {
  readonly #write: (text: string) => void
  readonly #enabled: boolean
  readonly #width: number
  readonly #intervalMs: number
  readonly #now: () => number
  #lastDraw = -Infinity
  #drawn = false

  constructor (write: (text: string) => void, options: StatusLineOptions) {
    this.#write = write
    this.#enabled = options.enabled
    this.#width = options.columns !== undefined && options.columns > 1 ? options.columns - 1 : Infinity
    this.#intervalMs = options.intervalMs ?? 100
    this.#now = options.now
  }

  /**
   * Redraws the line unless the last redraw is more recent than the interval; `force` redraws anyway (a phase's
   * first and last state). `text` is only called when the line is drawn.
   */
  update (text: () => string, force = false): void {
    if (!this.#enabled) return
    const now = this.#now()
    if (!force && now - this.#lastDraw < this.#intervalMs) return
    this.#lastDraw = now
    this.#drawn = true
    this.#write(`\r${text().slice(0, this.#width)}\x1b[K`)
  }

  /** Leaves the last state on screen and moves to the next line. */
  finish (): void {
    if (!this.#drawn) return
    this.#drawn = false
    this.#write('\n')
  }

  /** Erases the line, so that an error message starts on a clean line. */
  clear (): void {
    if (!this.#drawn) return
    this.#drawn = false
    this.#write('\r\x1b[K')
  }
}

/**
 * The two phases of `petstore import`: "Reading pets.json: 45% (12.3 MB of 27.1 MB), 45,000 records" while the
 * file is parsed and validated, then "Writing: 60% (60,000 of 100,000 records)" while the store writes.
 */
export class ImportProgress {
  readonly #line: StatusLine
  readonly #name: string
  /** The file's size in bytes; null when unknown (not a regular file). */
  readonly #size: number | null

  constructor (line: StatusLine, name: string, size: number | null) {
    this.#line = line
    this.#name = name
    this.#size = size
  }

  reading (bytes: number, records: number, force = false): void {
    this.#line.update(() => {
      const size = this.#size
      const amount = size === null
        ? formatBytes(bytes)
        : `${percent(bytes, size)}% (${formatBytes(bytes)} of ${formatBytes(size)})`
      return `Reading ${this.#name}: ${amount}, ${formatCount(records)} ${records === 1 ? 'record' : 'records'}`
    }, force)
  }

  writing (written: number, total: number): void {
    this.#line.update(() => `Writing: ${percent(written, total)}% (${formatCount(written)} of ${formatCount(total)} records)`,
      written === 0 || written >= total)
  }

  /** The import is done: keep the last line and move on (the summary follows). */
  finish (): void {
    this.#line.finish()
  }

  /** The import failed: erase the line before the error message. */
  abort (): void {
    this.#line.clear()
  }
}
