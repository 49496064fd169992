/**
 * The import file: `{"pets": [...], "orders": [...]}`. The whole file is parsed exactly (int64 ids above 2^53
 * stay exact) and validated before anything is written; the first bad record is named with its field.
 */
import { isInteger, parse } from 'lossless-json'
import { isRfc3339DateTime } from '../datetime.js'
import { isInt64 } from '../int64.js'
import type { ImportResult, Store } from '../store/types.js'
import {
  MAX_ORDER_QUANTITY, MAX_QUANTITY, ORDER_STATUSES, PET_STATUSES,
  type Category, type Order, type OrderStatus, type PetImport, type PetStatus, type Tag
} from './model.js'

export class ImportError extends Error {}

export interface ImportData { pets: PetImport[], orders: Order[] }

type Json = Record<string, unknown>

const MAX_NAME = 200
const MAX_URL = 2048

// Integers are parsed as bigint so that every digit survives; other numbers stay numbers (and are rejected).
const parseNumber = (text: string): number | bigint => isInteger(text) ? BigInt(text) : Number(text)

function isObject (value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

class Fields {
  constructor (readonly where: string, readonly record: Json, allowed: readonly string[]) {
    for (const key of Object.keys(record)) {
      if (!allowed.includes(key)) this.fail(key, 'is not a known field')
    }
  }

  fail (field: string, problem: string): never {
    throw new ImportError(`${this.where}.${field} ${problem}`)
  }

  has (field: string): boolean {
    return this.record[field] !== undefined
  }

  int64 (field: string): bigint {
    const value = this.record[field]
    if (typeof value !== 'bigint' || !isInt64(value)) this.fail(field, 'must be an integer within int64')
    return value
  }

  integer (field: string, min: number, max: number): number {
    const value = this.record[field]
    if (typeof value !== 'bigint' || value < BigInt(min) || value > BigInt(max)) {
      this.fail(field, `must be an integer from ${min} to ${max}`)
    }
    return Number(value)
  }

  string (field: string, maxLength: number, pattern?: RegExp): string {
    const value = this.record[field]
    if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) {
      this.fail(field, `must be a non-empty string of at most ${maxLength} characters`)
    }
    if (pattern !== undefined && !pattern.test(value)) this.fail(field, `must match ${pattern.source}`)
    return value
  }

  oneOf<T extends string> (field: string, allowed: readonly T[]): T {
    const value = this.record[field]
    if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
      this.fail(field, `must be one of ${allowed.join(', ')}`)
    }
    return value as T
  }

  boolean (field: string): boolean {
    const value = this.record[field]
    if (typeof value !== 'boolean') this.fail(field, 'must be true or false')
    return value
  }

  array (field: string): unknown[] {
    const value = this.record[field]
    if (!Array.isArray(value)) this.fail(field, 'must be an array')
    return value
  }
}

function idName (where: string, value: unknown): Category & Tag {
  if (!isObject(value)) throw new ImportError(`${where} must be an object with id and name`)
  const f = new Fields(where, value, ['id', 'name'])
  return { id: f.int64('id'), name: f.string('name', MAX_NAME) }
}

function readPet (where: string, value: unknown): PetImport {
  if (!isObject(value)) throw new ImportError(`${where} must be an object`)
  const f = new Fields(where, value, ['id', 'name', 'status', 'quantity', 'category', 'tags', 'photoUrls'])
  const pet: PetImport = { id: f.int64('id'), name: f.string('name', MAX_NAME), status: f.oneOf<PetStatus>('status', PET_STATUSES) }
  if (f.has('quantity')) pet.quantity = f.integer('quantity', 0, MAX_QUANTITY)
  if (f.has('category')) pet.category = idName(`${where}.category`, value.category)
  if (f.has('tags')) pet.tags = f.array('tags').map((tag, i) => idName(`${where}.tags[${i}]`, tag))
  if (f.has('photoUrls')) {
    pet.photoUrls = f.array('photoUrls').map((url, i) => {
      if (typeof url !== 'string' || url.length === 0 || url.length > MAX_URL) {
        throw new ImportError(`${where}.photoUrls[${i}] must be a non-empty string of at most ${MAX_URL} characters`)
      }
      return url
    })
  }
  return pet
}

function readOrder (where: string, value: unknown): Order {
  if (!isObject(value)) throw new ImportError(`${where} must be an object`)
  const f = new Fields(where, value, ['id', 'petId', 'quantity', 'shipDate', 'status', 'complete'])
  const shipDate = f.string('shipDate', 64)
  if (!isRfc3339DateTime(shipDate)) f.fail('shipDate', 'must be a valid RFC 3339 date-time')
  return {
    id: f.int64('id'),
    petId: f.int64('petId'),
    quantity: f.integer('quantity', 1, MAX_ORDER_QUANTITY),
    shipDate,
    status: f.oneOf<OrderStatus>('status', ORDER_STATUSES),
    complete: f.boolean('complete')
  }
}

function unique<T extends { id: bigint }> (records: T[], what: string): void {
  const seen = new Map<bigint, number>()
  records.forEach((record, i) => {
    const first = seen.get(record.id)
    if (first !== undefined) throw new ImportError(`${what}[${i}].id ${record.id} repeats ${what}[${first}].id`)
    seen.set(record.id, i)
  })
}

/** Parses and validates an import file's text; throws ImportError naming the record and field. */
export function parseImport (text: string): ImportData {
  let document: unknown
  try {
    document = parse(text, null, parseNumber)
  } catch (error) {
    throw new ImportError(`the file is not valid JSON: ${(error as Error).message}`)
  }
  if (!isObject(document)) throw new ImportError('the file must hold a JSON object with "pets" and/or "orders"')
  const top = new Fields('file', document, ['pets', 'orders'])
  const pets = top.has('pets') ? top.array('pets').map((p, i) => readPet(`pets[${i}]`, p)) : []
  const orders = top.has('orders') ? top.array('orders').map((o, i) => readOrder(`orders[${i}]`, o)) : []
  unique(pets, 'pets')
  unique(orders, 'orders')
  return { pets, orders }
}

export function importData (store: Store, data: ImportData): Promise<ImportResult> {
  return store.importData(data)
}
