/**
 * Tests wait for the event they assert (docs/adr/0024-tests-wait-for-the-event-they-assert.md): a child's log
 * line, a stream's event, a limiter back on Redis. A fixed sleep followed by an assertion that something happened
 * races with the code under test, and loses on a loaded machine. These helpers poll (or listen) until the condition
 * holds and fail, saying what was awaited, only after a deadline generous enough for a machine at load 6: a deadline
 * is not a measurement, a test that means to bound a duration measures it and asserts on it separately.
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'

/** How long a test waits for an event that should come at once on a quiet machine. */
export const WAIT_TIMEOUT_MS = 30_000

export interface WaitOptions {
  /** The deadline; WAIT_TIMEOUT_MS by default. */
  timeoutMs?: number
  /** The pause between two checks; 20 ms by default. */
  intervalMs?: number
  /** What the failure message adds after the deadline (the state seen last, output so far). */
  detail?: () => string
}

/** Resolves once `condition` holds (checked at once, then every `intervalMs`); fails after the deadline. */
export async function waitFor (what: string, condition: () => boolean | Promise<boolean>, options: WaitOptions = {}): Promise<void> {
  const timeoutMs = options.timeoutMs ?? WAIT_TIMEOUT_MS
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await condition()) return
    if (Date.now() > deadline) {
      assert.fail(`${what}: not seen within ${timeoutMs} ms${options.detail === undefined ? '' : `; ${options.detail()}`}`)
    }
    await sleep(options.intervalMs ?? 20)
  }
}

/** Rejects when `promise` does not settle within `ms`. */
export async function within<T> (ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}
