/**
 * The import file: `{"pets": [...], "orders": [...]}`. It is read as a stream of JSON tokens (stream-json), never
 * as one string; each record is assembled, with exact numbers (int64 ids above 2^53 stay exact), and validated as
 * it arrives. Nothing is written until the whole file has been read and found valid; the first bad record is
 * named with its place and field.
 */
import { finished, pipeline } from 'node:stream/promises'
import Assembler from 'stream-json/assembler.js'
import parser from 'stream-json/parser.js'
import verifier from 'stream-json/utils/verifier.js'
import { Order as OrderSchema, PetRecord } from './entities.js'
import { NonIntegerNumber, recordValidator, RecordError } from './validation.js'
import type { CatalogWrites, ImportOptions, ImportResult } from '../store/catalog/types.js'
import { importedStockChange } from './inventory.js'
import type { Order, PetImport } from '../model.js'
import { Utf8Stream } from './utf8.js'

export class ImportError extends Error {}

export interface ImportData { pets: PetImport[], orders: Order[] }

const NOT_AN_OBJECT = 'the file must hold a JSON object with "pets" and/or "orders"'
const SECTIONS = ['pets', 'orders'] as const
type Section = typeof SECTIONS[number]

// The parser has checked the JSON number grammar: a number is an integer exactly when it has no '.', 'e' or 'E'.
const INTEGER = /^-?[0-9]+$/

// Integers become bigint so that every digit survives; other numbers keep their text (and are rejected).
const parseNumber = (text: string): bigint | NonIntegerNumber => INTEGER.test(text) ? BigInt(text) : new NonIntegerNumber(text)

// Records are checked against the API's own schemas of a pet and an order (./entities.ts).
const validPet = recordValidator<PetImport>(PetRecord)
const validOrder = recordValidator<Order>(OrderSchema)

function checked<T> (validate: (value: unknown, where: string) => T, where: string, value: unknown): T {
  try {
    return validate(value, where)
  } catch (error) {
    throw error instanceof RecordError ? new ImportError(error.message) : error
  }
}

const readPet = (where: string, value: unknown): PetImport => checked(validPet, where, value)
const readOrder = (where: string, value: unknown): Order => checked(validOrder, where, value)

/** Why the JSON text is not valid; named like a validation error so that the CLI reports both alike. */
function notJson (detail: string): ImportError {
  return new ImportError(`the file is not valid JSON: ${detail}`)
}

/**
 * Assembles one record from its tokens with stream-json's Assembler, keeping what JSON.parse would lose: a
 * number stays exact (an integer as a bigint, anything else as a number the validators then refuse), and a key
 * repeated within one object is an error instead of the last value silently winning.
 */
class RecordAssembler extends Assembler {
  constructor (private readonly where: () => string) {
    super()
  }

  override keyValue (key: string): void {
    const object = this.current as object | null
    if (object !== null && Object.hasOwn(object, key)) {
      throw notJson(`the key "${key}" appears twice in an object ${this.where()}`)
    }
    super.keyValue(key)
  }

  override numberValue (text: string): void {
    // stringValue stores the value it is given as it is: here the exact number, not the text.
    super.stringValue(parseNumber(text) as never)
  }
}

/**
 * Turns the parser's tokens into validated records. The top level and the two arrays are followed as states;
 * each record (an element of "pets" or "orders") is assembled from its tokens, then checked by readPet or
 * readOrder, so memory holds validated records, never the document.
 */
class ImportReader {
  readonly pets: PetImport[] = []
  readonly orders: Order[] = []
  readonly #ids = { pets: new Map<bigint, number>(), orders: new Map<bigint, number>() }
  readonly #onRecord: (records: number) => void
  #state: 'start' | 'top' | 'topValue' | 'section' | 'done' = 'start'
  readonly #topKeys = new Set<string>()
  #key: string = ''
  #section: Section = 'pets'
  readonly #record = new RecordAssembler(() => this.where())

  constructor (onRecord: (records: number) => void) {
    this.#onRecord = onRecord
  }

  get started (): boolean {
    return this.#state !== 'start'
  }

  get complete (): boolean {
    return this.#state === 'done'
  }

