/** What the CLI's commands share: argument parsing, usage errors, and running a command on the configured store. */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import type { Config } from '../config.js'
import { openStore, readyForUse } from '../store/open.js'
import type { Store } from '../store/store.js'

/** Wrong arguments: the CLI says what is wrong, points to the help, and exits 2. */
export class UsageError extends Error {}

export type Values = Record<string, string | boolean | undefined>

/** Parses a command's arguments strictly: known options only, each at most once, exactly `positionals` arguments. */
export function parse (args: string[], options: ParseArgsConfig['options'], positionals: number): { values: Values, positionals: string[] } {
  let parsed
  try {
    parsed = parseArgs({ args, options, allowPositionals: positionals > 0, strict: true, tokens: true })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  // parseArgs keeps the last of a repeated option: `--plan free --plan pro` would quietly mean pro.
  const seen = new Set<string>()
  for (const token of parsed.tokens as ReadonlyArray<{ kind: string, name?: string }>) {
    if (token.kind !== 'option' || token.name === undefined) continue
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once`)
    seen.add(token.name)
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 0 ? 'this command takes no arguments' : `expected ${positionals} argument(s)`)
  }
  return { values: parsed.values as Values, positionals: parsed.positionals }
}

/** The largest value a counting flag (--per-minute, --per-day, --limit, --workers) takes. */
const MAX_FLAG_INTEGER = 1_000_000_000

export function positiveInteger (flag: string, text: string | boolean | undefined): number | null {
  if (text === undefined) return null
  if (typeof text !== 'string' || !/^[1-9][0-9]{0,9}$/.test(text) || Number(text) > MAX_FLAG_INTEGER) {
    throw new UsageError(`${flag} must be an integer from 1 to ${MAX_FLAG_INTEGER}`)
  }
  return Number(text)
}

/**
 * Runs `work` on the configured store. It never changes the schema of a store that has one (only `petstore
 * migrate` does): a store behind this release or ahead of it (for writes) is refused with a SchemaError.
 */
export async function withStore<T> (config: Config, access: 'read' | 'write', work: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(config)
  try {
    await readyForUse(store, access)
    return await work(store)
  } finally {
    await store.close()
  }
}
