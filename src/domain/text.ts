/**
 * Free text that operators' terminals print (stock-ledger notes, imported names, key names) must not carry
 * what a terminal interprets: C0 and C1 control characters (escape sequences start with ESC or the C1 CSI,
 * U+009B), DEL, the Unicode line and paragraph separators, and the bidirectional embeddings, overrides and
 * isolates that reorder what a reader sees (the "Trojan Source" characters). Nor an unpaired surrogate (`"\ud800"`
 * in JSON): it is no character at all, and storing it as UTF-8 would replace it with U+FFFD, changing the text.
 * (The patterns are compiled with the u flag, so a surrogate pair, one character, is not refused.)
 */
const UNSAFE = '\\u0000-\\u001F\\u007F-\\u009F\\u2028\\u2029\\u202A-\\u202E\\u2066-\\u2069\\uD800-\\uDFFF'

/** A JSON Schema / Ajv pattern (Ajv compiles patterns with the u flag) that matches text free of those characters. */
export const SAFE_TEXT_PATTERN = `^[^${UNSAFE}]*$`

const SAFE_TEXT = new RegExp(SAFE_TEXT_PATTERN, 'u')

/** True when the text holds none of the characters above. */
export function isSafeText (text: string): boolean {
  return SAFE_TEXT.test(text)
}

/** What the rule refuses, in words, for error messages. */
export const SAFE_TEXT_RULE = 'no control characters, line separators or bidirectional formatting characters, and no unpaired surrogates'

const UNSAFE_CHARACTER = new RegExp(`[${UNSAFE}]`, 'gu')

/**
 * Text made safe to print: each character the rule above refuses is shown as an escape (`\u{9b}`). For text
 * stored before the rule held (ledger notes of earlier releases), which is printed all the same.
 */
export function printable (text: string): string {
  return text.replace(UNSAFE_CHARACTER, (c) => `\\u{${(c.codePointAt(0) as number).toString(16)}}`)
}
