/** The catalogue contract (./catalog.contract.ts) on SQLite and on PostgreSQL, each test on a fresh, migrated store. */
import { tempStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { catalogContract } from './catalog.contract.js'

catalogContract('SqliteStore', tempStore)
if (await requirePostgres('PostgreSQL catalog contract tests')) catalogContract('PostgresStore', (t) => tempPostgresStore(t))
