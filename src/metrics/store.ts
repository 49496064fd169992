/**
 * Store latency without touching the store implementations: a Proxy that times every method call returning
 * a promise or an async iteration (petstore_store_operation_duration_seconds, petstore_store_errors_total),
 * labelled by the method's name. Everything else — `kind`, `poolStats()`, any synchronous member — passes through unchanged.
 */
import type { Store } from '../store/types.js'
import type { Metrics, StoreSeries } from './index.js'

type AnyFunction = (...args: unknown[]) => unknown

function isPromise (value: unknown): value is Promise<unknown> {
  return value instanceof Promise
}

function isAsyncIterable (value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value
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
 * The store, timed. Methods run with the real store as `this` (its #private fields are not reachable through
 * a proxy), and the promise they return is handed back as it is: timing adds no tick to the caller's await.
 * The method is looked up on every access, so a method replaced on the store (as tests do) is the one called.
 */
export function instrumentStore<S extends Store> (store: S, metrics: Metrics): S {
  const wrappers = new WeakMap<AnyFunction, AnyFunction>()
  return new Proxy(store, {
    get (target, property, _receiver) {
      const value: unknown = Reflect.get(target, property, target)
      if (typeof value !== 'function' || typeof property !== 'string' || property === 'constructor') return value
      const method = value as AnyFunction
      let wrapper = wrappers.get(method)
      if (wrapper === undefined) {
        let series: StoreSeries | undefined
        wrapper = (...args: unknown[]): unknown => {
          const started = performance.now()
          const result = method.apply(target, args)
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
        wrappers.set(method, wrapper)
      }
      return wrapper
    }
  })
}
