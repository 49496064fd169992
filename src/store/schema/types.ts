/**
 * The schema of a store: its migrations, where it stands against this release, the store's epoch (which every process
 * that writes confirms first), and (SQLite) a copy of the file.
 */
import type { SchemaStatus } from '../migrations.js'
import type { StoreEpoch } from '../stock/types.js'

/** What confirming a store's epoch found: the epoch now current, whether it began just now. */
export interface EpochConfirmation {
  epoch: StoreEpoch
  started: boolean
  /** What identifies the database and could not be read (PostgreSQL without the right): detection is weaker then. */
  unreadable: string[]
}

export interface SchemaReads {
  /** Where the schema stands against this release, changing nothing; throws SchemaError for an edited migration. */
  schemaStatus (): Promise<SchemaStatus>
  /**
   * Copies the whole store to a new file at `path`, consistent while others write: what `petstore migrate` keeps of a
   * store before it changes its schema. Only where the store is a file (SQLite); operators back up PostgreSQL by
   * their own means.
   */
  copyTo?(path: string): Promise<void>
}

export interface SchemaWrites {
  /**
   * Validates the applied migrations against this release (checksums), records the checksums of rows written
   * before checksums, and applies pending migrations; returns how many were applied. Idempotent. Throws
   * SchemaError when a released migration was edited, or when the store is ahead of this release.
   */
  migrate (): Promise<number>
  /**
   * Starts a new epoch when the store's history may have forked since it was last confirmed, before anything else
   * writes to it: SQLite, a copy made by `petstore backup` or `petstore restore` (marked as such) opened as the store
   * for the first time; PostgreSQL, a database other than the one last confirmed (its cluster's system identifier,
   * its oid, the oid of the store's own table) or a new WAL timeline. Otherwise records what identifies the database,
   * where not known yet. With `restored` (the operator says the store was just restored by means nothing detects), a
   * new epoch begins in any case. Run by every process that writes (serve, migrate, the CLI's writes); idempotent
   * without `restored`, and safe for instances starting at once.
   */
  confirmEpoch (options?: { restored?: boolean }): Promise<EpochConfirmation>
}

export type SchemaStore = SchemaReads & SchemaWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const SCHEMA_WRITES = {
  migrate: 'refuse',
  confirmEpoch: 'refuse'
} as const satisfies Record<keyof SchemaWrites, 'refuse' | 'skip'>
