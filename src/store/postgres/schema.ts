/**
 * The schema check of a PostgreSQL store (src/store/schema-check.ts): every object in the store's schema (tables with
 * their columns and options, constraints, indexes, triggers, rules, row security policies, views, sequences,
 * functions, types and operators; what an extension owns is left out) must be one that the migrations the store
 * records as applied create, and the database may have no event trigger (one could rewrite what the check creates). What they create is found by running them in a scratch schema inside a savepoint that is
 * rolled back: PostgreSQL itself renders both sides' definitions (pg_get_indexdef, pg_get_triggerdef, ...), so they
 * compare on any server version. Creating the scratch schema needs CREATE on the database; a role without it (the
 * instances' role of docs/scaling.md) cannot run the check, and the caller says so.
 */
import { randomBytes } from 'node:crypto'
import type pg from 'pg'
import { checksum, type Migration } from '../migrations.js'
import { BOOKKEEPING } from './migrations.js'
import { requireSchema, type SchemaObject } from '../schema-check.js'

type Queryable = Pick<pg.ClientBase, 'query'>

/** What a schema name is replaced by in definitions that PostgreSQL always qualifies (an index's, a trigger's table). */
const SCHEMA = '\u0000schema'

/** Not an extension's: objects an extension created (say pgcrypto's functions in public) are the extension's business. */
const OWN = (catalog: string, oid: string): string =>
  `NOT EXISTS (SELECT 1 FROM extension_members e WHERE e.classid = '${catalog}'::regclass AND e.objid = ${oid})`

/**
 * The schema `$1`'s relations, types and the members of extensions, each read once (a database whose catalogs many
 * schemas came and went through has large ones, without an index on the schema), and each live column of its
 * relations with what defines it: type, null, default, identity, generated, collation.
 */
const PRELUDE = `WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = $1),
rels AS MATERIALIZED (
  SELECT c.oid, c.relname, c.relkind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity, c.reloptions
    FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
),
types AS MATERIALIZED (
  SELECT y.oid, y.typname, y.typtype, y.typcategory, y.typbasetype, y.typtypmod, y.typnotnull, y.typdefault
    FROM pg_type y JOIN ns ON ns.oid = y.typnamespace
),
extension_members AS MATERIALIZED (SELECT classid, objid FROM pg_depend WHERE deptype = 'e'),
columns AS (
  SELECT a.attrelid, a.attnum, a.attname,
         concat_ws(' ', format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN 'not null' END,
           'default ' || pg_get_expr(d.adbin, d.adrelid), nullif(a.attidentity, ''), nullif(a.attgenerated, ''),
           CASE WHEN a.attcollation <> t.typcollation THEN 'collate ' || a.attcollation::regcollation::text END) AS definition
    FROM rels c JOIN pg_attribute a ON a.attrelid = c.oid JOIN pg_type t ON t.oid = a.atttypid
         LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE a.attnum > 0 AND NOT a.attisdropped
)
`

/**
 * One query per kind of object in the schema: type, name (a per-table object carries its table's name), table,
 * definition, and a table's columns (name -> definition, for the message).
 */
