import { AppError } from '../errors.js'
import { parseInt64 } from '../int64.js'

/** A cursor this service did not issue (or one that was changed). */
export class InvalidCursorError extends AppError {
  constructor () {
    super('invalid_request', 'The cursor is not valid.')
  }
}

/**
 * Cursors are opaque to clients: base64url of a versioned "after this id" marker, the version naming the listing
 * (`o1:` orders, `i1:` inventory), so a cursor of one listing is refused by another.
 */
export function encodeCursor (prefix: string, afterId: bigint): string {
  return Buffer.from(prefix + afterId.toString()).toString('base64url')
}

/** A cursor of two int64 parts (the change feed's place: its order, then the id). */
export function encodePairCursor (prefix: string, first: bigint, second: bigint): string {
  return Buffer.from(`${prefix}${first}.${second}`).toString('base64url')
}

/** The two parts a cursor of this listing holds; throws InvalidCursorError for anything else. */
export function decodePairCursor (prefix: string, cursor: string): [bigint, bigint] {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const [first, second, ...rest] = text.startsWith(prefix) ? text.slice(prefix.length).split('.') : []
  const a = first === undefined ? null : parseInt64(first)
  const b = second === undefined ? null : parseInt64(second)
  if (a === null || b === null || rest.length > 0 || encodePairCursor(prefix, a, b) !== cursor) throw new InvalidCursorError()
  return [a, b]
}

/** The id a cursor of this listing points after; throws InvalidCursorError for anything else. */
export function decodeCursor (prefix: string, cursor: string): bigint {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const id = text.startsWith(prefix) ? parseInt64(text.slice(prefix.length)) : null
  if (id === null || encodeCursor(prefix, id) !== cursor) {
    throw new InvalidCursorError()
  }
  return id
}

/**
 * A cursor of an instant and a text id (the holds' place: created at, then id), for listings ordered by when things
 * were made; the id must not contain a dot.
 */
export function encodeStampCursor (prefix: string, at: Date, id: string): string {
  return Buffer.from(`${prefix}${at.getTime()}.${id}`).toString('base64url')
}

/** The instant and id a cursor of this listing holds, the id checked by `idPattern`; throws InvalidCursorError otherwise. */
export function decodeStampCursor (prefix: string, cursor: string, idPattern: RegExp): { at: Date, id: string } {
  const text = Buffer.from(cursor, 'base64url').toString('utf8')
  const [ms, id, ...rest] = text.startsWith(prefix) ? text.slice(prefix.length).split('.') : []
  const at = ms !== undefined && /^[0-9]{1,15}$/.test(ms) ? new Date(Number(ms)) : null
  if (at === null || id === undefined || !idPattern.test(id) || rest.length > 0 || encodeStampCursor(prefix, at, id) !== cursor) throw new InvalidCursorError()
  return { at, id }
}
