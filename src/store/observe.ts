/**
 * A store with every method of every area wrapped, for what observes its calls (src/metrics/store.ts,
 * src/tracing/store.ts): the implementations stay as they are. An area is any member of the store that is an object;
 * the store's own methods (ping, close, poolStats) are wrapped too. Methods run with the real area as `this` (its
 * #private fields are not reachable through a proxy); each method's wrapper is made once. The method is looked up on
 * every access, so a method replaced on an area (as tests do) is the one wrapped and called.
 */
import type { Store } from './store.js'

export type AnyFunction = (...args: unknown[]) => unknown

/** Wraps one method: gets its name (the operation: `setQuantity`, `ping`) and the call of the real one. */
export type Wrap = (operation: string, call: (args: unknown[]) => unknown) => AnyFunction

export function isAsyncIterable (value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value
}

/** `target` with each method seen through `wrap`; members that are objects through `nested` (the store's areas). */
function wrapMembers<T extends object> (target: T, wrap: Wrap, nested?: (area: object) => object): T {
  const wrappers = new WeakMap<AnyFunction, AnyFunction>()
  return new Proxy(target, {
    get (real, property) {
      const value: unknown = Reflect.get(real, property, real)
      if (typeof property !== 'string') return value
      if (nested !== undefined && typeof value === 'object' && value !== null) return nested(value)
      if (typeof value !== 'function' || property === 'constructor') return value
      const method = value as AnyFunction
      let wrapper = wrappers.get(method)
      if (wrapper === undefined) {
        wrapper = wrap(property, (args) => method.apply(real, args))
        wrappers.set(method, wrapper)
      }
      return wrapper
    }
  })
}

/** `store` seen through `wrap`: its areas' methods and its own. */
export function wrapStore<S extends Store> (store: S, wrap: Wrap): S {
  const areas = new WeakMap<object, object>()
  return wrapMembers(store, wrap, (area) => {
    let wrapped = areas.get(area)
    if (wrapped === undefined) {
      wrapped = wrapMembers(area, wrap)
      areas.set(area, wrapped)
    }
    return wrapped
  })
}
