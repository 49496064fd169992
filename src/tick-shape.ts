/**
 * Keeps V8's fast path for process.nextTick for the life of the process.
 *
 * Node makes a record for every nextTick with an object literal of computed keys (`{ [async_id_symbol]: ...,
 * [trigger_async_id_symbol]: ..., callback, args }`), and V8 remembers, at each key, the hidden class (map) the record
 * had before it. That memory holds the maps weakly, and so does the chain of maps itself: a full garbage collection at
 * an instant when no record is alive (between two bursts of ticks, which on an idle or starting server is most of the
 * time) frees the maps after the first key. The next record makes them again, new ones; V8 sees another map at the
 * second key and marks every key after the first megamorphic for good. From then on each nextTick defines four of its
 * keys through the runtime (Runtime_DefineKeyedOwnPropertyInLiteral, a transition search and a map migration each)
 * instead of the few instructions of the optimized code: about 0.3 µs a tick, and a GET makes seven. Whether that
 * collection happens before the server takes load is a matter of timing, which is why the GET profile was bimodal
 * (docs/adr/0045-keep-the-tick-record-shape.md).
 *
 * Holding one record keeps its map, and through the map's back pointers the whole chain, alive: the maps are never
 * made again and the keys stay monomorphic. One small object for the life of the process.
 */
import { executionAsyncResource } from 'node:async_hooks'

let kept: object | null = null

/**
 * Keeps the record of the next tick, as it is while its callback runs (Node's execution resource of a tick is its
 * record). Call first thing in the process, before the heap has grown enough for a full collection; more calls do
 * nothing.
 */
export function keepTickShape (): void {
  if (kept !== null) return
  process.nextTick(() => { kept ??= executionAsyncResource() })
}

/** The record kept (null before the first tick ran). */
export function keptTickRecord (): object | null {
  return kept
}
