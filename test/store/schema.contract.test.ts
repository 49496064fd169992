/** The store's own contract (./schema.contract.ts: its schema, ping and kind) on SQLite and on PostgreSQL, each test on a fresh store. */
import { tempStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { schemaContract } from './schema.contract.js'

schemaContract('SqliteStore', tempStore)
if (await requirePostgres('PostgreSQL schema contract tests')) schemaContract('PostgresStore', (t) => tempPostgresStore(t))
