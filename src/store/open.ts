import { isPostgresUrl, type Config } from '../config.js'
import { PostgresStore } from './postgres/index.js'
import { SqliteStore } from './sqlite/index.js'
import type { Store } from './types.js'

/** Opens the store named by DATABASE_URL: postgres:// or postgresql:// for PostgreSQL, a file path for SQLite. Does not migrate. */
export function openStore (config: Pick<Config, 'databaseUrl' | 'database'>): Store {
  if (isPostgresUrl(config.databaseUrl)) return new PostgresStore(config.databaseUrl, config.database)
  return new SqliteStore(config.databaseUrl)
}
