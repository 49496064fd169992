import { AppError } from '../errors.js'
import type { CatalogReads } from '../store/catalog/types.js'
import type { Pet } from '../model.js'

export async function getPet (store: { readonly catalog: Pick<CatalogReads, 'getPet'> }, id: bigint): Promise<Pet> {
  const pet = await store.catalog.getPet(id)
  if (pet === null) throw new AppError('not_found', `No pet exists with id ${id}.`)
  return pet
}

/** The deprecation window of GET /pets/{petId}: after `sunset` the operation is gone. */
export function isSunset (sunset: Date, now: number): boolean {
  return now >= sunset.getTime()
}
