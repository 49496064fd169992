/**
 * JSON that keeps every digit of its numbers, with what the platform offers (JSON.parse source text access and
 * JSON.rawJSON, a TC39 proposal shipped in V8 and so in Node.js 22 and later): a parsed number stays its text until its place says whether it is an int64
 * (a bigint) or any other number; a bigint is written as a bare JSON number, digit for digit.
 */

/** A number of a parsed body, as the text it was sent as. */
export class JsonNumber {
  constructor (readonly text: string) {}
}

interface ParseContext { source?: string }
type Reviver = (key: string, value: unknown, context?: ParseContext) => unknown
type RawJson = (text: string) => unknown

/** Parses JSON text; every number becomes a JsonNumber holding its text. */
export function parseExact (text: string): unknown {
  const reviver: Reviver = (_key, value, context) => {
    if (typeof value !== 'number') return value
    if (context?.source === undefined) throw new Error(UNSUPPORTED)
    return new JsonNumber(context.source)
  }
  return JSON.parse(text, reviver as (key: string, value: unknown) => unknown)
}

/** JSON text of a value in which bigints stand for integers of any size. */
export function stringifyExact (value: unknown): string {
  const rawJSON = (JSON as unknown as { rawJSON?: RawJson }).rawJSON
  if (rawJSON === undefined) throw new Error(UNSUPPORTED)
  return JSON.stringify(value, (_key, item: unknown) => typeof item === 'bigint' ? rawJSON(item.toString()) : item)
}

const UNSUPPORTED = 'This JavaScript runtime lacks JSON.parse source text access or JSON.rawJSON, which the Petstore client ' +
  'needs to read and write int64 ids exactly: use Node.js 22 or later.'

/** Throws, saying why, when the runtime cannot read or write numbers exactly (checked once, when a client is made). */
export function requireExactJson (): void {
  if (!(parseExact('1') instanceof JsonNumber) || stringifyExact(2n) !== '2') throw new Error(UNSUPPORTED)
}
