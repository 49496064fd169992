/** Where a worker thread's module is, beside the module that starts it. */

/**
 * The module `path` (relative, without its extension) beside the module at `from` (its import.meta.url): compiled
 * JavaScript, or TypeScript when run from the sources (tests).
 */
export function workerModule (from: string, path: string): URL {
  return new URL(`${path}${from.endsWith('.ts') ? '.ts' : '.js'}`, from)
}
