import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Waits, if needed, so that a burst of requests does not straddle a UTC minute boundary: the per-minute limits count
 * in fixed UTC minutes, so a burst across one would see two minutes' quota. `latestSecond`: the last second into the
 * minute at which a burst may start.
 */
export async function awayFromMinuteBoundary (latestSecond = 48): Promise<void> {
  const intoMinute = (Date.now() / 1000) % 60
  if (intoMinute > latestSecond) await sleep((61 - intoMinute) * 1000)
}
