/** The selling contract (./selling.contract.ts) on SQLite, each test on a fresh, migrated store. */
import { sqliteHarness } from './harness.js'
import { sellingContract } from './selling.contract.js'

sellingContract('SqliteStore', sqliteHarness)
