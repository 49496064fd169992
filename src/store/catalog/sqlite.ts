/** Pets and orders on SQLite; an import also writes the stock and ledger rows the records bring, in its one transaction. */
import type { Order, OrderStatus, Pet, PetImport, PetStatus } from '../../model.js'
import type { SqliteDatabase } from '../sqlite/database.js'
import { guard } from '../sqlite/errors.js'
import { setPoint, trackLowStock } from '../alerts/sqlite.js'
import { ORDER_COLUMNS, PET_COLUMNS, petColumns, progressReporter, toOrder, toPet, type OrderRow, type PetRow } from './rows.js'
import type { CatalogStore, ImportOptions, ImportResult, OrderPage } from './types.js'

/** An import's ledger row: the status where the import changed it, or created the entry. */
const IMPORT_LEDGER_SQL = `INSERT INTO stock_ledger (pet_id, previous_id, previous_quantity, quantity, reason, status, previous_status, created_at)
  VALUES (?, ?, ?, ?, 'import', ?, ?, ?)`

export class SqliteCatalog implements CatalogStore {
  readonly #db: SqliteDatabase

  constructor (db: SqliteDatabase) {
    this.#db = db
  }

  async getPet (id: bigint): Promise<Pet | null> {
    return guard(() => {
      const row = this.#db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`).get(id) as PetRow | undefined
      return row === undefined ? null : toPet(row)
    })
  }

  async countPets (): Promise<number> {
    return guard(() => Number((this.#db.prepare('SELECT count(*) AS n FROM pets').get() as { n: bigint }).n))
  }

  async listOrders ({ afterId, limit, status }: { afterId: bigint | null, limit: number, status: OrderStatus | null }): Promise<OrderPage> {
    return guard(() => {
      const rows = this.#db.prepare(
        `SELECT ${ORDER_COLUMNS} FROM orders
         WHERE (? IS NULL OR id > ?) AND (? IS NULL OR status = ?) AND status <> 'cancelled'
         ORDER BY id LIMIT ?`
      ).all(afterId, afterId, status, status, limit + 1) as OrderRow[]
      const hasMore = rows.length > limit
      return { orders: rows.slice(0, limit).map(toOrder), hasMore }
    })
  }

  async importData ({ pets, orders }: { pets: PetImport[], orders: Order[] }, options: ImportOptions): Promise<ImportResult> {
    return guard(() => {
      const db = this.#db.connection
      const upsertPet = db.prepare(
        `INSERT INTO pets (id, name, status, category_id, category_name, photo_urls, tags) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, status = excluded.status, category_id = excluded.category_id,
           category_name = excluded.category_name, photo_urls = excluded.photo_urls, tags = excluded.tags`
      )
      // The pet as it is before the record replaces it: its status and its entry (a left join: a pet may have none).
      const readCurrent = db.prepare(
        'SELECT p.status, i.quantity, i.ledger_head FROM pets p LEFT JOIN inventory i ON i.pet_id = p.id WHERE p.id = ?')
      // One change grows the revision once: a changed status has grown it already (the pets trigger), so the entry's own
      // write grows it (the last parameter, 1 or 0) only when the status stayed.
      const upsertStock = db.prepare(
        `INSERT INTO inventory (pet_id, quantity, ledger_head) VALUES (?, ?, ?)
         ON CONFLICT (pet_id) DO UPDATE SET quantity = excluded.quantity, revision = revision + ?, ledger_head = excluded.ledger_head`
      )
      const record = db.prepare(IMPORT_LEDGER_SQL)
      const when = options.at ?? new Date()
      const at = when.toISOString()
      const upsertOrder = db.prepare(
        `INSERT INTO orders (id, pet_id, quantity, ship_date, status, complete) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET pet_id = excluded.pet_id, quantity = excluded.quantity,
           ship_date = excluded.ship_date, status = excluded.status, complete = excluded.complete
         WHERE orders.source = 'import'`
      )
      const kept: bigint[] = []
      const total = pets.length + orders.length
      const report = progressReporter(total, options.onProgress)
      db.transaction(() => {
        for (const pet of pets) {
          const before = readCurrent.get(pet.id) as { status: PetStatus, quantity: bigint | null, ledger_head: bigint | null } | undefined
          upsertPet.run(pet.id, ...petColumns(pet))
          const change = options.stockChange(pet, {
            quantity: before === undefined || before.quantity === null ? null : Number(before.quantity),
            status: before?.status ?? null
          })
          if (change !== null) {
            const { lastInsertRowid } = record.run(pet.id, before?.ledger_head ?? null, change.previous, change.quantity, change.status,
              change.previousStatus, at)
            upsertStock.run(pet.id, change.quantity, lastInsertRowid, change.previousStatus === null ? 1 : 0)
          }
          // The pet's point, then the crossing check of its stock as the import leaves it (a new point, a new quantity).
          if (pet.reorderPoint !== undefined) setPoint(this.#db, pet.id, pet.reorderPoint)
          const quantity = change?.quantity ?? (before?.quantity === null || before === undefined ? null : Number(before.quantity))
          if (quantity !== null && (change !== null || pet.reorderPoint !== undefined)) trackLowStock(this.#db, pet.id, quantity, when, null, null)
          report(1)
        }
        for (const order of orders) {
          // An order placed through the API with this id is left as it is (ImportResult.keptOrders).
          if (upsertOrder.run(order.id, order.petId, order.quantity, order.shipDate, order.status, order.complete ? 1 : 0).changes === 0) kept.push(order.id)
          report(1)
        }
      }).immediate()
      return { pets: pets.length, orders: orders.length - kept.length, ...(kept.length === 0 ? {} : { keptOrders: kept }) }
    })
  }
}
