/**
 * Schema migrations, shared by both stores: what a migration is, its checksum, and the rules that decide, from
 * the migrations a store has applied, whether this release may use it (as Flyway's validate does).
 *
 * Migrations are append-only: what landed on main is released, and someone may run it. A released migration is
 * never edited; a change is a new migration. Each applied migration's checksum is recorded in the store; a store
 * whose recorded checksum is neither this release's migration of that version nor a known earlier variant of it
 * is refused (the migration was edited after it ran). Earlier variants that did land (see `superseded`) are
 * accepted only because a later migration of this release converts them.
 */
import { createHash } from 'node:crypto'

/** A step of a migration: a statement list, or one that runs only when `when` (a query of one value) is true. */
export type MigrationStep = string | { readonly when: string, readonly then: string }

export interface Migration {
  readonly version: number
  readonly name: string
  /** The statements, run in one transaction with the bookkeeping row. */
  readonly sql?: string
  /** Instead of `sql`: steps run in order (SQLite has no conditional DDL, so a conversion is written as steps). */
  readonly steps?: readonly MigrationStep[]
}

/**
 * A migration that landed in an earlier form; a later migration of this release converts a store that ran it. Its
 * statements are kept as they landed (`checksum` pins them), so the schema check can rebuild what it made.
 */
export interface SupersededMigration extends Migration {
  readonly checksum: string
  /** The migration that converts it. */
  readonly convertedBy: number
  /**
   * When an applied row does not record its checksum (releases before checksums) and this variant shares its
   * name with another: a query of one value, true when the store shows this variant's schema.
   */
  readonly detect?: string
}

/** A dialect's migrations: this release's list and the earlier variants it knows and converts. */
export interface MigrationPlan {
  readonly migrations: readonly Migration[]
  readonly superseded: readonly SupersededMigration[]
}

/** A row of schema_migrations; `checksum` is null for rows written before checksums were recorded. */
export interface AppliedMigration {
  version: number
  name: string
  checksum: string | null
}

/** The SHA-256 of what a migration does: its version, name and statements, exactly as written. */
export function checksum (migration: Migration): string {
  const body = migration.steps === undefined
    ? migration.sql ?? ''
    : migration.steps.map((step) => typeof step === 'string' ? step : `WHEN ${step.when}\nTHEN ${step.then}`).join('\n;\n')
  return createHash('sha256').update(`${migration.version}\n${migration.name}\n${body}`).digest('hex')
}

export type SchemaProblem = 'edited' | 'behind' | 'ahead' | 'altered'

/**
 * The store cannot be used as it is by this release: a released migration was edited (`edited`), the store
 * needs `petstore migrate` (`behind`), a newer release migrated it (`ahead`), or its schema objects are not what its
 * migrations define (`altered`: src/store/schema-check.ts). The CLI exits 2 with the message.
 */
export class SchemaError extends Error {
  /**
   * `reason`: what is wrong; `remedy`: the petstore command that resolves it (`migrate`), or null. The message names
   * the command as `petstore`; describe() as the person running the CLI types it.
   */
  constructor (readonly problem: SchemaProblem, readonly reason: string, readonly remedy: string | null = null) {
    super(remedy === null ? reason : `${reason}: run \`petstore ${remedy}\` first`)
    this.name = 'SchemaError'
  }

  /** The message with the remedy spelled as `command` (`npx petstore`, `petstore`) runs the CLI. */
  describe (command: string): string {
    return this.remedy === null ? this.reason : `${this.reason}: run \`${command} ${this.remedy}\` first`
  }
}

/** Where a store's schema stands against this release. */
export interface SchemaStatus {
  /** The highest applied version (0: a store without a schema). */
  version: number
  /** The highest version this release knows. */
  latest: number
  /** Migrations this release would apply. */
  pending: readonly Migration[]
  /** Applied versions beyond this release's (a newer release migrated the store, then was rolled back). */
  ahead: readonly AppliedMigration[]
  /**
   * Why the store's schema objects were not compared with what its migrations make (src/store/schema-check.ts), when
   * they could not be here: PostgreSQL with a role that may not create the scratch schema the check needs. Absent when
   * they were compared (and found the same: a difference is a SchemaError), or for a store ahead of this release.
   */
  objectsUnchecked?: string
}