const DESCRIBE = [
  // Tables, views, sequences and the rest of pg_class (indexes below), with what makes a table behave otherwise.
  `SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view'
            WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' WHEN 'c' THEN 'type' ELSE 'relation' END AS type,
          c.relname AS name, NULL AS "table",
          concat_ws(' | ', c.relkind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity, c.reloptions::text,
            (SELECT string_agg(i.inhparent::regclass::text, ', ' ORDER BY i.inhseqno) FROM pg_inherits i WHERE i.inhrelid = c.oid),
            CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) END,
            (SELECT concat_ws(' ', s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmax, s.seqmin, s.seqcache, s.seqcycle)
               FROM pg_sequence s WHERE s.seqrelid = c.oid),
            (SELECT string_agg(a.attname || ' ' || a.definition, ', ' ORDER BY a.attnum) FROM columns a WHERE a.attrelid = c.oid)) AS definition,
          (SELECT json_object_agg(a.attname, a.definition) FROM columns a WHERE a.attrelid = c.oid) AS columns
     FROM rels c WHERE c.relkind NOT IN ('i', 'I', 't') AND ${OWN('pg_class', 'c.oid')}`,
  `SELECT 'index' AS type, c.relname AS name, t.relname AS "table", pg_get_indexdef(c.oid) AS definition, NULL AS columns
     FROM rels c JOIN pg_index x ON x.indexrelid = c.oid JOIN pg_class t ON t.oid = x.indrelid WHERE ${OWN('pg_class', 'c.oid')}`,
  `SELECT 'constraint' AS type, owner.name || '.' || k.conname AS name, owner.name AS "table",
          concat_ws(' | ', k.contype, pg_get_constraintdef(k.oid), k.convalidated) AS definition, NULL AS columns
     FROM (SELECT oid, relname AS name, 0::oid AS domain FROM rels UNION ALL SELECT 0::oid, typname, oid FROM types WHERE typtype = 'd') owner
     JOIN pg_constraint k ON k.conrelid = owner.oid AND k.contypid = owner.domain`,
  `SELECT 'trigger' AS type, t.relname || '.' || g.tgname AS name, t.relname AS "table",
          concat_ws(' | ', pg_get_triggerdef(g.oid), g.tgenabled) AS definition, NULL AS columns
     FROM rels t JOIN pg_trigger g ON g.tgrelid = t.oid WHERE NOT g.tgisinternal`,
  `SELECT 'rule' AS type, t.relname || '.' || r.rulename AS name, t.relname AS "table",
          concat_ws(' | ', pg_get_ruledef(r.oid), r.ev_enabled) AS definition, NULL AS columns
     FROM rels t JOIN pg_rewrite r ON r.ev_class = t.oid WHERE r.rulename <> '_RETURN'`,
  `SELECT 'policy' AS type, t.relname || '.' || p.polname AS name, t.relname AS "table",
          concat_ws(' | ', p.polcmd, p.polpermissive, p.polroles::regrole[]::text, pg_get_expr(p.polqual, p.polrelid),
            pg_get_expr(p.polwithcheck, p.polrelid)) AS definition, NULL AS columns
     FROM rels t JOIN pg_policy p ON p.polrelid = t.oid`,
  `SELECT CASE f.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' WHEN 'w' THEN 'window function' ELSE 'function' END AS type,
          f.proname || '(' || pg_get_function_identity_arguments(f.oid) || ')' AS name, NULL AS "table",
          concat_ws(' | ', l.lanname, pg_get_function_result(f.oid), f.prosecdef, f.provolatile, f.proisstrict, f.proleakproof,
            f.proparallel, f.proconfig::text, replace(f.prosrc, E'\\r\\n', E'\\n'), f.probin) AS definition, NULL AS columns
     FROM pg_proc f JOIN ns ON ns.oid = f.pronamespace JOIN pg_language l ON l.oid = f.prolang WHERE ${OWN('pg_proc', 'f.oid')}`,
  `SELECT 'type' AS type, y.typname AS name, NULL AS "table",
          concat_ws(' | ', y.typtype, format_type(y.typbasetype, y.typtypmod), y.typnotnull, y.typdefault,
            (SELECT string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = y.oid)) AS definition, NULL AS columns
     FROM types y WHERE y.typtype <> 'c' AND y.typcategory <> 'A' AND ${OWN('pg_type', 'y.oid')}`,
  `SELECT 'operator' AS type, o.oprname || '(' || format_type(o.oprleft, NULL) || ', ' || format_type(o.oprright, NULL) || ')' AS name, NULL AS "table",
          concat_ws(' | ', o.oprcode::regprocedure::text, format_type(o.oprresult, NULL)) AS definition, NULL AS columns
     FROM pg_operator o JOIN ns ON ns.oid = o.oprnamespace WHERE ${OWN('pg_operator', 'o.oid')}`
].join('\nUNION ALL\n')

interface Row { type: string, name: string, table: string | null, definition: string | null, columns: Record<string, string> | null }

/**
 * The objects in `schema`, its name in definitions replaced. Read with `schema` alone on the search path (restored
 * afterwards), so that PostgreSQL names what is in it without the schema wherever it may, and names anything else
 * with its schema; the name it always writes (an index's or a trigger's table) is replaced.
 */
async function describe (client: Queryable, schema: string): Promise<SchemaObject[]> {
  const { rows: [path] } = await client.query<{ path: string, jit: string, qualified: string }>(
    "SELECT current_setting('search_path') AS path, current_setting('jit') AS jit, quote_ident($1) || '.' AS qualified", [schema])
  if (path === undefined) throw new Error('no answer from PostgreSQL')
  // JIT compiling this one query (its cost estimated high on large catalogs) took 10 s on a busy machine; it runs in 0.3 s.
  await client.query("SELECT set_config('search_path', quote_ident($1), true), set_config('jit', 'off', true)", [schema])
  // Put back only after a success: a failure leaves the transaction to be rolled back, settings and all.
  const { rows } = await client.query<Row>(PRELUDE + DESCRIBE, [schema])
  await client.query("SELECT set_config('search_path', $1, true), set_config('jit', $2, true)", [path.path, path.jit])
  const unqualified = (text: string): string => text.replaceAll(path.qualified, `${SCHEMA}.`)
  return rows.map((row) => {
    const object = { type: row.type, name: row.name, table: row.table, definition: unqualified(row.definition ?? '') }
    if (row.columns === null) return object
    const columns = new Map(Object.entries(row.columns).map(([name, definition]) => [name, unqualified(definition)]))
    return { ...object, columns: () => columns }
  })
}

/**
 * The database's event triggers, but an extension's and those the operator vouches for (`trusted`: a managed
 * PostgreSQL's own). They belong to no schema and no migration makes one, so each other is one too many: it runs with
 * DDL, the migrations' and the check's own included, and could make the scratch schema look like a tampered store (add
 * to each new `inventory` the trigger the store has).
 */
