/**
 * Store latency without touching the store implementations: a Proxy over each area that times every method call
 * returning a promise or an async iteration (petstore_store_operation_duration_seconds, petstore_store_errors_total),
 * labelled by the method's name. Everything else — `kind`, `poolStats()`, any synchronous member — passes through unchanged.
 */
import { isAsyncIterable, wrapStore } from '../store/observe.js'
import type { Store } from '../store/store.js'
import type { Metrics, StoreSeries } from './index.js'

function isPromise (value: unknown): value is Promise<unknown> {
  return value instanceof Promise
}

/** An iteration (a paged listing) timed as one operation, from the call to its last page. */
async function * timed<T> (iterable: AsyncIterable<T>, started: number, series: () => StoreSeries): AsyncGenerator<T> {
  try {
    yield * iterable
  } catch (error) {
    series().errors.inc()
    throw error
  } finally {
    series().duration.observe((performance.now() - started) / 1000)
  }
}

/**
 * The store, timed (src/store/observe.ts): the promise a method returns is handed back as it is, so timing adds no tick
 * to the caller's await.
 */
export function instrumentStore<S extends Store> (store: S, metrics: Metrics): S {
  return wrapStore(store, (property, call) => {
    let series: StoreSeries | undefined
    return (...args) => {
      const started = performance.now()
      const result = call(args)
      if (isAsyncIterable(result) && !isPromise(result)) return timed(result, started, () => (series ??= metrics.storeOperation(property)))
      if (!isPromise(result)) return result
      // Bound on the first asynchronous call: synchronous members never get a series.
      series ??= metrics.storeOperation(property)
      const bound = series
      result.then(() => {
        bound.duration.observe((performance.now() - started) / 1000)
      }, () => {
        bound.duration.observe((performance.now() - started) / 1000)
        bound.errors.inc()
      })
      return result
    }
  })
}
