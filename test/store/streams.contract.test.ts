/** The change streams contract (./streams.contract.ts) on SQLite and on PostgreSQL. */
import { requirePostgres } from '../helpers/postgres.js'
import { postgresHarness, sqliteHarness, threadedSqliteHarness } from './harness.js'
import { streamsContract } from './streams.contract.js'

streamsContract('SqliteStore', sqliteHarness)
streamsContract('SqliteStore (writer thread)', threadedSqliteHarness)
if (await requirePostgres('PostgreSQL streams contract tests')) streamsContract('PostgresStore', postgresHarness)
