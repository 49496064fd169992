/**
 * The live heap: V8's heap in use right after the last major (mark-compact) collection. The heap's own size is a
 * saw-tooth that grows between collections and drops at each, so two samples of it (or of RSS) say nothing about
 * a leak; what a major collection leaves behind is what the process really holds, and its trend over a run does.
 */
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks'
import { getHeapStatistics } from 'node:v8'
import { Gauge, type Registry } from 'prom-client'

/** Registers `petstore_heap_after_gc_bytes` (0 until the first major collection) and keeps it current. */
export function watchHeapAfterGc (registry: Registry): void {
  const gauge = new Gauge({
    name: 'petstore_heap_after_gc_bytes',
    help: 'V8 heap in use right after the last major (mark-compact) garbage collection: the live heap, whose trend shows ' +
      'a leak; 0 until the first major collection.',
    registers: [registry]
  })
  // Entries arrive shortly after their collection, batched; the heap read then is the collection's result plus
  // what was allocated since, which is small next to a heap of tens of megabytes.
  const observer = new PerformanceObserver((list) => {
    if (list.getEntries().some(isMajor)) gauge.set(getHeapStatistics().used_heap_size)
  })
  // It does not hold the process open: a stopped server exits with it still registered.
  observer.observe({ entryTypes: ['gc'] })
}

function isMajor (entry: PerformanceEntry): boolean {
  return (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR
}
