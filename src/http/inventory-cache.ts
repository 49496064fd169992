/**
 * GET /v1/inventory answered from bytes serialized ahead of the request, kept fresh without asking the store on
 * every request.
 *
 * The listing is held in chunks of consecutive pets (ids, quantities and statuses in typed arrays, and the chunk's
 * JSON): a change made by this process re-serializes the one chunk it touches; a change made elsewhere rebuilds
 * the listing from one store snapshot, a chunk at a time, yielding to the event loop between chunks, so neither
 * ever holds the server for more than a few milliseconds. The body is sent as the chunks' buffers, never copied
 * into one.
 *
 * How it knows it is fresh (docs/adr/0014-listing-served-from-memory.md); the mechanisms add up:
 * - signal (the change signal of src/changes, Redis): every instance counts each change it acknowledges in Redis,
 *   and every rate-limit decision reads the count (in the same script call). A GET that starts after a write was
 *   acknowledged anywhere sees a newer count and checks the store once. While Redis is away every GET checks the store.
 * - local (SQLite): this process's writes patch the listing; another process's commits (the CLI, other
 *   workers) are noticed by SQLite's data_version, looked at every LISTING_POLL_MS by a timer, never by a request.
 * - with signal but not local (PostgreSQL with Redis): writes that no instance announces (the CLI's import)
 *   are noticed by a check of the store at least every LISTING_MAX_AGE_MS.
 * - neither (PostgreSQL without Redis): the store's version is read on every GET.
 * The listing's version and entries come from one snapshot, so a strong ETag always names exactly its bytes.
 */
import { setImmediate as nextTurn } from 'node:timers/promises'
import { PET_STATUSES, type InventoryItem, type PetStatus, type StockEntry } from '../model.js'
import { feedCursor } from '../domain/feed.js'
import type { FeedPlace, StockReads } from '../store/stock/types.js'
import type { ChangeWatch } from '../changes/watch.js'

/** Pets per chunk: re-serializing one costs well under a millisecond. */
export const CHUNK_SIZE = 2048

/**
 * Signal without local (PostgreSQL with Redis): the longest a listing is served without checking the store, so that
 * writes no instance announces (the CLI's import) show within this time.
 */
export const LISTING_MAX_AGE_MS = 5000

/**
 * Local (SQLite): how often SQLite's data_version is looked at for another process's commits (the CLI, other
 * workers); a request never waits for it.
 */
export const LISTING_POLL_MS = 200

export interface InventoryView {
  /** A strong validator of the representation (RFC 9110): equal tags mean identical bytes. */
  etag: string
  /** The body: one buffer, or buffers to write in order. */
  body: Buffer | Buffer[]
  length: number
  /**
   * The change feed's cursor the listing reflects (null: the feed is empty): every change up to it is in the listing,
   * none after it. Changes made here and patched in (applied) move it to theirs.
   */
  feed: string | null
}

interface Chunk {
  ids: BigInt64Array
  quantities: Int32Array
  statuses: Uint8Array
  /** The chunk's entries as JSON, without the enclosing brackets. */
  bytes: Buffer
}

interface Listing {
  version: bigint
  /** The feed's cursor of the snapshot it was built from, or of the last change patched in since. */
  feed: string | null
  chunks: Chunk[]
  length: number
  /** The whole body in one buffer when it is small (most listings): sent as it is. */
  single: Buffer | null
}

const OPEN = Buffer.from('[')
const CLOSE = Buffer.from(']')
const COMMA = Buffer.from(',')
const EMPTY = Buffer.from('[]')
/** Bodies up to this size are also kept as one buffer. */
const SINGLE_MAX = 64 * 1024

const STATUS_CODE = new Map<PetStatus, number>(PET_STATUSES.map((status, i) => [status, i]))

export interface InventoryCacheOptions {
  store: { readonly stock: Pick<StockReads, 'inventoryVersion' | 'inventoryPages' | 'changedElsewhere'> }
  /** Serializes items as the route's response schema does (fast-json-stringify of it), brackets included. */
  serialize: (items: InventoryItem[]) => string
  /** Signal: what this instance has seen of the change counter (src/changes/watch.ts). */
  watch?: ChangeWatch
  /** Signal without local: the store is checked at least this often, whatever the counter says (LISTING_MAX_AGE_MS). */
  maxAgeMs?: number
  /** Local (a store with changedElsewhere): how often another process's commits are looked for (LISTING_POLL_MS). */
  pollMs?: number
  chunkSize?: number
  /** Milliseconds since the epoch. */
  clock?: () => number
}

export class InventoryCache {
  readonly #stock: InventoryCacheOptions['store']['stock']
  readonly #serialize: (items: InventoryItem[]) => string
  readonly #watch: ChangeWatch | null
  readonly #local: boolean
  readonly #maxAgeMs: number
  readonly #chunkSize: number
  readonly #clock: () => number
  #listing: Listing | null = null
  /** When the listing was last known to match the store: the counter mark then, and the time. */
  #checked: { mark: { latest: number, gaps: number } | undefined, at: number } | null = null
  /** Set by another process's commit (local freshness): the next request checks the store. */
  #stale = true
  #rebuilding: Promise<Listing> | null = null
  readonly #timer: NodeJS.Timeout | null = null

