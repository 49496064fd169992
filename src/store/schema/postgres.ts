/**
 * The PostgreSQL store's schema: its migrations (../postgres/migrations.ts), applied under an advisory lock, its
 * objects checked against them (../postgres/schema.ts), and its epochs, confirmed against what identifies the database.
 */
import type pg from 'pg'
import { StoreUnavailableError } from '../../errors.js'
import { aheadError, appliedChecksum, appliedHistory, checksum, schemaStatus, type AppliedMigration, type SchemaStatus } from '../migrations.js'
import type { PostgresDatabase, Queryable } from '../postgres/database.js'
import { BOOKKEEPING, PLAN } from '../postgres/migrations.js'
import { requirePostgresSchema } from '../postgres/schema.js'
import { EPOCH_COLUMNS, newEpochId, toEpoch, type EpochRow } from '../stock/rows.js'
import type { EpochConfirmation, SchemaStore } from './types.js'

/** No PostgreSQL migration shares a name with an earlier variant, so no store is ever asked which one it ran. */
const NOTHING_DETECTED: ReadonlyMap<string, boolean> = new Map()

/** Migrations of all instances take this advisory lock, so concurrent starters apply each version once. */
const MIGRATION_LOCK = 7_265_001_042n

/** The largest int8: an epoch that begins after (position, this) takes every change from the next position on. */
const AFTER_EVERY_ID = 9_223_372_036_854_775_807n

/** What identifies the database a store is on (each part null where it cannot be read); see confirmEpoch. */
interface DatabaseIdentity {
  /** The cluster's, from pg_control_system(): a new one for another cluster (initdb, pg_upgrade), kept by physical copies. */
  systemIdentifier: string | null
  /** The database's oid: another for a database restored with pg_restore (or made as a copy of a template). */
  databaseOid: bigint | null
  /** The oid of the store's own store_epochs table: another once pg_restore --clean has dropped and made it again. */
  tableOid: bigint | null
  /** The WAL timeline: a new one after point-in-time recovery or the promotion of a replica. */
  timeline: bigint | null
}

