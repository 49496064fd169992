/** Pets and orders on PostgreSQL; an import also writes the stock and ledger rows the records bring, in its one transaction. */
import type pg from 'pg'
import type { Order, OrderStatus, Pet, PetImport, PetStatus } from '../../model.js'
import type { PostgresDatabase } from '../postgres/database.js'
import { setPoints, trackLowStockOf } from '../alerts/postgres.js'
import { ORDER_COLUMNS, PET_COLUMNS, petColumns, progressReporter, toOrder, toPet, type OrderRow, type PetRow } from './rows.js'
import type { CatalogStore, ImportedCurrent, ImportedStockRule, ImportOptions, ImportResult, OrderPage } from './types.js'

/**
 * Imports take this advisory lock, one at a time: an import reads what the pets are before it replaces them, and a pet
 * another import has inserted but not committed is invisible to it (nothing to lock), so two at once could each take a
 * pet for new and record its status change as nothing, or as a second creation.
 */
const IMPORT_LOCK = 7_265_001_043n

export class PostgresCatalog implements CatalogStore {
  readonly #db: PostgresDatabase

  constructor (db: PostgresDatabase) {
    this.#db = db
  }

  async getPet (id: bigint): Promise<Pet | null> {
    const { rows } = await this.#db.query<PetRow>(
      `SELECT ${PET_COLUMNS} FROM pets WHERE id = $1`, [id])
    return rows[0] === undefined ? null : toPet(rows[0])
  }

  async countPets (): Promise<number> {
    const { rows } = await this.#db.query<{ n: bigint }>('SELECT count(*) AS n FROM pets')
    return Number(rows[0]?.n ?? 0n)
  }

  async listOrders ({ afterId, limit, status }: { afterId: bigint | null, limit: number, status: OrderStatus | null }): Promise<OrderPage> {
    const { rows } = await this.#db.query<OrderRow>(
      `SELECT ${ORDER_COLUMNS} FROM orders
       WHERE ($1::bigint IS NULL OR id > $1) AND ($2::text IS NULL OR status = $2) AND status <> 'cancelled'
       ORDER BY id LIMIT $3`, [afterId, status, limit + 1])
    return { orders: rows.slice(0, limit).map(toOrder), hasMore: rows.length > limit }
  }

  async importData ({ pets, orders }: { pets: PetImport[], orders: Order[] }, options: ImportOptions): Promise<ImportResult> {
    const CHUNK = 5000
    const report = progressReporter(pets.length + orders.length, options.onProgress)
    const at = options.at ?? new Date()
    const kept: bigint[] = []
    await this.#db.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [IMPORT_LOCK])
      // The orders the import brings, locked first: an order's move locks its order, then its hold, then its pets'
      // entries (../selling/postgres.ts), and the upsert below locks an order placed through the API under the same id
      // even when it leaves it as it is. Locking them after the entries would deadlock with such a move.
      if (orders.length > 0) await client.query('SELECT id FROM orders WHERE id = ANY ($1::bigint[]) ORDER BY id FOR UPDATE', [orders.map((o) => o.id)])
      // Every stock entry the import may write, locked before its first write. A chunk's writes take the inventory
      // version's row lock (its triggers) until the commit; a PATCH of a pet in a later chunk holds that entry's lock
      // and waits for the version row, so locking entries chunk by chunk could deadlock with it. Locked up front, the
      // import waits for such PATCHes before it holds the version row, and later ones wait for the import.
      // Their quantities stay as read until the import reaches each pet (a pet appears once in an import).
      const { rows: locked } = await client.query<{ pet_id: bigint, quantity: number }>(
        'SELECT pet_id, quantity FROM inventory WHERE pet_id = ANY ($1::bigint[]) ORDER BY pet_id FOR UPDATE', [pets.map((pet) => pet.id)])
      const quantities = new Map(locked.map((row) => [row.pet_id, row.quantity]))
      // Multi-row upserts from arrays (unnest): one round trip per chunk instead of one per record.
      for (let i = 0; i < pets.length; i += CHUNK) {
        const chunk = pets.slice(i, i + CHUNK)
        const current = await this.#importCurrent(client, chunk, quantities)
        const columns = chunk.map((pet) => [pet.id, ...petColumns(pet)])
        await client.query(
          `INSERT INTO pets (id, name, status, category_id, category_name, photo_urls, tags)
           SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[])
           ON CONFLICT (id) DO UPDATE SET name = excluded.name, status = excluded.status, category_id = excluded.category_id,
             category_name = excluded.category_name, photo_urls = excluded.photo_urls, tags = excluded.tags`,
          [0, 1, 2, 3, 4, 5, 6].map((c) => columns.map((row) => row[c] ?? null)))
        const imported = await this.#importStock(client, chunk, current, options.stockChange, at)
        await this.#importPoints(client, chunk, current, imported, at)
        report(chunk.length)
      }
      for (let i = 0; i < orders.length; i += CHUNK) {
        const chunk = orders.slice(i, i + CHUNK)
        // An order placed through the API with this id is left as it is (ImportResult.keptOrders): no row comes back for it.
        const { rows: written } = await client.query<{ id: bigint }>(
          `INSERT INTO orders (id, pet_id, quantity, ship_date, status, complete)
           SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::integer[], $4::text[], $5::text[], $6::boolean[])
           ON CONFLICT (id) DO UPDATE SET pet_id = excluded.pet_id, quantity = excluded.quantity,
             ship_date = excluded.ship_date, status = excluded.status, complete = excluded.complete
           WHERE orders.source = 'import'
           RETURNING id`,
          [chunk.map((o) => o.id), chunk.map((o) => o.petId), chunk.map((o) => o.quantity), chunk.map((o) => o.shipDate),
            chunk.map((o) => o.status), chunk.map((o) => o.complete)])
        const ids = new Set(written.map((row) => row.id))
        for (const o of chunk) if (!ids.has(o.id)) kept.push(o.id)
        report(chunk.length)
      }
    })
    return { pets: pets.length, orders: orders.length - kept.length, ...(kept.length === 0 ? {} : { keptOrders: kept }) }
  }

  /**
   * What the store holds of the pets an import chunk is about to replace: their status and their entry's quantity
   * (the quantities as importData read them when it locked the entries; imports run one at a time), so that what the ledger records as before
   * is what the import replaces.
   */
  async #importCurrent (client: pg.PoolClient, pets: PetImport[], quantities: ReadonlyMap<bigint, number>): Promise<Map<bigint, ImportedCurrent>> {
    const { rows: statuses } = await client.query<{ id: bigint, status: PetStatus }>(
      'SELECT id, status FROM pets WHERE id = ANY ($1::bigint[])', [pets.map((pet) => pet.id)])
    const current = new Map<bigint, ImportedCurrent>(statuses.map((row) => [row.id, { status: row.status, quantity: null }]))
    for (const pet of pets) {
      const quantity = quantities.get(pet.id)
      if (quantity !== undefined) current.set(pet.id, { status: current.get(pet.id)?.status ?? null, quantity })
    }
    return current
  }

  /**
   * The imported pets' reorder points, then the crossing check of every pet whose point or stock the import set, with
   * the quantity the import leaves (../alerts/postgres.ts): one statement each, per chunk.
   */
  async #importPoints (client: pg.PoolClient, pets: PetImport[], current: Map<bigint, ImportedCurrent>, changed: ReadonlyMap<bigint, number>,
    at: Date): Promise<void> {
    await setPoints(client, pets.flatMap((pet) => pet.reorderPoint === undefined ? [] : [{ petId: pet.id, reorderPoint: pet.reorderPoint }]))
    const levels = pets.flatMap((pet) => {
      const quantity = changed.get(pet.id) ?? current.get(pet.id)?.quantity ?? null
      return quantity !== null && (changed.has(pet.id) || pet.reorderPoint !== undefined) ? [{ petId: pet.id, quantity }] : []
    })
    await trackLowStockOf(client, levels, at, null, null)
  }

  /**
   * Writes what the imported pets change in the listing (the domain's rule decides), with a ledger row each; returns
   * the quantity of each pet it changed.
   */
  async #importStock (client: pg.PoolClient, pets: PetImport[], current: Map<bigint, ImportedCurrent>, stockChange: ImportedStockRule,
    at: Date): Promise<Map<bigint, number>> {
    const changed = pets.flatMap((pet) => {
      const change = stockChange(pet, current.get(pet.id) ?? { quantity: null, status: null })
      return change === null ? [] : [{ petId: pet.id, ...change }]
    })
    if (changed.length === 0) return new Map()
    const ids = changed.map((change) => change.petId)
    const quantities = changed.map((change) => change.quantity)
    // One change grows the revision once: a changed status has grown it already (the pets trigger), so the entry's own
    // write grows it only when the status stayed.
    for (const statusChanged of [false, true]) {
      const rows = changed.filter((change) => (change.previousStatus !== null) === statusChanged)
      if (rows.length === 0) continue
      await client.query(
        `INSERT INTO inventory (pet_id, quantity) SELECT * FROM unnest($1::bigint[], $2::integer[])
         ON CONFLICT (pet_id) DO UPDATE SET quantity = excluded.quantity${statusChanged ? '' : ', revision = inventory.revision + 1'}`,
        [rows.map((change) => change.petId), rows.map((change) => change.quantity)])
    }
    await client.query(
      `INSERT INTO stock_ledger (pet_id, previous_quantity, quantity, reason, status, previous_status, created_at)
       SELECT pet_id, previous, quantity, 'import', status, previous_status, $6
       FROM unnest($1::bigint[], $2::integer[], $3::integer[], $4::text[], $5::text[]) AS t (pet_id, previous, quantity, status, previous_status)`,
      [ids, changed.map((change) => change.previous), quantities, changed.map((change) => change.status),
        changed.map((change) => change.previousStatus), at])
    return new Map(changed.map((change) => [change.petId, change.quantity]))
  }
}
