/**
 * The observing side of the change signal: what this instance has seen of the shared change counter. The listing
 * (src/http/inventory-cache.ts) compares marks to tell whether a change may have been acknowledged anywhere since it
 * last checked the store.
 */

/**
 * What this instance has seen of the shared change counter (Redis): each read of it reports its value, or reports
 * that it was not read (a rate-limit decision that came from the fallback, or a read that failed).
 */
export class ChangeWatch {
  #latest: number | undefined = undefined
  #gaps = 0

  /**
   * Called with every reading of the counter, in the order the reads were sent (one connection answers in order).
   * A counter lower than the one seen last was lost and restarted (a Redis restarted empty, a failover to a replica
   * that lagged): counted as a gap, like a reading without a counter, so the next GET checks the store.
   */
  observe (changes: number | undefined): void {
    if (changes === undefined) {
      if (this.#latest !== undefined) this.#gaps++
      this.#latest = undefined
    } else if (this.#latest === undefined || changes > this.#latest) {
      this.#latest = changes
    } else if (changes < this.#latest) {
      this.#gaps++
      this.#latest = changes
    }
  }

  /** The counter as last seen, with how many times it has been unknown since the start; undefined while unknown. */
  get mark (): { latest: number, gaps: number } | undefined {
    return this.#latest === undefined ? undefined : { latest: this.#latest, gaps: this.#gaps }
  }
}
