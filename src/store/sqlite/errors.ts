/** How the SQLite store reports a database that cannot serve right now: StoreUnavailableError (503 at the edge). */
import { StoreUnavailableError } from '../../errors.js'

// SQLite conditions that mean "the database cannot serve right now", not "this request is wrong".
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|CANTOPEN|IOERR|FULL|READONLY|NOMEM|PROTOCOL)/

/** A locked, missing or failing database file as StoreUnavailableError; other errors as they are. */
export function translate (error: unknown): unknown {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' && UNAVAILABLE.test(code)
    ? new StoreUnavailableError(`SQLite is unavailable (${code})`, { cause: error })
    : error
}

/** Runs statements, reporting a locked, missing or failing database file as StoreUnavailableError. */
export function guard<T> (work: () => T): T {
  try {
    return work()
  } catch (error) {
    throw translate(error)
  }
}
