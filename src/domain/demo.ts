import { readFile } from 'node:fs/promises'
import type { CatalogStore } from '../store/catalog/types.js'
import { importData, parseImport } from './import.js'

/** The demo data set shipped in the repository (data/demo.json), two levels above src/ and dist/ modules. */
const DEMO_FILE = new URL('../../data/demo.json', import.meta.url)

/** Imports the demo data when the store has no pets; true when it did. */
export async function seedDemoIfEmpty (store: { readonly catalog: Pick<CatalogStore, 'countPets' | 'importData'> }): Promise<boolean> {
  if (await store.catalog.countPets() > 0) return false
  await importData(store, await parseImport(await readFile(DEMO_FILE, 'utf8')))
  return true
}
