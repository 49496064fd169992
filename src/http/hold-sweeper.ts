/**
 * The holds' sweeper, run by the app in the background on every instance: it records holds whose expiry has passed
 * (store.selling.expireHolds: their hold.expired events reach the feed, the streams and webhooks) and deletes ended
 * holds older than the retention. Nothing waits for it: a hold stops counting at the instant it expires, whatever
 * the sweeper has done; several instances sweeping at once record each hold once (the store sees to it).
 */
import type { FastifyInstance } from 'fastify'
import { StoreReadOnlyError } from '../errors.js'
import type { SellingWrites } from '../store/selling/types.js'

/** How often expired holds are recorded: a follower of the feed learns of an expiry within about this long. */
export const HOLD_SWEEP_INTERVAL_MS = 5000
/** Holds recorded or deleted per store call: short transactions, the event loop free between them. */
export const HOLD_SWEEP_BATCH = 500

export interface HoldSweeperOptions {
  store: { readonly selling: Pick<SellingWrites, 'expireHolds' | 'purgeHolds'> }
  clock: () => number
  /** Ended holds older than this many days are deleted. */
  retentionDays: number
  intervalMs?: number
  batch?: number
}

/** One sweep: records every expired hold, then deletes the ended holds past the retention, a batch at a time. */
export async function sweepHolds ({ store, clock, retentionDays, batch = HOLD_SWEEP_BATCH }: HoldSweeperOptions): Promise<{ expired: number, purged: number }> {
  let expired = 0
  for (;;) {
    const recorded = await store.selling.expireHolds(new Date(clock()), batch)
    expired += recorded.length
    if (recorded.length < batch) break
    await new Promise((resolve) => setImmediate(resolve))
  }
  let purged = 0
  for (;;) {
    const deleted = await store.selling.purgeHolds(new Date(clock() - retentionDays * 86_400_000), batch)
    purged += deleted
    if (deleted < batch) break
    await new Promise((resolve) => setImmediate(resolve))
  }
  return { expired, purged }
}

/**
 * Sweeps once the app is ready and then every `intervalMs`, off the request path (a timer that does not keep the
 * process alive), one sweep at a time. A failed sweep (the store unreachable) is logged and tried again at the next
 * tick; a store this release may only read is left alone without a word, as the idempotency purge does.
 */
export function sweepHoldsEvery (app: FastifyInstance, options: HoldSweeperOptions): void {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<unknown> | null = null
  const sweep = (): void => {
    // A sweep slower than the interval is not overtaken by the next one.
    if (running !== null) return
    running = sweepHolds(options).catch((error: unknown) => {
      if (!(error instanceof StoreReadOnlyError)) app.log.warn({ err: error }, 'could not sweep expired holds; trying again at the next tick')
    }).finally(() => { running = null })
  }
  app.addHook('onReady', async () => {
    sweep()
    timer = setInterval(sweep, options.intervalMs ?? HOLD_SWEEP_INTERVAL_MS).unref()
  })
  app.addHook('onClose', async () => {
    clearInterval(timer)
    await running
  })
}
