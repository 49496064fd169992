/**
 * Conditional request headers (RFC 9110 section 13.1): If-Match and If-None-Match are `*` or a list of
 * entity-tags. An entity-tag's opaque part may hold commas, so the list is scanned tag by tag, not split.
 */
import { AppError } from '../errors.js'
import { isInt64 } from '../int64.js'

const ENTITY_TAG = /[ \t]*(W\/)?("[\x21\x23-\x7E\x80-\xFF]*")[ \t]*(?:,|$)/y

interface EntityTag {
  weak: boolean
  /** The quoted opaque part, quotes included: what weak and strong comparison compare. */
  opaque: string
}

/** The tags of a conditional header; `any` for `*`; null when the header is neither. */
function entityTags (header: string): { any: true } | { tags: EntityTag[] } | null {
  if (header.trim() === '*') return { any: true }
  if (header.trim() === '') return null
  const tags: EntityTag[] = []
  ENTITY_TAG.lastIndex = 0
  while (ENTITY_TAG.lastIndex < header.length) {
    const match = ENTITY_TAG.exec(header)
    if (match === null) return null
    tags.push({ weak: match[1] !== undefined, opaque: match[2] as string })
  }
  return { tags }
}

/**
 * The strong tags an If-Match header lists (If-Match compares strongly: a weak tag never matches); `any` for
 * `*`; null without the header. A header that is not `*` or a list of entity-tags is a 400: a client that
 * means a precondition must learn that it sent none.
 */
export function ifMatchTags (header: string | undefined): { any: true } | { tags: string[] } | null {
  if (header === undefined) return null
  const list = entityTags(header)
  if (list === null) throw new AppError('invalid_request', 'If-Match must be * or a list of entity tags, e.g. If-Match: "r3".')
  if ('any' in list) return list
  return { tags: list.tags.filter((tag) => !tag.weak).map((tag) => tag.opaque) }
}

/**
 * Whether If-None-Match names the current ETag (weak comparison, RFC 9110 section 13.1.2). A malformed header
 * names nothing: the full answer is sent.
 */
export function noneMatch (header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  return header.trim() === '*' || holdsTag(header, etag)
}

/**
 * Whether If-None-Match lists the current ETag itself (weak comparison): the client holds that representation.
 * `*` holds nothing: it matches any representation without the client having one.
 */
export function holdsTag (header: string, etag: string): boolean {
  const list = entityTags(header)
  if (list === null || 'any' in list) return false
  const opaque = etag.replace(/^W\//, '')
  return list.tags.some((tag) => tag.opaque === opaque)
}

/**
 * Whether If-None-Match names the current ETag as the one representation the client holds: a single tag, equal
 * (weak comparison). What makes a 304 free: a client revalidates the one copy it has; a list of tags could be a
 * list of guesses (every unchanged entry's tag is "r1"), and is counted like any request.
 */
export function holdsOnlyTag (header: string, etag: string): boolean {
  const list = entityTags(header)
  return list !== null && !('any' in list) && list.tags.length === 1 && holdsTag(header, etag)
}

/**
 * A stock entry's strong validator (its ETag): its revision, which grows with every change to what the entry
 * shows. Opaque to clients; `revisionOf` reads it back.
 */
export function entryTag (entry: { revision: bigint }): string {
  return `"r${entry.revision}"`
}

/**
 * The revision named by an entity tag; null for a tag this service never issued (it can match nothing): only the
 * exact spelling entryTag writes (no leading zeros) of a revision within int64, as a strong comparison requires.
 */
export function revisionOf (tag: string): bigint | null {
  const match = /^"r(0|[1-9][0-9]{0,18})"$/.exec(tag)
  if (match === null) return null
  const revision = BigInt(match[1] as string)
  return isInt64(revision) ? revision : null
}
