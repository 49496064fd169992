/**
 * A store with each method wrapped, for what observes its calls (src/metrics/store.ts, src/tracing/store.ts). Methods
 * run with the real store as `this` (its #private fields are not reachable through a proxy); each method's wrapper is
 * made once. The method is looked up on every access, so a method replaced on the store (as tests do) is the one
 * wrapped and called.
 */
export type AnyFunction = (...args: unknown[]) => unknown

export function isAsyncIterable (value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value
}

/** `store` seen through `wrap`, which gets each method's name and the method bound to the real store. */
export function wrapMethods<S extends object> (store: S, wrap: (property: string, call: (args: unknown[]) => unknown) => AnyFunction): S {
  const wrappers = new WeakMap<AnyFunction, AnyFunction>()
  return new Proxy(store, {
    get (target, property, _receiver) {
      const value: unknown = Reflect.get(target, property, target)
      if (typeof value !== 'function' || typeof property !== 'string' || property === 'constructor') return value
      const method = value as AnyFunction
      let wrapper = wrappers.get(method)
      if (wrapper === undefined) {
        wrapper = wrap(property, (args) => method.apply(target, args))
        wrappers.set(method, wrapper)
      }
      return wrapper
    }
  })
}
