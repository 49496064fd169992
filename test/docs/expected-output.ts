/**
 * The rule by which a page's expected output (comment lines after a command) is compared with what the command printed.
 *
 * - JSON: when the expected text starts with `{` or `[` and parses as JSON (once its ellipses are read), the output must
 *   be JSON too, compared by structure: members in any order, numbers by their digits (ids above 2^53 exactly).
 *   `...` stands for what the page leaves out: an array item `...` for any number of items, an object member `...`
 *   for any further members, a value `...` for any value, and `...` inside a string for any characters.
 * - Text: otherwise line by line, after removing carriage returns and trailing white space; a line `...` stands for any
 *   number of lines, `...` within a line for any characters, and a line that is JSON is compared as above.
 */
import { isLosslessNumber, parse } from 'lossless-json'

/** How an ellipsis reads once the expected JSON is parsed: a string no output of the service contains. */
const ELLIPSIS = '\u0000...'
const ELLIPSIS_JSON = '"\\u0000..."'

/** `null` when the output shows what the page says; otherwise why not. */
export function mismatch (expected: string, actual: string): string | null {
  const wanted = expected.trimEnd()
  const json = expectedJson(wanted)
  if (json !== undefined) {
    const got = parsedJson(actual.trim())
    if (got === undefined) return 'the page shows JSON, the command printed something else'
    return jsonMismatch(json, got, '$')
  }
  const lines = textLines(actual)
  const wantedLines = textLines(wanted)
  const found = sequence(wantedLines, lines, (line) => line === '...', lineMatches)
  return found ? null : 'the lines differ'
}

function textLines (text: string): string[] {
  const lines = text.replaceAll('\r', '').split('\n').map((line) => line.trimEnd())
  while (lines.length > 0 && lines.at(-1) === '') lines.pop()
  return lines
}

function lineMatches (wanted: string, line: string): boolean {
  const json = expectedJson(wanted)
  if (json !== undefined) {
    const got = parsedJson(line)
    return got !== undefined && jsonMismatch(json, got, '$') === null
  }
  return wildcard(wanted).test(line)
}

/** `...` as any characters; everything else literally. */
function wildcard (text: string): RegExp {
  return new RegExp('^' + text.split('...').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$', 's')
}

function parsedJson (text: string): unknown {
  try {
    return parse(text)
  } catch {
    return undefined
  }
}

/** The expected text as JSON with its ellipses read, or undefined when it is not JSON. */
function expectedJson (text: string): unknown {
  const start = text.trimStart()[0]
  if (start !== '{' && start !== '[') return undefined
  return parsedJson(withEllipses(text))
}

/** Replaces each `...` outside strings by a marker JSON can parse: a member in key position, a value elsewhere. */
function withEllipses (text: string): string {
  let out = ''
  const open: string[] = []
  let keyNext = false
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string
    if (inString) {
      out += c
      if (c === '\\') out += text[++i] ?? ''
      else if (c === '"') inString = false
      continue
    }
    if (text.startsWith('...', i)) {
      out += open.at(-1) === '{' && keyNext ? `${ELLIPSIS_JSON}:null` : ELLIPSIS_JSON
      i += 2
      continue
    }
    if (c === '"') inString = true
    else if (c === '{' || c === '[') {
      open.push(c)
      keyNext = c === '{'
    } else if (c === '}' || c === ']') open.pop()
    else if (c === ':') keyNext = false
    else if (c === ',') keyNext = open.at(-1) === '{'
    out += c
  }
  return out
}

function jsonMismatch (wanted: unknown, got: unknown, path: string): string | null {
  if (wanted === ELLIPSIS) return null
  if (typeof wanted === 'string') {
    const same = typeof got === 'string' && (wanted.includes('...') ? wildcard(wanted).test(got) : wanted === got)
    return same ? null : `${path}: the page shows ${JSON.stringify(wanted)}, the command printed ${show(got)}`
  }
  if (isLosslessNumber(wanted)) {
    return isLosslessNumber(got) && got.value === wanted.value ? null : `${path}: the page shows ${wanted.value}, the command printed ${show(got)}`
  }
  if (Array.isArray(wanted)) {
    if (!Array.isArray(got)) return `${path}: the page shows an array, the command printed ${show(got)}`
    const same = sequence(wanted, got, (item) => item === ELLIPSIS, (w, g) => jsonMismatch(w, g, path) === null)
    if (same) return null
    // Name the first item that differs when the lengths allow it; otherwise the array as a whole.
    for (let i = 0; i < Math.min(wanted.length, got.length) && wanted[i] !== ELLIPSIS; i++) {
      const reason = jsonMismatch(wanted[i], got[i], `${path}[${i}]`)
      if (reason !== null) return reason
    }
    return `${path}: the page shows ${wanted.length} item(s)${wanted.includes(ELLIPSIS) ? ' and more' : ''}, the command printed ${got.length}`
  }
  if (wanted !== null && typeof wanted === 'object') {
    if (got === null || typeof got !== 'object' || Array.isArray(got) || isLosslessNumber(got)) {
      return `${path}: the page shows an object, the command printed ${show(got)}`
    }
    const members = got as Record<string, unknown>
    for (const [key, value] of Object.entries(wanted)) {
      if (key === ELLIPSIS) continue
      if (!(key in members)) return `${path}.${key}: the page shows it, the command printed no such member`
      const reason = jsonMismatch(value, members[key], `${path}.${key}`)
      if (reason !== null) return reason
    }
    if (!(ELLIPSIS in wanted)) {
      const extra = Object.keys(members).filter((key) => !(key in wanted))
      if (extra.length > 0) return `${path}: the command printed member(s) the page does not show: ${extra.join(', ')} (add ..., to leave them out)`
    }
    return null
  }
  return wanted === got ? null : `${path}: the page shows ${show(wanted)}, the command printed ${show(got)}`
}

function show (value: unknown): string {
  if (isLosslessNumber(value)) return value.value
  return JSON.stringify(value) ?? String(value)
}

/** Whether `got` is `wanted` item by item, where a wildcard item stands for any number of items (backtracking). */
function sequence<W, G> (wanted: W[], got: G[], isWildcard: (item: W) => boolean, same: (w: W, g: G) => boolean): boolean {
  const from = (i: number, j: number): boolean => {
    if (i === wanted.length) return j === got.length
    const item = wanted[i] as W
    if (isWildcard(item)) {
      for (let k = j; k <= got.length; k++) if (from(i + 1, k)) return true
      return false
    }
    return j < got.length && same(item, got[j] as G) && from(i + 1, j + 1)
  }
  return from(0, 0)
}