const short = (hex: string): string => hex.slice(0, 12)

/** The `detect` queries of a plan: what a store answers them decides the variant of rows without checksums. */
export function detectQueries (plan: MigrationPlan): string[] {
  return plan.superseded.flatMap((variant) => variant.detect === undefined ? [] : [variant.detect])
}

/**
 * The checksum a row was applied with: recorded, or (rows from before checksums) the one variant of that version
 * and name this release knows, telling same-named variants apart by the answers to their `detect` queries.
 */
export function appliedChecksum (row: AppliedMigration, plan: MigrationPlan, detected: ReadonlyMap<string, boolean>): string | null {
  if (row.checksum !== null) return row.checksum
  for (const variant of plan.superseded) {
    if (variant.version !== row.version || variant.name !== row.name) continue
    if (variant.detect === undefined || detected.get(variant.detect) === true) return variant.checksum
  }
  const current = plan.migrations.find((m) => m.version === row.version && m.name === row.name)
  return current === undefined ? null : checksum(current)
}

/**
 * Validates the applied migrations (with their checksums resolved) against this release and says what is
 * pending. Throws SchemaError('edited') when an applied migration is not one this release knows in any landed
 * form, naming it.
 */
export function schemaStatus (applied: readonly AppliedMigration[], plan: MigrationPlan, detected: ReadonlyMap<string, boolean>): SchemaStatus {
  const latest = Math.max(0, ...plan.migrations.map((m) => m.version))
  const ahead = applied.filter((row) => row.version > latest)
  for (const row of applied) {
    if (row.version > latest) continue
    const resolved = appliedChecksum(row, plan, detected)
    const current = plan.migrations.find((m) => m.version === row.version)
    const known = [
      ...(current === undefined ? [] : [checksum(current)]),
      ...plan.superseded.filter((v) => v.version === row.version).map((v) => v.checksum)
    ]
    if (resolved === null || !known.includes(resolved)) {
      const expected = current === undefined ? 'no migration of that version' : `${short(checksum(current))} ("${current.name}")`
      throw new SchemaError('edited',
        `migration ${row.version} ("${row.name}") applied to this store (checksum ${resolved === null ? 'unknown' : short(resolved)}) ` +
        `is not the one this release has (${expected}): a released migration was changed after it ran. Refusing to use the store; ` +
        'restore the released migration or run the release that applied it.')
    }
  }
  const done = new Set(applied.map((row) => row.version))
  return {
    version: Math.max(0, ...applied.map((row) => row.version)),
    latest,
    pending: plan.migrations.filter((m) => !done.has(m.version)),
    ahead
  }
}

/**
 * The migrations a store ran, in version order, each in the form it ran in (this release's, or the landed variant
 * its checksum names): replayed on an empty database, they make the schema the store should have. For a history
 * schemaStatus accepted, and versions this release knows (a store ahead of it has later ones no one here can replay).
 */
export function appliedHistory (applied: readonly AppliedMigration[], plan: MigrationPlan, detected: ReadonlyMap<string, boolean>): Migration[] {
  return [...applied].sort((a, b) => a.version - b.version).map((row) => {
    const resolved = appliedChecksum(row, plan, detected)
    const ran = [...plan.migrations, ...plan.superseded].find((m) => m.version === row.version && checksum(m) === resolved)
    if (ran === undefined) throw new Error(`migration ${row.version} ("${row.name}") is not one this release knows`)
    return ran
  })
}

/** What an operation may do with a store in this state; throws SchemaError with the reason when it may not. */
export function requireUsable (status: SchemaStatus, access: 'read' | 'write'): void {
  if (status.pending.length > 0 && status.version > 0) {
    throw new SchemaError('behind', `the store schema is at version ${status.version} and this release needs version ${status.latest}`, 'migrate')
  }
  if (status.ahead.length > 0 && access === 'write') throw aheadError(status)
}

export function aheadError (status: SchemaStatus): SchemaError {
  return new SchemaError('ahead',
    `the store schema is at version ${status.version}, newer than this release (version ${status.latest}): a newer release migrated it. ` +
    'Refusing to write to it; reads still work. Run the newer release, or restore a backup taken before it migrated.')
}
