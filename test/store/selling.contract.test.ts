/** The selling contract (./selling.contract.ts) on SQLite and on PostgreSQL, each test on a fresh, migrated store. */
import { requirePostgres } from '../helpers/postgres.js'
import { postgresHarness, sqliteHarness, threadedSqliteHarness } from './harness.js'
import { sellingContract } from './selling.contract.js'

sellingContract('SqliteStore', sqliteHarness)
sellingContract('SqliteStore (writer thread)', threadedSqliteHarness)
if (await requirePostgres('PostgreSQL selling contract tests')) sellingContract('PostgresStore', postgresHarness)
