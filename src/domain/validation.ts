/**
 * Validation with Ajv against the entity schemas, for the API (src/http/validation.ts) and for imported records,
 * with one way of naming what is wrong: `<where>.<field> must be ...`.
 */
import { Ajv, type ErrorObject, type Options } from 'ajv'
import type { TSchema } from 'typebox'
import { isRfc3339DateTime } from '../datetime.js'
import { SAFE_TEXT_PATTERN, SAFE_TEXT_RULE } from './text.js'
import { INT64_MAX, INT64_MIN, isInt64, parseInt64 } from '../int64.js'
import { excerpt } from '../redact.js'

/** An Ajv for this service: first error only, defaults filled in, unknown fields refused (never removed). */
export function createAjv (options: Options = {}): Ajv {
  // verbose: the error carries its schema node, so a message can name both bounds of a range.
  const ajv = new Ajv({ allErrors: false, useDefaults: true, removeAdditional: false, strict: false, verbose: true, ...options })
  ajv.addFormat('int64', { type: 'string', validate: (text: string) => parseInt64(text) !== null })
  ajv.addFormat('date-time', { type: 'string', validate: isRfc3339DateTime })
  return ajv
}

/** `pets[1]` + `/tags/0/name` = `pets[1].tags[0].name`. */
function place (where: string, instancePath: string): string {
  return instancePath.split('/').filter(Boolean).reduce((path, part) => /^[0-9]+$/.test(part) ? `${path}[${part}]` : `${path}.${part}`, where)
}

/**
 * One readable sentence for the first validation error, naming the field; `where` names the value checked. It
 * names fields and states rules, and never quotes a value: the one name a client chose that it shows (a member no
 * schema knows) is shown as an excerpt, secret-shaped text redacted and cut to 40 characters.
 */
export function describeValidationError (where: string, error: ErrorObject | undefined): string {
  if (error === undefined) return `${where} is invalid.`
  const at = place(where, error.instancePath)
  const params = error.params as Record<string, unknown>
  const node = (error.parentSchema ?? {}) as { type?: unknown, minimum?: number, maximum?: number, minLength?: number, maxLength?: number, minItems?: number, maxItems?: number, pattern?: string }
  switch (error.keyword) {
    case 'additionalProperties':
      return `${at}.${excerpt(String(params.additionalProperty))} is not a known field.`
    case 'required':
      return `${at} is missing the required field "${String(params.missingProperty)}".`
    case 'type':
      if (params.type === 'integer') return `${at} must be an integer.`
      if (params.type === 'boolean') return `${at} must be true or false.`
      if (params.type === 'object') return `${at} must be an object.`
      if (params.type === 'array') return `${at} must be an array.`
      return `${at} must be of type ${String(params.type)}.`
    case 'minimum':
    case 'maximum':
      if (node.minimum !== undefined && node.maximum !== undefined) return `${at} must be an integer from ${node.minimum} to ${node.maximum}.`
      return `${at} ${error.message ?? 'is out of range'}.`
    case 'minItems':
    case 'maxItems':
      if (node.minItems !== undefined && node.maxItems !== undefined) return `${at} must hold ${node.minItems} to ${node.maxItems} items.`
      return `${at} ${error.message ?? 'has the wrong number of items'}.`
    case 'minLength':
    case 'maxLength':
      if (node.minLength === 1 && node.maxLength !== undefined) return `${at} must be a non-empty string of at most ${node.maxLength} characters.`
      return `${at} ${error.message ?? 'has the wrong length'}.`
    case 'pattern':
      return node.pattern === SAFE_TEXT_PATTERN ? `${at} must hold ${SAFE_TEXT_RULE}.` : `${at} must match ${String(params.pattern)}.`
    case 'format':
      if (params.format === 'int64') return `${at} must be an integer from ${INT64_MIN} to ${INT64_MAX}.`
      if (params.format === 'date-time') return `${at} must be a valid RFC 3339 date-time.`
      return `${at} must be a valid ${String(params.format)}.`
    case INT64:
      return `${at} must be an integer within int64.`
    case 'enum':
      return `${at} must be one of ${(params.allowedValues as unknown[]).join(', ')}.`
    case 'not': {
      const excluded = error.schema as { const?: unknown, enum?: unknown[] } | undefined
      const values = excluded?.enum ?? (excluded !== undefined && 'const' in excluded ? [excluded.const] : undefined)
      return values === undefined ? `${at} is not allowed.` : `${at} must not be ${values.join(' or ')}.`
    }
    default:
      return `${at} ${error.message ?? 'is invalid'}.`
  }
}

/** The keyword that checks an int64 of a record read from a file: a bigint (or a safe integer) in range. */
const INT64 = 'x-int64'

