/** The stock contract (./stock.contract.ts) on SQLite and on PostgreSQL, each test on a fresh, migrated store. */
import { tempStore, tempThreadedStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { stockContract } from './stock.contract.js'

stockContract('SqliteStore', tempStore)
stockContract('SqliteStore (writer thread)', tempThreadedStore)
if (await requirePostgres('PostgreSQL stock contract tests')) stockContract('PostgresStore', (t) => tempPostgresStore(t))
