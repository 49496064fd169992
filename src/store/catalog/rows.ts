/** Row codecs of pets and orders, shared by both stores (../rows.ts: how the drivers differ), and an import's progress. */
import type { Order, OrderStatus, Pet, PetImport, PetStatus, Tag } from '../../model.js'
import { num, type Int } from '../rows.js'

export interface OrderRow { id: bigint, pet_id: bigint, quantity: Int, ship_date: string, status: OrderStatus, complete: boolean | Int }

export const ORDER_COLUMNS = 'id, pet_id, quantity, ship_date, status, complete'
export const PET_COLUMNS = 'id, name, status, category_id, category_name, photo_urls, tags'

export const toOrder = (row: OrderRow): Order => ({
  id: row.id,
  petId: row.pet_id,
  quantity: num(row.quantity),
  shipDate: row.ship_date,
  status: row.status,
  complete: row.complete === true || row.complete === 1n || row.complete === 1
})

export interface PetRow {
  id: bigint, name: string, status: PetStatus, category_id: bigint | null, category_name: string | null,
  photo_urls: string | null, tags: string | null
}

/** Tags keep their int64 ids as decimal strings inside the JSON column so they survive JSON.parse. */
function encodeTags (tags: Tag[] | undefined): string | null {
  return tags === undefined ? null : JSON.stringify(tags.map((t) => ({ id: t.id.toString(), name: t.name })))
}

function decodeTags (text: string | null): Tag[] | undefined {
  if (text === null) return undefined
  return (JSON.parse(text) as Array<{ id: string, name: string }>).map((t) => ({ id: BigInt(t.id), name: t.name }))
}

export function toPet (row: PetRow): Pet {
  const pet: Pet = { id: row.id, name: row.name, status: row.status }
  if (row.category_id !== null && row.category_name !== null) pet.category = { id: row.category_id, name: row.category_name }
  const tags = decodeTags(row.tags)
  if (tags !== undefined) pet.tags = tags
  if (row.photo_urls !== null) pet.photoUrls = JSON.parse(row.photo_urls) as string[]
  return pet
}

/** The columns of a pet row for an upsert, in table order after id. */
export function petColumns (pet: PetImport): [string, PetStatus, bigint | null, string | null, string | null, string | null] {
  return [pet.name, pet.status, pet.category?.id ?? null, pet.category?.name ?? null,
    pet.photoUrls === undefined ? null : JSON.stringify(pet.photoUrls), encodeTags(pet.tags)]
}

/**
 * Counts written records and tells onProgress every 1% (and at the end), so that a progress display of a
 * large import costs nothing measurable.
 */
export function progressReporter (total: number, onProgress: ((written: number, total: number) => void) | undefined): (records: number) => void {
  if (onProgress === undefined) return () => {}
  const step = Math.max(1, Math.floor(total / 100))
  let written = 0
  let next = step
  return (records) => {
    written += records
    if (written >= next || written === total) {
      onProgress(written, total)
      next = written + step
    }
  }
}
