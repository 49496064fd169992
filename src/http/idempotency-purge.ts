/** The purge of expired idempotency records (src/domain/idempotency.ts), run by the app in the background. */
import type { FastifyInstance } from 'fastify'
import { purgeExpiredKeys } from '../domain/idempotency.js'
import { StoreReadOnlyError } from '../errors.js'
import type { Store } from '../store/store.js'

/** How often expired idempotency records are deleted: a minute's worth at a time keeps each purge short. */
export const IDEMPOTENCY_PURGE_INTERVAL_MS = 60_000

/**
 * Deletes expired idempotency records once the app is ready and then every `intervalMs`, off the request path (a
 * timer that does not keep the process alive); a failed purge is logged and tried again at the next tick.
 */
export function purgeExpiredKeysEvery (app: FastifyInstance, store: Store, clock: () => number, intervalMs = IDEMPOTENCY_PURGE_INTERVAL_MS): void {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<unknown> = Promise.resolve()
  const purge = (): void => {
    running = purgeExpiredKeys(store, clock).catch((error: unknown) => {
      // A store a newer release migrated is not ours to clean (the instance serves reads only).
      if (!(error instanceof StoreReadOnlyError)) app.log.warn({ err: error }, 'could not purge expired idempotency keys')
    })
  }
  app.addHook('onReady', async () => {
    purge()
    timer = setInterval(purge, intervalMs).unref()
  })
  app.addHook('onClose', async () => {
    clearInterval(timer)
    await running
  })
}
