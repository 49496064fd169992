/** The stock contract (./stock.contract.ts) on SQLite and on PostgreSQL, each test on a fresh, migrated store. */
import { tempStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { stockContract } from './stock.contract.js'

stockContract('SqliteStore', tempStore)
if (await requirePostgres('PostgreSQL stock contract tests')) stockContract('PostgresStore', (t) => tempPostgresStore(t))
