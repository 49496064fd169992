/**
 * The change-signal contract: how the instances of a deployment tell each other that the inventory changed, so each
 * one's listing (src/http/inventory-cache.ts) knows when to check the store again. Only a shared backend has one
 * (Redis: src/changes/redis.ts); an in-process deployment has none, and the listing relies on the store alone.
 */
import type { ChangeWatch } from './watch.js'

export interface ChangeSignal {
  /**
   * Counts an acknowledged change to the inventory, for every instance to see in its next reading of the counter.
   * Never throws: an announcement that cannot be made is made up for by the instances checking the store themselves.
   */
  announce (): Promise<void>
  /** What this instance has seen of the counter; fed by every reading, in the order the readings were sent. */
  readonly watch: ChangeWatch
}
