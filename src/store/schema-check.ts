/**
 * The schema check, shared by both stores: a store's schema objects (tables, indexes, triggers, views, functions ...)
 * must be exactly those its migrations define. Each dialect describes the objects it finds and derives the expected
 * ones by running the migrations the store records as applied on an empty database; this module compares the two and
 * says, naming each object, what is extra, missing or different.
 *
 * A schema is trusted code: a trigger runs with every write, whoever wrote the file. A backup or a restored dump with
 * one object more (`AFTER UPDATE ON inventory ... UPDATE api_keys SET scope = 'write'`) would otherwise pass every
 * check that looks at the data and the recorded migrations only.
 */
import { SchemaError } from './migrations.js'

/** One object of a schema, as the check compares it. */
export interface SchemaObject {
  /** 'table', 'index', 'trigger', 'view', ...: the dialect's word. */
  readonly type: string
  readonly name: string
  /** The table it belongs to (an index's, a trigger's), or null. */
  readonly table: string | null
  /** Its definition, normalized by the dialect: two objects are the same when these are equal. */
  readonly definition: string
  /** A table's columns, name -> definition: read only to say what differs. */
  readonly columns?: () => ReadonlyMap<string, string>
}

export interface SchemaDifference {
  readonly change: 'extra' | 'missing' | 'changed'
  readonly object: SchemaObject
  /** What differs, for a changed object. */
  readonly detail?: string
}

/** Names are the store's content: shown escaped (no control or invisible characters) and cut short. */
export function shownName (name: string): string {
  const cut = name.length > 64 ? `${name.slice(0, 64)}...` : name
  return `"${cut.replace(/[^\x20-\x7e]|["\\]/g, (c) => c === '"' || c === '\\' ? `\\${c}` : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`
}

const keyOf = (object: SchemaObject): string => `${object.type}\u0000${object.name}`

/** What differs between two tables' columns, or null when the columns are the same (the constraints differ). */
function columnDifference (actual: ReadonlyMap<string, string>, expected: ReadonlyMap<string, string>): string | null {
  const parts: string[] = []
  const extra = [...actual.keys()].filter((name) => !expected.has(name))
  const missing = [...expected.keys()].filter((name) => !actual.has(name))
  const changed = [...expected.keys()].filter((name) => actual.has(name) && actual.get(name) !== expected.get(name))
  if (extra.length > 0) parts.push(`column${extra.length > 1 ? 's' : ''} ${extra.map(shownName).join(', ')} not defined by the migrations`)
  if (missing.length > 0) parts.push(`column${missing.length > 1 ? 's' : ''} ${missing.map(shownName).join(', ')} missing`)
  if (changed.length > 0) parts.push(`column${changed.length > 1 ? 's' : ''} ${changed.map(shownName).join(', ')} defined otherwise`)
  return parts.length === 0 ? null : parts.join(', ')
}

/** What the actual object does differently from the expected one of the same type and name, in words. */
function detailOf (actual: SchemaObject, expected: SchemaObject): string {
  if (actual.table !== expected.table) {
    const on = (table: string | null): string => table === null ? 'no table' : `table ${shownName(table)}`
    return `it is on ${on(actual.table)}, where the migrations put it on ${on(expected.table)}`
  }
  if (actual.columns !== undefined && expected.columns !== undefined) {
    return columnDifference(actual.columns(), expected.columns()) ?? 'its columns are the migrations\' but not the rest of its definition'
  }
  return 'its definition differs from the migrations\''
}

/** Every object that is extra, missing or different in `actual` against `expected`; none when they are the same. */
export function compareSchemas (actual: readonly SchemaObject[], expected: readonly SchemaObject[]): SchemaDifference[] {
  const wanted = new Map<string, SchemaObject>()
  for (const object of expected) wanted.set(keyOf(object), object)
  const seen = new Set<string>()
  const differences: SchemaDifference[] = []
  for (const object of actual) {
    const key = keyOf(object)
    const match = wanted.get(key)
    // A second object of one type and name (a schema table written by hand) is one too many.
    if (match === undefined || seen.has(key)) {
      differences.push({ change: 'extra', object })
    } else if (object.definition !== match.definition || object.table !== match.table) {
      differences.push({ change: 'changed', object, detail: detailOf(object, match) })
    }
    seen.add(key)
  }
  for (const object of expected) {
    if (!seen.has(keyOf(object))) differences.push({ change: 'missing', object })
  }
  return differences
}

/** How many differences a message names; the rest are counted. */
const NAMED = 8

function describe (difference: SchemaDifference): string {
  const { object } = difference
  const on = object.table !== null && object.table !== object.name && difference.change !== 'changed' ? ` on table ${shownName(object.table)}` : ''
  const what = `${object.type} ${shownName(object.name)}${on}`
  switch (difference.change) {
    case 'extra': return `${what} is not defined by any migration`
    case 'missing': return `${what} is missing`
    case 'changed': return `${what} differs: ${difference.detail ?? 'its definition differs from the migrations\''}`
  }
}

/**
 * The SchemaError for a store whose objects are not the migrations': each object named with what differs (never the
 * SQL found in the store, which may be anyone's).
 */
export function alteredSchemaError (differences: readonly SchemaDifference[], version: number): SchemaError {
  const named = differences.slice(0, NAMED).map(describe)
  const more = differences.length > NAMED ? `; and ${differences.length - NAMED} more` : ''
  return new SchemaError('altered',
    `the store's schema is not the one its migrations define (${version === 0 ? 'none applied' : `version ${version}`}): ${named.join('; ')}${more}. ` +
    'Refusing to use it: a trigger, view or index that no migration made may change what every write does. ' +
    'Restore a backup this service made, or remove what was added (docs/backup.md, "What restore checks").')
}

/** Throws alteredSchemaError when `actual` is not `expected`. */
export function requireSchema (actual: readonly SchemaObject[], expected: readonly SchemaObject[], version: number): void {
  const differences = compareSchemas(actual, expected)
  if (differences.length > 0) throw alteredSchemaError(differences, version)
}