  /** Where reading stands, for a syntax error: the record being read, the last complete one, or ''. */
  where (): string {
    if (this.#state === 'top' && this.#topKeys.size > 0) return `after the "${this.#key}" array`
    if (this.#state !== 'section') return ''
    const n = this[this.#section].length
    if (this.#record.depth > 0) return `inside ${this.#section}[${n}]`
    return n === 0 ? `at the start of ${this.#section}` : `after ${this.#section}[${n - 1}]`
  }

  token (token: parser.Token): void {
    switch (this.#state) {
      case 'section':
        if (token.name === 'endArray' && this.#record.depth === 0) {
          // The end of the section's array (the parser has matched the brackets).
          this.#state = 'top'
          return
        }
        this.#record.consume(token)
        if (this.#record.done) this.#add(this.#record.current)
        return
      case 'start':
        if (token.name !== 'startObject') throw new ImportError(NOT_AN_OBJECT)
        this.#state = 'top'
        return
      case 'top':
        if (token.name === 'endObject') {
          this.#state = 'done'
          return
        }
        if (token.name === 'keyValue') this.#topKey(token.value)
        return
      case 'topValue':
        if (token.name !== 'startArray') throw new ImportError(`file.${this.#key} must be an array`)
        this.#section = this.#key as Section
        this.#state = 'section'
        return
      case 'done':
        // The parser rejects anything after the top-level value; this only guards the state machine.
        throw notJson('unexpected data after the end of the top-level object')
    }
  }

  #topKey (key: string): void {
    if (this.#topKeys.has(key)) throw notJson(`the top-level key "${key}" appears twice`)
    this.#topKeys.add(key)
    if (!(SECTIONS as readonly string[]).includes(key)) throw new ImportError(`file.${key} is not a known field`)
    this.#key = key
    this.#state = 'topValue'
  }

  #add (value: unknown): void {
    const section = this.#section
    const i = this[section].length
    const where = `${section}[${i}]`
    const record = section === 'pets' ? readPet(where, value) : readOrder(where, value)
    const ids = this.#ids[section]
    const first = ids.get(record.id)
    if (first !== undefined) throw new ImportError(`${where}.id ${record.id} repeats ${section}[${first}].id`)
    ids.set(record.id, i)
    if (section === 'pets') this.pets.push(record as PetImport)
    else this.orders.push(record as Order)
    this.#onRecord(this.pets.length + this.orders.length)
  }
}

export interface ReadImportOptions {
  /** Called after each record has been read and validated, with the number of records read so far. */
  onRecord?: (records: number) => void
}

/** Opens the import file's content as chunks (a file stream, or strings); called again to locate a syntax error. */
export type ImportSource = () => AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>

/**
 * Reads and validates an import file; throws ImportError naming the record and field of the first problem, or
 * why (and where) the JSON is not valid. An error of the source itself (a read error) is rethrown unchanged.
 * Nothing is written: the caller stores the result in one transaction.
 */
export async function readImport (open: ImportSource, options: ReadImportOptions = {}): Promise<ImportData> {
  const reader = new ImportReader(options.onRecord ?? (() => {}))
  // Packed keys, strings and numbers only: one token per value; numbers arrive as their exact text.
  const tokens = parser.asStream({ streamValues: false })
  let failed = false
  tokens.on('data', (token: parser.Token) => {
    // Tokens already parsed may still arrive after the first error; they must not be read past it.
    if (failed) return
    try {
      reader.token(token)
    } catch (error) {
      failed = true
      tokens.destroy(error as Error)
    }
  })
  let sourceError: unknown = null
  let atEnd = false
  async function * input (): AsyncGenerator<Uint8Array | string> {
    const utf8 = new Utf8Stream()
    try {
      for await (const chunk of open()) {
        // Text given as strings is already decoded; bytes must be valid UTF-8.
        const invalid = typeof chunk === 'string' ? -1 : utf8.push(chunk)
        if (invalid !== -1) throw await notUtf8(open, invalid)
        yield chunk
      }
    } catch (error) {
      sourceError = error
      throw error
    }
    const truncated = utf8.end()
    if (truncated !== -1) {
      sourceError = await notUtf8(open, truncated)
      throw sourceError
    }
    // The parser handles each chunk as it is written, so a syntax error in the last chunk has been raised by
    // now; an error raised later comes from the end of the input.
    atEnd = tokens.errored === null
  }
  try {
    await Promise.all([pipeline(input(), tokens), finished(tokens)])
  } catch (error) {
    if (error instanceof ImportError || error === sourceError) throw error
    if (atEnd && !reader.started) throw notJson('it is empty')
    // At the end of the input the reader has seen every token before the cut, so it names the place exactly.
    if (atEnd && !reader.complete) throw notJson(`it ends before the JSON is complete${suffix(reader.where())}`)
    // Elsewhere the parser drops the tokens of the failing chunk, so the place comes from a second pass.
    throw notJson(`${(error as Error).message.replace(/^Parser (cannot parse input: |has )/, '')}${await locate(open)}`)
  }
  if (!reader.complete) throw notJson('it ends before the JSON is complete')
  return { pets: reader.pets, orders: reader.orders }
}

/** The ImportError for invalid UTF-8 at a byte offset, with its line and column (in bytes) from a second pass. */
async function notUtf8 (open: ImportSource, offset: number): Promise<ImportError> {
  let line = 1
  let lineStart = 0
  let seen = 0
  for await (const chunk of open()) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    const upto = Math.min(bytes.length, offset - seen)
    for (let i = 0; i < upto; i++) {
      if (bytes[i] === 0x0A) {
        line++
        lineStart = seen + i + 1
      }
    }
    seen += bytes.length
    if (seen >= offset) break
  }
  return new ImportError(`the file is not valid UTF-8 at byte ${offset} (line ${line}, column ${offset - lineStart + 1})`)
}

function suffix (where: string): string {
  return where === '' ? '' : ` (${where})`
}

/** " at line L, column C" of the first syntax error, from stream-json's verifier; '' when it cannot tell. */
async function locate (open: ImportSource): Promise<string> {
  try {
    await pipeline(open(), verifier.asStream())
  } catch (error) {
    const { line, pos } = error as Partial<verifier.VerifierError>
    if (typeof line === 'number' && typeof pos === 'number') return ` at line ${line}, column ${pos}`
  }
  return ''
}

/** Parses and validates an import file's whole text; see readImport. */
export function parseImport (text: string): Promise<ImportData> {
  return readImport(() => [text])
}

/**
 * Writes validated import data in one transaction (all or nothing). Stock is written where it changes
 * (importedStockChange: a re-import of an unchanged catalogue leaves revisions and the ledger as they are).
 */
export function importData (store: { readonly catalog: Pick<CatalogWrites, 'importData'> }, data: ImportData, options: Omit<ImportOptions, 'stockChange'> = {}): Promise<ImportResult> {
  return store.catalog.importData(data, { ...options, stockChange: importedStockChange })
}
