/** The schema of a store: its migrations, where it stands against this release, and (SQLite) a copy of the file. */
import type { SchemaStatus } from '../migrations.js'

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
}

export type SchemaStore = SchemaReads & SchemaWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const SCHEMA_WRITES = {
  migrate: 'refuse'
} as const satisfies Record<keyof SchemaWrites, 'refuse' | 'skip'>