/** An Ajv that checks int64 fields holding a bigint or a safe integer (the keyword below). */
function exactAjv (options: Options): Ajv {
  const ajv = createAjv({ coerceTypes: false, ...options })
  ajv.addKeyword({
    keyword: INT64,
    schemaType: 'boolean',
    errors: false,
    validate: (_enabled: boolean, data: unknown) => (typeof data === 'bigint' && isInt64(data)) || (typeof data === 'number' && Number.isSafeInteger(data))
  })
  return ajv
}

const recordAjv = exactAjv({ useDefaults: false })
const bodyAjv = exactAjv({})

function isInt64Node (node: Record<string, unknown>): boolean {
  return node.type === 'integer' && node.format === 'int64'
}

/** The schema with each int64 checked by the keyword above (Ajv's integer type does not take a bigint). */
function int64AsBigint (schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(int64AsBigint)
  if (typeof schema !== 'object' || schema === null) return schema
  const node = schema as Record<string, unknown>
  if (isInt64Node(node)) {
    const rest = { ...node }
    delete rest.type
    delete rest.format
    return { ...rest, [INT64]: true }
  }
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, int64AsBigint(value)]))
}

/** Integers read exactly as bigint become numbers where a number holds them exactly, for Ajv's range checks. */
function forValidation (value: unknown): unknown {
  if (typeof value === 'bigint') return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value
  if (Array.isArray(value)) return value.map(forValidation)
  if (typeof value !== 'object' || value === null) return value
  const copy: Record<string, unknown> = {}
  // defineProperty: a "__proto__" field stays a field (and is then refused as unknown).
  for (const [key, field] of Object.entries(value)) Object.defineProperty(copy, key, { value: forValidation(field), enumerable: true, writable: true, configurable: true })
  return copy
}

/** After validation: every int64 of the record as a bigint, led by the schema. */
function withBigints (schema: TSchema | Record<string, unknown>, value: unknown): unknown {
  const node = schema as Record<string, unknown>
  if (isInt64Node(node)) return BigInt(value as number | bigint)
  if (Array.isArray(value)) return value.map((item) => withBigints(node.items as TSchema, item))
  if (typeof value !== 'object' || value === null) return value
  const properties = (node.properties ?? {}) as Record<string, TSchema>
  const result = value as Record<string, unknown>
  for (const [key, field] of Object.entries(result)) {
    const fieldSchema = properties[key]
    if (fieldSchema !== undefined) result[key] = withBigints(fieldSchema, field)
  }
  return result
}

export class RecordError extends Error {}

/** Whether a schema has an int64 node anywhere. */
export function hasInt64 (schema: unknown): boolean {
  if (Array.isArray(schema)) return schema.some(hasInt64)
  if (typeof schema !== 'object' || schema === null) return false
  return isInt64Node(schema as Record<string, unknown>) || Object.values(schema).some(hasInt64)
}

/**
 * A validator of a request body whose int64 fields arrive exactly (a bigint beyond 2^53, see the body reader), in the
 * shape Fastify's validator compiler takes: false with `errors`, or `{ value }`, the body with its int64 fields as
 * bigint.
 */
export function exactBodyValidator (schema: TSchema): ((data: unknown) => false | { value: unknown }) & { errors: ErrorObject[] | null | undefined } {
  const validate = bodyAjv.compile(int64AsBigint(schema) as object)
  const check = (data: unknown): false | { value: unknown } => {
    const candidate = forValidation(data)
    const valid = validate(candidate)
    check.errors = validate.errors
    return valid ? { value: withBigints(schema, candidate) } : false
  }
  check.errors = null as ErrorObject[] | null | undefined
  return check
}

/**
 * A number whose JSON text is not an integer literal (a fraction or an exponent: `5.0`, `1e3`, `1e-400`), with
 * its exact text. Readers give it in place of the number JSON.parse would round it to; no integer schema accepts
 * it, so a field that must be an integer says so instead of taking a value the client did not write.
 */
export class NonIntegerNumber {
  constructor (readonly text: string) {}
}

/**
 * A validator of records read from a file with exact integers (bigint): checks a record against an entity schema
 * (the API's own) and returns it with its int64 fields as bigint; throws RecordError naming the first problem,
 * `where` naming the record (`pets[3]`).
 */
export function recordValidator<T> (schema: TSchema): (value: unknown, where: string) => T {
  const validate = recordAjv.compile(int64AsBigint(schema) as object)
  return (value, where) => {
    const candidate = forValidation(value)
    if (!validate(candidate)) throw new RecordError(describeValidationError(where, validate.errors?.[0]).replace(/\.$/, ''))
    return withBigints(schema, candidate) as T
  }
}
