/**
 * A span per store call, in traced processes only (the app wraps its store with traceStore when tracingOn()): like
 * the store's metrics (src/metrics/store.ts), a Proxy that leaves the store implementations alone. A call's span is
 * active while it runs, so the PostgreSQL store's queries (the pg instrumentation) and the SQLite store's group commit
 * (./commits.ts) are its children. Each call is a span only inside a traced request: background work makes no traces.
 */
import type { Span } from '@opentelemetry/api'
import { isAsyncIterable, wrapStore } from '../store/observe.js'
import type { Store } from '../store/store.js'
import { endSpan, SpanKind, startSpan, within } from './spans.js'

/** The store's synchronous members: answered in memory (or by a pragma), not calls worth a span. */
const SYNCHRONOUS: ReadonlySet<string> = new Set<keyof Store | keyof Store['stock']>(['poolStats', 'changedElsewhere'])

/** An iteration (a paged listing) as one span, from the call to its last page, each page read with the span active. */
async function * traced<T> (iterable: AsyncIterable<T>, span: Span): AsyncGenerator<T> {
  const iterator = within(span, () => iterable[Symbol.asyncIterator]())
  let failure: unknown
  try {
    for (;;) {
      const step = await within(span, () => iterator.next())
      if (step.done === true) return
      yield step.value
    }
  } catch (error) {
    failure = error ?? new Error('the iteration failed')
    throw error
  } finally {
    // A reader that stops early (or fails) lets the store close what it holds (a read transaction, a cursor).
    if (failure !== undefined) await iterator.return?.().catch(() => {})
    else await iterator.return?.()
    endSpan(span, failure)
  }
}

/**
 * The store, traced. The embedded SQLite store's spans are database client spans (`db.system.name` sqlite): nothing
 * else shows its statements. The PostgreSQL store's are internal: its queries are the pg instrumentation's client
 * spans, under them.
 */
export function traceStore<S extends Store> (store: S): S {
  const embedded = store.kind === 'sqlite'
  const kind = embedded ? SpanKind.CLIENT : SpanKind.INTERNAL
  return wrapStore(store, (property, call) => {
    if (SYNCHRONOUS.has(property)) return (...args) => call(args)
    const name = `store ${property}`
    const attributes = embedded ? { 'petstore.store.operation': property, 'db.system.name': 'sqlite' } : { 'petstore.store.operation': property }
    return (...args) => {
      const span = startSpan(name, kind, attributes)
      if (span === null) return call(args)
      let result: unknown
      try {
        result = within(span, () => call(args))
      } catch (error) {
        endSpan(span, error)
        throw error
      }
      if (result instanceof Promise) {
        result.then(() => { endSpan(span) }, (error: unknown) => { endSpan(span, error ?? new Error('rejected')) })
        return result
      }
      if (isAsyncIterable(result)) return traced(result, span)
      endSpan(span)
      return result
    }
  })
}
