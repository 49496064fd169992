/**
 * If-Match (RFC 9110 section 13.1.1): `*` or a list of entity-tags, compared strongly: a weak tag never
 * matches. An entity-tag's opaque part may hold commas, so the list is scanned tag by tag, not split.
 */
import { AppError } from '../errors.js'

const ENTITY_TAG = /[ \t]*(W\/)?("[\x21\x23-\x7E\x80-\xFF]*")[ \t]*(?:,|$)/y

/**
 * The strong tags an If-Match header lists; `any` for `*`; null without the header. A header that is not
 * `*` or a list of entity-tags is a 400: a client that means a precondition must learn that it sent none.
 */
export function ifMatchTags (header: string | undefined): { any: true } | { tags: string[] } | null {
  if (header === undefined) return null
  if (header.trim() === '*') return { any: true }
  const invalid = new AppError('invalid_request', 'If-Match must be * or a list of entity tags, e.g. If-Match: "r3".')
  if (header.trim() === '') throw invalid
  const tags: string[] = []
  ENTITY_TAG.lastIndex = 0
  while (ENTITY_TAG.lastIndex < header.length) {
    const match = ENTITY_TAG.exec(header)
    if (match === null) throw invalid
    if (match[1] === undefined) tags.push(match[2] as string)
  }
  return { tags }
}
