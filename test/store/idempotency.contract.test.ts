/** The idempotency contract (./idempotency.contract.ts) on SQLite and on PostgreSQL, each test on a fresh, migrated store. */
import { tempStore, tempThreadedStore } from '../helpers/app.js'
import { requirePostgres, tempPostgresStore } from '../helpers/postgres.js'
import { idempotencyContract } from './idempotency.contract.js'

idempotencyContract('SqliteStore', tempStore)
idempotencyContract('SqliteStore (writer thread)', tempThreadedStore)
if (await requirePostgres('PostgreSQL idempotency contract tests')) idempotencyContract('PostgresStore', (t) => tempPostgresStore(t))
