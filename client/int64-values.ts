/**
 * int64 values, exact both ways: an id a caller passes becomes the canonical decimal text sent in the path (or is
 * refused before anything is sent), and an answer's int64 places (./int64.ts, generated from the OpenAPI document)
 * become bigint, every other number a number.
 */
import { JsonNumber, parseExact } from './exact-json.js'
import { INT64_PATHS } from './int64.js'
import type { Int64Input } from './types.js'

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n
const INT64_TEXT = /^-?(0|[1-9][0-9]{0,18})$/

/** The canonical decimal text of an int64 id; throws (before anything is sent) for anything else. */
export function int64Text (id: Int64Input, name: string): string {
  let value: bigint
  if (typeof id === 'bigint') {
    value = id
  } else if (typeof id === 'number') {
    // A number above 2^53 may already be another id: refuse rather than send the wrong one.
    if (!Number.isSafeInteger(id)) throw new RangeError(`${name} ${id} is not a safe integer; pass a bigint or a decimal string`)
    value = BigInt(id)
  } else if (typeof id === 'string' && INT64_TEXT.test(id)) {
    value = BigInt(id)
  } else {
    throw new RangeError(`${name} must be a bigint, a safe integer or the canonical decimal text of an int64`)
  }
  if (value < INT64_MIN || value > INT64_MAX) throw new RangeError(`${name} ${value} is outside the int64 range`)
  return value.toString()
}

/** A JSON object of a parsed body (a JsonNumber is a number, not an object). */
export function isRecord (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof JsonNumber)
}

function toBigInts (value: unknown, path: readonly string[]): unknown {
  const [step, ...rest] = path
  if (step === undefined) {
    if (!(value instanceof JsonNumber)) return value
    if (!/^-?[0-9]+$/.test(value.text)) throw new TypeError(`expected an int64, got ${value.text}`)
    return BigInt(value.text)
  }
  if (step === '[]') {
    if (Array.isArray(value)) value.forEach((item, index) => { value[index] = toBigInts(item, rest) })
  } else if (isRecord(value)) {
    for (const key of step === '{}' ? Object.keys(value) : [step]) {
      if (Object.hasOwn(value, key)) value[key] = toBigInts(value[key], rest)
    }
  }
  return value
}

function toNumbers (value: unknown): unknown {
  if (value instanceof JsonNumber) return Number(value.text)
  if (Array.isArray(value)) return value.map(toNumbers)
  if (isRecord(value)) {
    for (const key of Object.keys(value)) value[key] = toNumbers(value[key])
  }
  return value
}

/** Parses a body keeping every digit: int64 places (from the OpenAPI document) become bigint, the rest number. */
export function parseBody (text: string, operationId: string, status: number): unknown {
  const value = parseExact(text)
  for (const path of INT64_PATHS[operationId]?.[String(status)] ?? []) toBigInts(value, path)
  return toNumbers(value)
}
