/**
 * Following the service's links as a client must (RFC 8288, RFC 3986 section 5): a `Link` target, like a `Location`,
 * is a URI reference resolved against the URL that was requested, never text to append to an origin.
 */
import assert from 'node:assert/strict'

/** Where inject() requests are taken to be made: only the path and query matter to the app. */
const ORIGIN = 'http://petstore.test'

/** The target of the `rel="next"` link in a Link header, resolved against `requested`; null without a Link header. */
export function resolveNext (link: unknown, requested: string): URL | null {
  if (link === undefined) return null
  const match = /^<([^>]*)>; rel="next"$/.exec(String(link))
  assert.ok(match, `unexpected Link header ${String(link)}`)
  return new URL(match[1] as string, new URL(requested, ORIGIN))
}

/** As resolveNext, as the path and query inject() takes (for requests made at the app's own paths). */
export function nextPath (link: unknown, requested: string): string | null {
  const next = resolveNext(link, requested)
  if (next === null) return null
  assert.equal(next.origin, ORIGIN, 'a relative link stays on the server that was asked')
  return next.pathname + next.search
}
