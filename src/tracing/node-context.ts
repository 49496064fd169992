/**
 * Which AsyncLocalStorage this Node runs, for the SDK's context manager (AsyncLocalStorageContextManager) sits on it.
 * Node 24 and later keep the store in V8's AsyncContextFrame: a context costs only the requests that set one. Node 22
 * keeps it on async hooks unless started with --experimental-async-context-frame: from the first `run` on (the first
 * sampled request's context), an init hook runs for every promise and async resource the process makes, for as long
 * as it lives, traced request or not (docs/adr/0046-tracing-on-node-22-wants-async-context-frame.md).
 */
import { AsyncLocalStorage } from 'node:async_hooks'

/** True when AsyncLocalStorage propagates its store through async hooks (Node 22 without the frame flag). */
export function contextOnAsyncHooks (): boolean {
  // The hooks implementation propagates the store to each new resource through this method; the frame one has none.
  return typeof (AsyncLocalStorage.prototype as { _propagate?: unknown })._propagate === 'function'
}

/** What a traced process on async hooks says as it starts: the cost, and the flag that removes it. */
export const ASYNC_HOOKS_WARNING = 'Tracing on Node.js 22 without --experimental-async-context-frame: once a request is sampled, ' +
  'every promise of every request pays an async hook. Set NODE_OPTIONS=--experimental-async-context-frame, or run Node.js 24 or later.'
