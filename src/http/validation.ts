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
import { createAjv } from '../domain/validation.js'

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

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) => {
  if (httpPart === 'body') return bodyAjv.compile(schema as object)
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