async function eventTriggers (client: Queryable, trusted: readonly string[]): Promise<SchemaObject[]> {
  const { rows } = await client.query<{ name: string, definition: string }>(
    `SELECT e.evtname AS name, concat_ws(' | ', e.evtevent, e.evtfoid::regprocedure::text, e.evtenabled, e.evttags::text) AS definition
       FROM pg_event_trigger e
      WHERE NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_event_trigger'::regclass AND d.objid = e.oid AND d.deptype = 'e')
        AND NOT (e.evtname = ANY ($1::text[]))`, [trusted])
  return rows.map((row) => ({ type: 'event trigger', name: row.name, table: null, definition: row.definition }))
}

/**
 * What each history makes, by server (address, port, database, version: PostgreSQL renders definitions) and history:
 * a process checks the same few again and again (each start, each command, each store a test makes).
 */
const expectedByHistory = new Map<string, SchemaObject[]>()

/** How the store's schema_migrations was made: not at all, by a release before checksums, or with them. */
type Bookkeeping = 'none' | 'before checksums' | 'checksums'

async function bookkeepingOf (client: Queryable, schema: string): Promise<Bookkeeping> {
  const { rows: [row] } = await client.query<{ table: boolean, checksum: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = $1 AND c.relname = 'schema_migrations' AND c.relkind IN ('r', 'p')) AS table,
            EXISTS (SELECT 1 FROM information_schema.columns
                     WHERE table_schema = $1 AND table_name = 'schema_migrations' AND column_name = 'checksum') AS checksum`, [schema])
  return row?.table !== true ? 'none' : row.checksum ? 'checksums' : 'before checksums'
}

/**
 * Checks the store's schema (the current schema of `client`, which must be in a transaction) against what `history`
 * creates; throws SchemaError('altered') naming what differs. Returns null when checked, or why it could not be
 * (no schema, no right to create the scratch one, a read-only server) without changing anything. The event triggers
 * named in `trustedEventTriggers` are left out of the comparison.
 */
export async function requirePostgresSchema (client: Queryable, history: readonly Migration[], version: number,
  trustedEventTriggers: readonly string[] = []): Promise<string | null> {
  const { rows: [where] } = await client.query<{ schema: string | null, allowed: boolean, server: string }>(
    `SELECT current_schema() AS schema, has_database_privilege(current_database(), 'CREATE') AS allowed,
            concat_ws(' ', inet_server_addr(), inet_server_port(), current_database(), current_setting('server_version_num')) AS server`)
  if (where?.schema === null || where?.schema === undefined) return 'no schema on the search path exists'
  if (!where.allowed) return NOT_ALLOWED
  const actual = [...await describe(client, where.schema), ...await eventTriggers(client, trustedEventTriggers)]
  const bookkeeping = await bookkeepingOf(client, where.schema)
  const key = [where.server, bookkeeping, ...history.map((m) => `${m.version}:${checksum(m)}`)].join(' ')
  let expected = expectedByHistory.get(key)
  if (expected === undefined) {
    const made = await replay(client, history, bookkeeping)
    if (typeof made === 'string') return made
    expected = made
    expectedByHistory.set(key, expected)
  }
  requireSchema(actual, expected, version)
  return null
}

const NOT_ALLOWED = 'its role may not create the scratch schema the check runs the migrations in (CREATE on the database: ' +
  'the owner role that runs petstore migrate has it)'

/**
 * What `history` creates, run in a scratch schema inside a savepoint rolled back afterwards (the schema and the search
 * path set for it go with it, whatever happened): nothing of it is ever seen by another session. A string when the
 * scratch schema may not be made here (no privilege, a read-only server).
 */
async function replay (client: Queryable, history: readonly Migration[], bookkeeping: Bookkeeping): Promise<SchemaObject[] | string> {
  const scratch = `petstore_check_${randomBytes(6).toString('hex')}`
  await client.query('SAVEPOINT petstore_schema_check')
  try {
    try {
      await client.query(`CREATE SCHEMA ${scratch}`)
    } catch (error) {
      const code = (error as { code?: unknown }).code
      if (code === '42501') return NOT_ALLOWED
      if (code === '25006') return 'the server is read-only: the check cannot run the migrations in a scratch schema there'
      throw error
    }
    await client.query("SELECT set_config('search_path', $1, true)", [scratch])
    if (bookkeeping !== 'none') await client.query(bookkeeping === 'checksums' ? BOOKKEEPING.create : BOOKKEEPING.createBeforeChecksums)
    for (const migration of history) await client.query(migration.sql ?? '')
    return await describe(client, scratch)
  } finally {
    await client.query('ROLLBACK TO SAVEPOINT petstore_schema_check')
    await client.query('RELEASE SAVEPOINT petstore_schema_check')
  }
}
