/**
 * The PostgreSQL store's settings and their defaults, apart from the store itself (no pg here): the configuration
 * reads them from the environment (DATABASE_*) without loading the driver.
 */

/** A postgres:// or postgresql:// URL names the PostgreSQL store; anything else is a SQLite file path. */
export function isPostgresUrl (databaseUrl: string): boolean {
  return /^postgres(ql)?:\/\//i.test(databaseUrl)
}

/**
 * What stands between the instances and PostgreSQL: none (PostgreSQL itself), or a pooler in transaction mode
 * (PgBouncer pool_mode=transaction), which refuses session settings at connect and keeps none between transactions.
 */
export const DATABASE_POOLERS = ['none', 'transaction'] as const
export type DatabasePooler = typeof DATABASE_POOLERS[number]

/** The settings a store gets where none are given (a store built in a test), and DATABASE_*'s defaults. */
export const DATABASE_DEFAULTS = Object.freeze({ poolSize: 10, statementTimeoutMs: 5000, connectTimeoutMs: 2000 })

export interface PostgresOptions {
  /** Pool size per instance. */
  poolSize?: number
  /** Server-side limit per statement (statement_timeout) and client-side wait for an answer, in ms. */
  statementTimeoutMs?: number
  /** How long to wait for a connection from the pool (or a new one), in ms. */
  connectTimeoutMs?: number
  /** A schema to work in (search_path), for isolated test runs; the URL's database default otherwise. Not with pooler 'transaction'. */
  schema?: string
  /**
   * What stands between the store and PostgreSQL (DATABASE_POOLER). 'none': PostgreSQL itself (or a pooler that
   * passes session settings), and the statement timeout is a setting of each connection. 'transaction': a pooler
   * such as PgBouncer that hands a server connection to a client for one transaction at a time and refuses session
   * settings at connect; the store then sends none, and keeps its statement timeout in every transaction instead
   * (see PostgresDatabase).
   */
  pooler?: DatabasePooler
  /**
   * Event triggers the operator vouches for (DATABASE_TRUSTED_EVENT_TRIGGERS): a managed PostgreSQL's own, which the
   * schema check (./schema.ts) would otherwise refuse, since an event trigger runs with the check's own DDL.
   */
  trustedEventTriggers?: readonly string[]
}
