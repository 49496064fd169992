// Preloaded into the load run's servers (node --expose-gc --import): a full garbage collection every
// LOAD_GC_INTERVAL_MS (5 s), so that petstore_heap_after_gc_bytes reads the live heap at a steady pace however
// long V8 would let garbage pile up on its own. A leak check wants that reading; production has no such timer.
import { setInterval } from 'node:timers'

const interval = Number(process.env.LOAD_GC_INTERVAL_MS ?? 5000)
if (typeof globalThis.gc === 'function' && interval > 0) setInterval(() => globalThis.gc(), interval).unref()