export class PostgresSchema implements SchemaStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  /** The rows of schema_migrations (checksums null where not recorded); none when the table does not exist. */
  async #appliedMigrations (client: Queryable): Promise<AppliedMigration[]> {
    const { rows: [table] } = await client.query<{ found: boolean, checksum: boolean }>(
      `SELECT to_regclass('schema_migrations') IS NOT NULL AS found,
         EXISTS (SELECT 1 FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = 'schema_migrations' AND column_name = 'checksum') AS checksum`)
    if (table?.found !== true) return []
    const { rows } = await client.query<AppliedMigration>(
      `SELECT version, name, ${table.checksum ? 'checksum' : 'NULL AS checksum'} FROM schema_migrations ORDER BY version`)
    return rows
  }

  /**
   * Where the schema stands against this release, its objects compared with what its migrations make
   * (src/store/postgres/schema.ts: in a transaction, for the scratch schema's savepoint); SchemaError when a migration
   * was edited or the objects differ.
   */
  async schemaStatus (): Promise<SchemaStatus> {
    return await this.#db.transaction(async (client) => {
      const applied = await this.#appliedMigrations(client)
      const status = schemaStatus(applied, PLAN, NOTHING_DETECTED)
      return { ...status, ...await this.#requireSchema(client, applied, status) }
    })
  }

  /** The schema check, for a store not ahead of this release: nothing, or why it could not run here. */
  async #requireSchema (client: pg.PoolClient, applied: AppliedMigration[], status: SchemaStatus): Promise<{ objectsUnchecked?: string }> {
    if (status.ahead.length > 0) return {}
    const unchecked = await requirePostgresSchema(client, appliedHistory(applied, PLAN, NOTHING_DETECTED), status.version,
      this.#db.trustedEventTriggers)
    return unchecked === null ? {} : { objectsUnchecked: unchecked }
  }

  /**
   * Validates the applied migrations, records the checksums of rows from before checksums, and applies what is
   * pending, in one transaction under an advisory lock, so that instances migrating at once apply each version
   * once. A store ahead of this release, or with an edited migration, is left as it is.
   */
  async migrate (): Promise<number> {
    return this.#db.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
      await client.query(BOOKKEEPING.create)
      await client.query(BOOKKEEPING.addChecksum)
      const applied = await this.#appliedMigrations(client)
      const status = schemaStatus(applied, PLAN, NOTHING_DETECTED)
      if (status.ahead.length > 0) throw aheadError(status)
      // A store that ran no migration yet holds nothing of the service to compare; anything else in its schema is
      // named by the next schemaStatus, which every command and serve asks before and after migrating. (Skipping it
      // here saves each new store the catalog reads, 0.3 s on a server whose catalogs many schemas have grown.)
      if (applied.length > 0) await this.#requireSchema(client, applied, status)
      for (const row of applied) {
        if (row.checksum !== null) continue
        await client.query('UPDATE schema_migrations SET checksum = $1 WHERE version = $2', [appliedChecksum(row, PLAN, NOTHING_DETECTED), row.version])
      }
      for (const migration of status.pending) {
        await client.query(migration.sql ?? '')
        await client.query('INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES ($1, $2, now(), $3)',
          [migration.version, migration.name, checksum(migration)])
      }
      return status.pending.length
    })
  }

  /** What identifies the database now; a part that cannot be read (no right to it, a standby's WAL) is null and named. */
  async #identity (): Promise<{ identity: DatabaseIdentity, unreadable: string[] }> {
    const unreadable: string[] = []
    const read = async <T> (name: string, sql: string): Promise<T | null> => {
      try {
        const { rows } = await this.#db.query<{ v: T | null }>(sql)
        return rows[0]?.v ?? null
      } catch (error) {
        if (error instanceof StoreUnavailableError) throw error
        unreadable.push(name)
        return null
      }
    }
    const identity = {
      systemIdentifier: await read<string>('system identifier (pg_control_system)', 'SELECT system_identifier::text AS v FROM pg_control_system()'),
      databaseOid: await read<bigint>('database oid', 'SELECT oid::int8 AS v FROM pg_database WHERE datname = current_database()'),
      tableOid: await read<bigint>('table oid', "SELECT 'store_epochs'::regclass::oid::int8 AS v"),
      // The timeline is the first 8 hexadecimal digits of a WAL file's name, the one being written now.
      timeline: await read<bigint>('WAL timeline (pg_walfile_name, pg_current_wal_lsn)',
        "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int8 AS v")
    }
    return { identity, unreadable }
  }

  /**
   * Compares what identifies the database now with what the current epoch recorded (and the feed clock's timeline),
   * under the feed clock's lock, so that no writer takes a feed position meanwhile and instances starting at once
   * start one epoch: another cluster, database or table (pg_restore, also with --clean into the same database; a copy)
   * or another timeline (point-in-time recovery, a promotion this store's commits have not met yet) starts a new epoch
   * after the last position taken; so does `restored`. A part not recorded yet (an epoch made by a migration, or by
   * the commit trigger) is recorded; a part that cannot be read is not compared.
   */
  async confirmEpoch ({ restored = false }: { restored?: boolean } = {}): Promise<EpochConfirmation> {
    const { identity, unreadable } = await this.#identity()
    return await this.#db.transaction(async (client) => {
      const { rows: [clock] } = await client.query<{ position: bigint, timeline: bigint | null }>('SELECT position, timeline FROM feed_clock WHERE id = 1 FOR UPDATE')
      const { rows: [latest] } = await client.query<EpochRow & { seq: number, system_identifier: string | null, database_oid: bigint | null, table_oid: bigint | null, timeline: bigint | null }>(
        `SELECT e.seq, ${EPOCH_COLUMNS}, e.system_identifier, e.database_oid, e.table_oid, e.timeline FROM store_epochs e ORDER BY e.seq DESC LIMIT 1`)
      if (clock === undefined || latest === undefined) throw new Error('the store has no feed clock or no epoch: run petstore migrate')
      const differs = <T> (recorded: T | null, now: T | null): boolean => recorded !== null && now !== null && recorded !== now
      const elsewhere = differs(latest.system_identifier, identity.systemIdentifier) || differs(latest.database_oid, identity.databaseOid) ||
        differs(latest.table_oid, identity.tableOid)
      const timeline = differs(clock.timeline ?? latest.timeline, identity.timeline)
      if (elsewhere || timeline || restored) {
        const { rows: [row] } = await client.query<EpochRow>(
          `INSERT INTO store_epochs (seq, epoch, after_order, after_id, reason, system_identifier, database_oid, table_oid, timeline)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING epoch, after_order, after_id, started_at, reason`,
          [latest.seq + 1, newEpochId(), clock.position, AFTER_EVERY_ID, elsewhere ? 'new database' : timeline ? 'new timeline' : 'restored',
            identity.systemIdentifier, identity.databaseOid, identity.tableOid, identity.timeline])
        await client.query('UPDATE feed_clock SET timeline = $1 WHERE id = 1', [identity.timeline])
        return { epoch: toEpoch(row as EpochRow), started: true, unreadable }
      }
      const missing = (latest.system_identifier === null && identity.systemIdentifier !== null) || (latest.database_oid === null && identity.databaseOid !== null) ||
        (latest.table_oid === null && identity.tableOid !== null) || (latest.timeline === null && identity.timeline !== null)
      if (missing) {
        await client.query(`UPDATE store_epochs SET system_identifier = coalesce(system_identifier, $1), database_oid = coalesce(database_oid, $2),
          table_oid = coalesce(table_oid, $3), timeline = coalesce(timeline, $4) WHERE seq = $5`,
        [identity.systemIdentifier, identity.databaseOid, identity.tableOid, identity.timeline, latest.seq])
      }
      if (identity.timeline !== null && clock.timeline !== identity.timeline) {
        await client.query('UPDATE feed_clock SET timeline = $1 WHERE id = 1', [identity.timeline])
      }
      return { epoch: toEpoch(latest), started: false, unreadable }
    })
  }
}
