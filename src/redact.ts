/**
 * The one filter for secrets in text the service writes about requests: log lines (src/logger.ts), trace spans
 * (src/tracing/redact.ts) and error messages (src/errors.ts). What it knows by shape:
 * - API keys: a key prefix (`psk_live_`, `psk_test_`, underscores also as `%5F`) and what follows it;
 * - webhook signing secrets: `whsec_` and what follows it;
 * - webhook signatures: `v1,` and a base64 HMAC (Standard Webhooks);
 * - credentials after an HTTP authentication scheme: `Bearer <token>`, `Basic <credentials>`.
 * Each keeps its marker and loses the rest (`psk_live_[redacted]`, `Bearer [redacted]`), so that a reader still sees
 * what was there. Text without such a marker cannot be told from any other text: a secret's bare random part is not
 * recognized, which is why error messages do not echo what a client sent (docs/api.md, "Errors"). loggedUrl is the URL
 * a log line or a span shows, through the same filter.
 */
import { KEY_PREFIXES } from './model.js'

/** A key prefix as text may carry it: its underscores as they are or percent-encoded (%5F), letters in any case. */
const PREFIX_TEXT = Object.values(KEY_PREFIXES).map((prefix) => prefix.replace(/_/g, '(?:_|%5[Ff])')).join('|')
const KEY_TEXT = new RegExp(`(${PREFIX_TEXT})[A-Za-z0-9_%-]+`, 'gi')
const MENTION = new RegExp(PREFIX_TEXT, 'i')

/** True when the text holds something that looks like an API key (any environment's prefix, plain or encoded). */
export function mentionsKey (text: string): boolean {
  return MENTION.test(text)
}

/** The text with every key-shaped run (a key prefix and what follows it) replaced by the prefix and [redacted]. */
export function redactKeys (text: string): string {
  return mentionsKey(text) ? text.replace(KEY_TEXT, '$1[redacted]') : text
}

/** Any marker, for the fast path: most text holds none and is returned as it is after one test. */
const MARKER = /psk(?:_|%5f)(?:live|test)(?:_|%5f)|whsec(?:_|%5f)|v1,[A-Za-z0-9+/=]|\b(?:bearer|basic)\s/i

const SECRET = /(whsec(?:_|%5[Ff]))[A-Za-z0-9+/=_%-]+/gi
const SIGNATURE = /\bv1,[A-Za-z0-9+/=]{16,}/g
// Credentials are token68 (RFC 9110 section 11.2) or text up to the next space; 8 characters or more, so that a
// placeholder such as `Bearer <key>` in a message stays as it is.
const CREDENTIALS = /\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=%-]{8,}/gi

/** True when the text holds something a secret would start with (a key prefix, `whsec_`, `v1,`, `Bearer `). */
export function mentionsSecret (text: string): boolean {
  return MARKER.test(text)
}

/** The text with every secret it holds replaced by its marker and `[redacted]`; the text itself when it holds none. */
export function redactSecrets (text: string): string {
  if (!MARKER.test(text)) return text
  return redactKeys(text.replace(CREDENTIALS, '$1$2[redacted]'))
    .replace(SECRET, '$1[redacted]')
    .replace(SIGNATURE, 'v1,[redacted]')
}

/** How much of a name a client chose an error message may show. */
const EXCERPT_LENGTH = 40

/**
 * A name a client chose (a JSON member's, say) as an error message may show it: secrets redacted, then cut to 40
 * characters. Values are never shown this way: a message names the field and the rule instead.
 */
export function excerpt (text: string): string {
  const redacted = redactSecrets(text)
  return redacted.length > EXCERPT_LENGTH ? `${redacted.slice(0, EXCERPT_LENGTH)}...` : redacted
}

/**
 * The text with its percent-escapes of ASCII characters decoded, again and again (a double-encoded key is a key
 * too), escape by escape: a malformed or non-ASCII escape elsewhere leaves the rest decoded (decodeURIComponent
 * would give up on the whole text). API keys are ASCII, so this is all a key needs to show.
 */
export function decoded (text: string): string {
  if (!text.includes('%')) return text
  let current = text
  for (let round = 0; round < 8; round++) {
    const next = current.replace(/%([0-7][0-9A-Fa-f])/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    if (next === current) return current
    current = next
  }
  return current
}

/**
 * The URL as the access log and the spans show it: the path, and the query with every value replaced (a client may
 * put anything in a query string, its API key included). A path that decodes to key-shaped text is shown decoded and
 * redacted, so a percent-encoded key cannot slip past the key filter either.
 */
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
