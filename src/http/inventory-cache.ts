/**
 * GET /inventory serialized once per inventory change, not once per request. Every GET first reads the
 * store's inventory version (one cheap query), so a change made on any instance is seen by the next GET on
 * every instance: the cache can be old only in memory, never in what it answers.
 */
import type { InventoryItem } from '../domain/model.js'
import type { Store } from '../store/types.js'

export interface InventoryRepresentation {
  /** A strong validator of the representation (RFC 9110): equal tags mean identical bytes. */
  etag: string
  body: Buffer
}

export class InventoryCache {
  readonly #store: Store
  readonly #serialize: (items: InventoryItem[]) => string
  #cached: { version: bigint, representation: InventoryRepresentation } | null = null
  /** A rebuild in progress, shared by the requests that miss together. */
  #building: { version: bigint, promise: Promise<InventoryRepresentation> } | null = null

  constructor (store: Store, serialize: (items: InventoryItem[]) => string) {
    this.#store = store
    this.#serialize = serialize
  }

  static etagOf (version: bigint): string {
    return `"inv-${version}"`
  }

  /** The current ETag, from the version alone (no listing). */
  async etag (): Promise<string> {
    return InventoryCache.etagOf(await this.#store.inventoryVersion())
  }

  /** The current representation. */
  async current (): Promise<InventoryRepresentation> {
    // The version is read before the listing: a write in between makes the cached bytes newer than their
    // version, never older, and the next GET sees the new version and rebuilds.
    const version = await this.#store.inventoryVersion()
    if (this.#cached?.version === version) return this.#cached.representation
    if (this.#building?.version === version) return await this.#building.promise
    const promise = this.#build(version)
    this.#building = { version, promise }
    try {
      return await promise
    } finally {
      if (this.#building?.promise === promise) this.#building = null
    }
  }

  async #build (version: bigint): Promise<InventoryRepresentation> {
    const items = await this.#store.listInventory()
    const representation = { etag: InventoryCache.etagOf(version), body: Buffer.from(this.#serialize(items)) }
    if (this.#cached === null || this.#cached.version < version) this.#cached = { version, representation }
    return representation
  }
}
