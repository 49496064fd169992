/**
 * The one filter for secrets in text the service writes about requests: log lines (src/logger.ts), trace spans
 * (src/tracing/redact.ts) and error messages (src/errors.ts). What it knows by shape:
 * - API keys: a key prefix (`psk_live_`, `psk_test_`, underscores also as `%5F`) and what follows it (src/access/keys.ts);
 * - webhook signing secrets: `whsec_` and what follows it;
 * - webhook signatures: `v1,` and a base64 HMAC (Standard Webhooks);
 * - credentials after an HTTP authentication scheme: `Bearer <token>`, `Basic <credentials>`.
 * Each keeps its marker and loses the rest (`psk_live_[redacted]`, `Bearer [redacted]`), so that a reader still sees
 * what was there. Text without such a marker cannot be told from any other text: a secret's bare random part is not
 * recognized, which is why error messages do not echo what a client sent (docs/api.md, "Errors").
 */
import { redactKeys } from './access/keys.js'

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
