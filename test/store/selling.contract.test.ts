/** The selling contract (./selling.contract.ts) on SQLite and on PostgreSQL, each test on a fresh, migrated store. */
import { requirePostgres } from '../helpers/postgres.js'
import { postgresHarness, sqliteHarness } from './harness.js'
import { sellingContract } from './selling.contract.js'

sellingContract('SqliteStore', sqliteHarness)
if (await requirePostgres('PostgreSQL selling contract tests')) sellingContract('PostgresStore', postgresHarness)
