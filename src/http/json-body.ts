/**
 * Request bodies are read by a strict JSON reader (RFC 8259) rather than JSON.parse, because JSON.parse
 * silently changes what a client sent: it rounds numbers (`4.9999999999999999` becomes 5, `1e-400` becomes 0)
 * and keeps the last of repeated members (`{"quantity":7,"quantity":2}` is 2, where another reader on the way,
 * a proxy or a log, may take 7). Here:
 * - an integer literal (`-?(0|[1-9][0-9]*)`) becomes a number, or a bigint beyond 2^53; any other number (a fraction or an exponent)
 *   becomes a NonIntegerNumber, which no integer schema accepts, so `quantity: 5.0` or `1e3` is a 400 naming
 *   the field;
 * - a member name repeated in an object, `__proto__`, or `constructor.prototype` is a 400;
 * - nesting deeper than MAX_DEPTH is a 400.
 */

import { NonIntegerNumber } from '../domain/validation.js'
import { excerpt } from '../redact.js'

export class JsonBodyError extends Error {}


/** No API body nests deeper than a few levels; this bounds the reader's recursion. */
const MAX_DEPTH = 32

const WHITESPACE = /[ \t\n\r]*/y
// A string literal: unescaped characters from U+0020 on (but '"' and '\'), or escapes. Control characters
// must be escaped in JSON, which is exactly what this refuses unescaped.
// eslint-disable-next-line no-control-regex
const STRING = /"(?:[^"\\\u0000-\u001F]|\\(?:["\\/bfnrt]|u[0-9A-Fa-f]{4}))*"/y
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y

/** Shows a member name in a message: quoted, control characters escaped, secrets redacted, at most 40 characters. */
function shown (name: string): string {
  return JSON.stringify(excerpt(name))
}

/** Parses a request body; throws JsonBodyError with a message safe to show the client. */
export function parseJsonBody (text: string): unknown {
  let at = 0

  function skip (): void {
    WHITESPACE.lastIndex = at
    WHITESPACE.exec(text)
    at = WHITESPACE.lastIndex
  }

  function fail (what: string): never {
    throw new JsonBodyError(`The request body is not valid JSON: ${what} at position ${at}.`)
  }

  function string (): string {
    STRING.lastIndex = at
    const match = STRING.exec(text)
    if (match === null) fail(text[at] === '"' ? 'a malformed string' : 'expected a string')
    at = STRING.lastIndex
    // The literal is valid JSON: JSON.parse decodes its escapes exactly.
    return JSON.parse(match[0]) as string
  }

  function value (depth: number): unknown {
    skip()
    const c = text[at]
    if (c === '{') return object(depth + 1)
    if (c === '[') return array(depth + 1)
    if (c === '"') return string()
    for (const [word, literal] of [['true', true], ['false', false], ['null', null]] as const) {
      if (text.startsWith(word, at)) {
        at += word.length
        return literal
      }
    }
    NUMBER.lastIndex = at
    const match = NUMBER.exec(text)
    if (match === null) fail(at >= text.length ? 'unexpected end' : 'unexpected character')
    at = NUMBER.lastIndex
    if (match[1] !== undefined || match[2] !== undefined) return new NonIntegerNumber(match[0])
    // An integer beyond 2^53 is kept exactly: an int64 field takes it as it is (src/http/validation.ts).
    const number = Number(match[0])
    return Number.isSafeInteger(number) ? number : BigInt(match[0])
  }

  function object (depth: number): Record<string, unknown> {
    if (depth > MAX_DEPTH) throw new JsonBodyError(`The request body nests deeper than ${MAX_DEPTH} levels.`)
    at++
    const result: Record<string, unknown> = {}
    skip()
    if (text[at] === '}') {
      at++
      return result
    }
    for (;;) {
      skip()
      const name = string()
      if (name === '__proto__') throw new JsonBodyError('The request body must not contain a member named "__proto__".')
      if (Object.hasOwn(result, name)) throw new JsonBodyError(`The request body repeats the member ${shown(name)} in one object.`)
      skip()
      if (text[at] !== ':') fail('expected ":"')
      at++
      const member = value(depth)
      if (name === 'constructor' && typeof member === 'object' && member !== null && Object.hasOwn(member, 'prototype')) {
        throw new JsonBodyError('The request body must not contain "constructor.prototype".')
      }
      result[name] = member
      skip()
      if (text[at] === ',') {
        at++
        continue
      }
      if (text[at] === '}') {
        at++
        return result
      }
      fail('expected "," or "}"')
    }
  }

  function array (depth: number): unknown[] {
    if (depth > MAX_DEPTH) throw new JsonBodyError(`The request body nests deeper than ${MAX_DEPTH} levels.`)
    at++
    const result: unknown[] = []
    skip()
    if (text[at] === ']') {
      at++
      return result
    }
    for (;;) {
      result.push(value(depth))
      skip()
      if (text[at] === ',') {
        at++
        continue
      }
      if (text[at] === ']') {
        at++
        return result
      }
      fail('expected "," or "]"')
    }
  }

  const result = value(0)
  skip()
  if (at < text.length) fail('unexpected data after the value')
  return result
}
