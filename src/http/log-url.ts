/**
 * The URL as the access log shows it: the path, and the query with every value replaced (a client may put
 * anything in a query string, its API key included). A path that decodes to key-shaped text is logged decoded
 * and redacted, so a percent-encoded key cannot slip past the log's key filter either.
 */
import { mentionsKey, redactKeys } from '../access/keys.js'

function decoded (text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}

export function loggedUrl (url: string): string {
  const mark = url.indexOf('?')
  const rawPath = mark === -1 ? url : url.slice(0, mark)
  const path = mentionsKey(decoded(rawPath)) ? redactKeys(decoded(rawPath)) : rawPath
  if (mark === -1) return path
  const names = url.slice(mark + 1).split('&').filter((part) => part !== '').map((part) => {
    const name = part.split('=', 1)[0] as string
    return `${mentionsKey(decoded(name)) ? '[redacted]' : name}=[redacted]`
  })
  return `${path}?${names.join('&')}`
}
