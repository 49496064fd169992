/**
 * Request validation with Ajv, configured for a strict API:
 * - bodies are JSON and are never coerced: "5", 5.5 and null are not integers; unknown fields are errors,
 *   not silently removed;
 * - path, query and header values arrive as text. An integer is accepted only as digits (an optional '-', no
 *   leading zeros): Ajv's own coercion would also take `1e3`, `0x10` or `1.0`. int64 values are checked from
 *   their decimal text and handed on as text (a double would lose digits above 2^53).
 */
import type { ValidateFunction } from 'ajv'
import type { FastifySchemaCompiler } from 'fastify'
import type { TSchema } from 'typebox'
import { createAjv, exactBodyValidator, hasInt64 } from '../domain/validation.js'
import { compileOnce } from './compile-once.js'

const bodyAjv = createAjv({ coerceTypes: false })
const textAjv = createAjv({ coerceTypes: false })

// The canonical text of an integer a double holds exactly (at most 15 digits).
const INTEGER_TEXT = /^-?(0|[1-9][0-9]{0,14})$/

/** Rewrites integer/int64 to string/int64, recursively: how an int64 path or query value is checked. */
function int64AsText (schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(int64AsText)
  if (typeof schema !== 'object' || schema === null) return schema
  const copy: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) copy[key] = int64AsText(value)
  if (copy.type === 'integer' && copy.format === 'int64') copy.type = 'string'
  return copy
}

/** The names of a flat text schema's integer properties (not int64): they are converted from digits. */
function integerProperties (schema: unknown): string[] {
  const properties = (schema as { properties?: Record<string, { type?: unknown, format?: unknown }> }).properties ?? {}
  return Object.entries(properties).filter(([, p]) => p.type === 'integer' && p.format !== 'int64').map(([name]) => name)
}

/** Whether a parsed body holds a bigint: an integer literal beyond 2^53 (src/http/json-body.ts). */
function holdsBigint (value: unknown): boolean {
  if (typeof value === 'bigint') return true
  if (typeof value !== 'object' || value === null) return false
  return Object.values(value).some(holdsBigint)
}

/** The body with every bigint as the number nearest to it: what a field that is no int64 is checked as. */
function asNumbers (value: unknown): unknown {
  if (typeof value === 'bigint') return Number(value)
  if (Array.isArray(value)) return value.map(asNumbers)
  if (typeof value !== 'object' || value === null) return value
  const copy: Record<string, unknown> = {}
  for (const [key, field] of Object.entries(value)) Object.defineProperty(copy, key, { value: asNumbers(field), enumerable: true, writable: true, configurable: true })
  return copy
}

/**
 * A body validator. A body schema with int64 fields takes them exactly (bigint); in any other, a huge integer is
 * checked as the number it rounds to, so it fails its field's range with the range's message.
 */
function bodyValidator (schema: object): unknown {
  if (hasInt64(schema)) return exactBodyValidator(schema as TSchema)
  const validate = bodyAjv.compile(schema)
  const check = (data: unknown): boolean | { value: unknown } => {
    if (!holdsBigint(data)) {
      const valid = validate(data)
      check.errors = validate.errors
      return valid
    }
    const numbers = asNumbers(data)
    const valid = validate(numbers)
    check.errors = validate.errors
    return valid ? { value: numbers } : false
  }
  check.errors = null as ValidateFunction['errors']
  return check
}

/**
 * Each schema's validator, compiled once per process (./compile-once.ts); the Ajv instances above, which keep what
 * they compiled, then keep one copy of each rather than one per app. A validator holds no state between calls but its
 * `errors`, which Fastify reads right after the call it made.
 */
const bodyValidators = compileOnce(bodyValidator)
const textValidators = compileOnce(textValidator)

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  const validators = httpPart === 'body' ? bodyValidators : textValidators
  return validators(schema as object) as ReturnType<FastifySchemaCompiler<unknown>>
}

/** A path, query or header validator: values arrive as text (see the top of this file). */
function textValidator (schema: object): unknown {
  const validate: ValidateFunction = textAjv.compile(int64AsText(schema) as object)
  const integers = integerProperties(schema)
  if (integers.length === 0) return validate
  // Digits become the number they name; any other text is left as it is and fails the integer type.
  const convert = (data: unknown): boolean => {
    const values = data as Record<string, unknown> | null
    for (const name of integers) {
      const text = values?.[name]
      if (typeof text === 'string' && INTEGER_TEXT.test(text)) (values as Record<string, unknown>)[name] = Number(text)
    }
    const valid = validate(data)
    convert.errors = validate.errors
    return valid
  }
  convert.errors = null as ValidateFunction['errors']
  return convert
}
