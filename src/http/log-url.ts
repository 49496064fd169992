/**
 * The URL as the access log shows it: the path, and the query with every value replaced (a client may put
 * anything in a query string, its API key included). A path that decodes to key-shaped text is logged decoded
 * and redacted, so a percent-encoded key cannot slip past the log's key filter either.
 */
import { mentionsKey, redactKeys } from '../access/keys.js'

/**
 * The text with its percent-escapes of ASCII characters decoded, again and again (a double-encoded key is a key
 * too), escape by escape: a malformed or non-ASCII escape elsewhere leaves the rest decoded (decodeURIComponent
 * would give up on the whole text). API keys are ASCII, so this is all a key needs to show.
 */
export function decoded (text: string): string {
  let current = text
  for (let round = 0; round < 8; round++) {
    const next = current.replace(/%([0-7][0-9A-Fa-f])/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    if (next === current) return current
    current = next
  }
  return current
}

export function loggedUrl (url: string): string {
  const mark = url.indexOf('?')
  // The path with the fragment and anything else before the query (a client may send them too).
  const rawPath = mark === -1 ? url : url.slice(0, mark)
  const path = mentionsKey(decoded(rawPath)) ? redactKeys(decoded(rawPath)) : rawPath
  if (mark === -1) return path
  const names = url.slice(mark + 1).split('&').filter((part) => part !== '').map((part) => {
    const name = part.split('=', 1)[0] as string
    return `${mentionsKey(decoded(name)) ? '[redacted]' : name}=[redacted]`
  })
  return `${path}?${names.join('&')}`
}
