/** The API keys contract (./keys.contract.ts) on SQLite and on PostgreSQL, each test on a fresh, migrated store. */
import { tempStore, tempThreadedStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { keysContract } from './keys.contract.js'

keysContract('SqliteStore', tempStore)
keysContract('SqliteStore (writer thread)', tempThreadedStore)
if (await requirePostgres('PostgreSQL keys contract tests')) keysContract('PostgresStore', (t) => tempPostgresStore(t))
