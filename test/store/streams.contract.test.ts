/** The change streams contract (./streams.contract.ts) on SQLite and on PostgreSQL. */
import { requirePostgres } from '../helpers/postgres.js'
import { postgresHarness, sqliteHarness } from './harness.js'
import { streamsContract } from './streams.contract.js'

streamsContract('SqliteStore', sqliteHarness)
if (await requirePostgres('PostgreSQL streams contract tests')) streamsContract('PostgresStore', postgresHarness)