  constructor (options: InventoryCacheOptions) {
    const stock = options.store.stock
    this.#stock = stock
    this.#serialize = options.serialize
    this.#watch = options.watch ?? null
    this.#local = stock.changedElsewhere !== undefined
    this.#maxAgeMs = options.maxAgeMs ?? LISTING_MAX_AGE_MS
    this.#chunkSize = options.chunkSize ?? CHUNK_SIZE
    this.#clock = options.clock ?? Date.now
    if (stock.changedElsewhere !== undefined) {
      const changed = stock.changedElsewhere.bind(stock)
      changed()
      this.#timer = setInterval(() => {
        try {
          if (changed()) this.#stale = true
        } catch {
          this.#stale = true
        }
      }, options.pollMs ?? LISTING_POLL_MS)
      this.#timer.unref()
    }
  }

  static etagOf (version: bigint): string {
    return `"inv-${version}"`
  }

  /** How the listing learns of changes: 'signal', 'local', both ('signal+local'), or 'poll' (neither). */
  get freshness (): string {
    return [this.#watch === null ? null : 'signal', this.#local ? 'local' : null].filter((m) => m !== null).join('+') || 'poll'
  }

  /** Stops the timer of local freshness. */
  close (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
  }

  /** The current representation, checking the store only when a change may have happened. */
  async current (): Promise<InventoryView> {
    return view(await this.#fresh())
  }

  /** The current representation when it can be served without asking the store (no promise); else undefined. */
  currentNow (): InventoryView | undefined {
    const listing = this.#servable()
    return listing === null ? undefined : view(listing)
  }

  /** The current ETag. */
  async etag (): Promise<string> {
    return InventoryCache.etagOf((await this.#fresh()).version)
  }

  /** Up to `limit` entries after the pet `after` (null: from the first), and whether more follow. */
  async page (after: bigint | null, limit: number): Promise<{ body: Buffer, last: bigint | null, more: boolean, feed: string | null }> {
    const listing = await this.#fresh()
    const items: InventoryItem[] = []
    let more = false
    let i = after === null ? 0 : chunkIndex(listing.chunks, after)
    for (; i < listing.chunks.length && !more; i++) {
      const chunk = listing.chunks[i] as Chunk
      let j = after === null ? 0 : firstAfter(chunk.ids, after)
      for (; j < chunk.ids.length; j++) {
        if (items.length === limit) {
          more = true
          break
        }
        items.push(item(chunk, j))
      }
    }
    return { body: Buffer.from(this.#serialize(items)), last: items.at(-1)?.petId ?? null, more, feed: listing.feed }
  }

  /**
   * Changes this process made (and the store acknowledged; several for a batch): only the chunks they touch are
   * re-serialized, and the feed's cursor moves to the write's last change, when the listing is exactly as many versions
   * behind (each changed entry moves the version once, so nothing else changed since the listing's snapshot) and the
   * store told where the write's changes are in the feed; otherwise the next request checks the store.
   */
  applied (changed: StockEntry | readonly StockEntry[], version: bigint | undefined, feed?: FeedPlace): void {
    const entries = Array.isArray(changed) ? changed as readonly StockEntry[] : [changed as StockEntry]
    const listing = this.#listing
    if (listing === null || version === undefined || feed === undefined || this.#rebuilding !== null || version !== listing.version + BigInt(entries.length)) {
      this.#stale = true
      return
    }
    const touched = new Set<number>()
    for (const entry of entries) {
      const c = chunkIndex(listing.chunks, entry.petId)
      const chunk = listing.chunks[c]
      const j = chunk === undefined ? -1 : indexOf(chunk.ids, entry.petId)
      if (chunk === undefined || j === -1) {
        this.#stale = true
        return
      }
      chunk.quantities[j] = entry.quantity
      chunk.statuses[j] = STATUS_CODE.get(entry.status) ?? 0
      touched.add(c)
    }
    for (const c of touched) {
      const chunk = listing.chunks[c] as (typeof listing.chunks)[number]
      const before = chunk.bytes.length
      chunk.bytes = this.#chunkBytes(chunk)
      listing.length += chunk.bytes.length - before
    }
    listing.version = version
    listing.feed = feedCursor(feed)
    listing.single = single(listing)
  }

  /** The listing, fresh: checked against the store only when it may have changed, rebuilt when it has. */
  async #fresh (): Promise<Listing> {
    const listing = this.#servable()
    if (listing !== null) return listing
    const mark = this.#watch?.mark
    // What the store says now; the mark is taken before, so a change announced after this read is noticed.
    const at = this.#clock()
    this.#stale = false
    const version = await this.#stock.inventoryVersion()
    const current = this.#listing
    if (current !== null && current.version === version && this.#rebuilding === null) {
      this.#checked = { mark, at }
      return current
    }
    const rebuilt = await this.#rebuild(version)
    this.#checked = { mark, at }
    return rebuilt
  }

  /** The listing when it may be served without asking the store; else null. */
  #servable (): Listing | null {
    const listing = this.#listing
    return listing !== null && this.#rebuilding === null && this.#trusted(this.#watch?.mark) ? listing : null
  }

  /** Whether the listing may be served without asking the store. */
  #trusted (mark: { latest: number, gaps: number } | undefined): boolean {
    if (this.#stale) return false
    if (this.#watch !== null) {
      const checked = this.#checked
      if (checked === null || mark === undefined || checked.mark === undefined ||
        checked.mark.latest !== mark.latest || checked.mark.gaps !== mark.gaps) return false
      return this.#local || this.#clock() - checked.at < this.#maxAgeMs
    }
    return this.#local
  }

  /** Rebuilds from a snapshot at least as new as `version`; requests arriving meanwhile share the rebuild. */
  async #rebuild (version: bigint): Promise<Listing> {
    while (this.#rebuilding !== null) {
      const listing = await this.#rebuilding
      if (listing.version >= version) return listing
    }
    const rebuilding = this.#build()
    this.#rebuilding = rebuilding
    try {
      const listing = await rebuilding
      if (this.#listing === null || this.#listing.version <= listing.version) this.#listing = listing
      return listing
    } finally {
      this.#rebuilding = null
    }
  }

  async #build (): Promise<Listing> {
    const chunks: Chunk[] = []
    let version: bigint | null = null
    let feed: string | null = null
    let length = 2
    for await (const page of this.#stock.inventoryPages(this.#chunkSize)) {
      version = page.version
      feed = page.feed === null ? null : feedCursor(page.feed)
      if (page.items.length === 0) continue
      const chunk: Chunk = {
        ids: BigInt64Array.from(page.items, (i) => i.petId),
        quantities: Int32Array.from(page.items, (i) => i.quantity),
        statuses: Uint8Array.from(page.items, (i) => STATUS_CODE.get(i.status) ?? 0),
        bytes: Buffer.alloc(0)
      }
      chunk.bytes = this.#chunkBytes(chunk)
      length += chunk.bytes.length + (chunks.length > 0 ? 1 : 0)
      chunks.push(chunk)
      // Between chunks, whatever else waits (other requests, /healthz) runs.
      await nextTurn()
    }
    const listing: Listing = { version: version ?? 0n, feed, chunks, length, single: null }
    listing.single = single(listing)
    return listing
  }

  #chunkBytes (chunk: Chunk): Buffer {
    const items = Array.from(chunk.ids, (_, j) => item(chunk, j))
    const json = this.#serialize(items)
    return Buffer.from(json.slice(1, -1))
  }
}

function item (chunk: Chunk, j: number): InventoryItem {
  return { petId: chunk.ids[j] as bigint, quantity: chunk.quantities[j] as number, status: PET_STATUSES[chunk.statuses[j] as number] as PetStatus }
}

/** The chunk that holds (or would hold) `petId`: the last whose first id is not above it. */
function chunkIndex (chunks: readonly Chunk[], petId: bigint): number {
  let low = 0
  let high = chunks.length - 1
  let found = 0
  while (low <= high) {
    const mid = (low + high) >> 1
    if ((chunks[mid] as Chunk).ids[0] as bigint <= petId) {
      found = mid
      low = mid + 1
    } else {
      high = mid - 1
    }
  }
  return found
}

/** The index of `petId` in sorted ids, or -1. */
function indexOf (ids: BigInt64Array, petId: bigint): number {
  const i = firstAfter(ids, petId - 1n)
  return i < ids.length && ids[i] === petId ? i : -1
}

/** The index of the first id above `after`. */
function firstAfter (ids: BigInt64Array, after: bigint): number {
  let low = 0
  let high = ids.length
  while (low < high) {
    const mid = (low + high) >> 1
    if ((ids[mid] as bigint) <= after) low = mid + 1
    else high = mid
  }
  return low
}

function single (listing: Listing): Buffer | null {
  if (listing.chunks.length === 0) return EMPTY
  if (listing.length > SINGLE_MAX) return null
  return Buffer.concat(parts(listing), listing.length)
}

function parts (listing: Listing): Buffer[] {
  const out: Buffer[] = [OPEN]
  listing.chunks.forEach((chunk, i) => {
    if (i > 0) out.push(COMMA)
    out.push(chunk.bytes)
  })
  out.push(CLOSE)
  return out
}

function view (listing: Listing): InventoryView {
  return { etag: InventoryCache.etagOf(listing.version), body: listing.single ?? parts(listing), length: listing.length, feed: listing.feed }
}
