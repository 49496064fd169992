import { ConfigError, isPostgresUrl } from '../config.js'
import { SqliteStore } from './sqlite/index.js'
import type { Store } from './types.js'

/** Opens the store named by DATABASE_URL. Does not migrate. */
export function openStore (databaseUrl: string): Store {
  if (isPostgresUrl(databaseUrl)) {
    throw new ConfigError('PostgreSQL (DATABASE_URL=postgres://...) is not available in this build yet; use a SQLite file path')
  }
  return new SqliteStore(databaseUrl)
}
