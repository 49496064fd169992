/**
 * The live change stream: the change feed (./feed.ts) followed as it grows, for readers that keep a connection open
 * instead of polling. Three parts, none of which knows how the changes travel:
 *
 * - FeedWatch: one per instance. While anyone follows, it asks the store for the feed's head every `pollMs` and tells
 *   the followers when it moved. However many streams are open, that is one query per instance per poll, and a change
 *   committed on another instance (which this one hears nothing about) is seen within one poll.
 * - StreamRegistry: how many streams may be open. Open streams are registered in the store, so the limit per quota
 *   holds across instances; each instance also bounds its own number. A registration lapses unless renewed, so the
 *   streams of an instance that died stop counting after a while. (Whether a stream's key still works is admission's
 *   rule, src/access: the stream asks it.)
 * - followChanges: the changes after a cursor, page by page, and then each new one once the watch reports it. It reads
 *   only when its consumer asks for more, so a slow consumer holds the reading back instead of piling changes up.
 */
import { randomUUID } from 'node:crypto'
import { checkPlace, DEFAULT_CHANGE_TYPES, feedCursor, feedPlace, viewEntry, type EntryView } from './feed.js'
import type { ChangeType } from '../model.js'
import type { FeedPlace, StockReads } from '../store/stock/types.js'
import type { StreamStore } from '../store/streams/types.js'

/** Each registration lasts this many renewal periods: one missed renewal (a slow store) does not drop it. */
export const REGISTRATION_PERIODS = 3

export interface FeedWatchOptions {
  store: { readonly stock: Pick<StockReads, 'feedHead'> }
  /** How often the head is read while anyone listens. */
  pollMs: number
  /** A failed read of the head; the next poll tries again. */
  onError?: (error: unknown) => void
}

/**
 * Tells its listeners when the feed's head may have moved. It polls only while it has listeners. A listener is told
 * "look again", never what changed: each reader reads the feed after its own cursor.
 */
export class FeedWatch {
  readonly #store: { readonly stock: Pick<StockReads, 'feedHead'> }
  readonly #pollMs: number
  readonly #onError: (error: unknown) => void
  readonly #listeners = new Set<() => void>()
  // The head last read, as its cursor ('' for an empty feed); undefined before the first read, so that the first
  // read always notifies: a listener that arrived between its own read and that poll learns of what came in between.
  #head: string | undefined
  #place: FeedPlace | null | undefined
  #timer: NodeJS.Timeout | null = null
  #polling = false
  #closed = false

  constructor (options: FeedWatchOptions) {
    this.#store = options.store
    this.#pollMs = options.pollMs
    this.#onError = options.onError ?? (() => {})
  }

  /** Listeners now. */
  get listeners (): number {
    return this.#listeners.size
  }

  /** The head as last read (null: the feed is empty; undefined: not read yet). */
  get head (): FeedPlace | null | undefined {
    return this.#place
  }

  /**
   * Calls `listener` whenever the head may have moved, until the returned function is called. A reader must read
   * after subscribing (not before): then no change can fall between its read and the next notification.
   */
  subscribe (listener: () => void): () => void {
    // A listener of its own, so that one function subscribed twice is two subscriptions.
    const entry = (): void => { listener() }
    this.#listeners.add(entry)
    this.#schedule()
    return () => {
      this.#listeners.delete(entry)
      if (this.#listeners.size === 0 && this.#timer !== null) {
        clearTimeout(this.#timer)
        this.#timer = null
      }
    }
  }

  /** A change committed on this instance: the listeners look at once, without waiting for the next poll. */
  nudge (): void {
    this.#notify()
  }

  /** Stops polling for good (the app is closing); listeners are no longer told anything. */
  close (): void {
    this.#closed = true
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    this.#listeners.clear()
  }

  #schedule (): void {
    if (this.#closed || this.#timer !== null || this.#polling || this.#listeners.size === 0) return
    // Not keeping the process alive: the open connections do that.
    this.#timer = setTimeout(() => { void this.#poll() }, this.#pollMs).unref()
  }

  async #poll (): Promise<void> {
    this.#timer = null
    this.#polling = true
    try {
      const head = await this.#store.stock.feedHead()
      const cursor = head === null ? '' : feedCursor(head)
      if (cursor !== this.#head) {
        this.#head = cursor
        this.#place = head
        this.#notify()
      }
    } catch (error) {
      this.#onError(error)
    } finally {
      this.#polling = false
      this.#schedule()
    }
  }

  #notify (): void {
    if (this.#closed) return
    for (const listener of [...this.#listeners]) listener()
  }
}

/** Where a stream starts, checked: the cursor it follows from, and the epochs of the history it was checked against. */
export interface StreamStart {
  /** null: from the feed's first change. */
  after: string | null
  epochs: ReadonlyArray<string | null>
}

/**
 * Where a stream starts: after `given`, a cursor of this store's history (checked as the feed checks it:
 * InvalidCursorError, CursorAheadError, CursorExpiredError) or, without one, after the feed's head now, so that it
 * carries what is committed from now on (null: the feed is empty, so from its first change).
 */
export async function streamStart (store: { readonly stock: Pick<StockReads, 'feedHead' | 'feedHistory'> }, given: string | null): Promise<StreamStart> {
  if (given !== null) {
    const place = feedPlace(given)
    const history = await store.stock.feedHistory()
    checkPlace(history, place)
    return { after: given, epochs: [null, ...history.epochs.map((e) => e.epoch)] }
  }
  const head = await store.stock.feedHead()
  return { after: head === null ? null : feedCursor(head), epochs: head === null ? [] : [head.epoch] }
}

export interface FollowOptions {
  /** Start after this cursor (checked already: see streamStart); null: from the feed's first change. */
  after: string | null
  /**
   * The epochs of the history the cursor was checked against (streamStart's). A change or head of any other epoch means
   * the store started one since (a failover, under a running instance): the place is checked again before going on.
   */
  epochs?: ReadonlyArray<string | null>
  /** The caller's key: its own changes show their request id. */
  keyId: string | null
  /** The types of entries to follow (the feed's `types`); stock changes alone when absent. */
  types?: readonly ChangeType[]
  /** Changes read per query. */
  pageSize: number
  /** Ends the iteration, also while it waits for a change. */
  signal: AbortSignal
}

/**
 * The changes after `options.after`, in feed order, as pages that are never empty: what is there now, then what the
 * watch reports, for as long as the signal allows. The feed is read only when the consumer asks for the next page.
 * A store failure ends the iteration with that error (the reader resumes later from its last cursor), and so does a
 * place the store's history no longer holds (CursorExpiredError: an epoch began under the stream, and the place it
 * had reached was lost with the old primary; the reader's reconnect is then refused as expired, and it resyncs).
 */
export async function * followChanges (store: { readonly stock: Pick<StockReads, 'listChanges' | 'feedHistory'> }, watch: FeedWatch, options: FollowOptions): AsyncGenerator<EntryView[], void, undefined> {
  const { keyId, pageSize, signal } = options
  const types = options.types ?? DEFAULT_CHANGE_TYPES
  let place = options.after === null ? null : feedPlace(options.after)
  const known = new Set(options.epochs ?? (place === null ? [] : [place.epoch]))
  // An epoch not seen before: the place reached so far is checked against the history that has it.
  const recheck = async (epoch: string | null): Promise<void> => {
    if (known.has(epoch)) return
    const history = await store.stock.feedHistory()
    if (place !== null) checkPlace(history, place)
    for (const e of [null, ...history.epochs.map((h) => h.epoch)]) known.add(e)
  }
  // True when the feed may hold something past `cursor`: at the start, and after each notification.
  let stale = true
  let wake: (() => void) | null = null
  const awaken = (): void => {
    const resolve = wake
    wake = null
    resolve?.()
  }
  const unsubscribe = watch.subscribe(() => {
    stale = true
    awaken()
  })
  signal.addEventListener('abort', awaken)
  try {
    while (!signal.aborted) {
      if (!stale) {
        await new Promise<void>((resolve) => { wake = resolve })
        continue
      }
      stale = false
      const head = watch.head
      if (head !== undefined && head !== null) await recheck(head.epoch)
      for (;;) {
        // Entries of other types are skipped by the store: the place moves to the last entry served, and a short page
        // still means the end of what is committed.
        const changes = await store.stock.listChanges(place, pageSize, types)
        if (signal.aborted) return
        for (const change of changes) await recheck(change.epoch)
        const last = changes.at(-1)
        if (last !== undefined) {
          place = { ...last.position, epoch: last.epoch }
          yield changes.map((change) => viewEntry(change, keyId !== null && change.keyId === keyId))
        }
        // A short page reached the end of what is committed; anything later comes with a notification.
        if (changes.length < pageSize || signal.aborted) break
      }
    }
  } finally {
    unsubscribe()
    signal.removeEventListener('abort', awaken)
  }
}

export interface StreamRegistryOptions {
  store: { readonly streams: StreamStore }
  /** Open streams per quota, counted in the store across instances. */
  maxPerQuota: number
  /** Open streams on this instance. */
  maxPerInstance: number
  /** How often this instance renews its registrations; each lasts REGISTRATION_PERIODS times this. */
  renewMs: number
  clock: () => number
  /** A renewal or a close that failed; the registration lapses by itself. */
  onError?: (error: unknown, what: 'renew' | 'close') => void
  /** The id of a new registration; a random UUID by default. */
  newId?: () => string
}

/** Whether a stream may open: its registration, or which bound refused it. */
export type StreamOpening =
  | { outcome: 'opened', id: string }
  /** The quota has `max` streams open on all instances together. */
  | { outcome: 'quota_full', max: number }
  /** This instance serves `max` streams already (another instance may have room). */
  | { outcome: 'instance_full', max: number }

/**
 * The open streams of this instance and their registrations in the store. A registration is made when a stream opens
 * (refused when the quota is full, counted in the same transaction), renewed every `renewMs` while the stream is
 * open, and deleted when it closes; one that is not renewed (its instance died) lapses after REGISTRATION_PERIODS
 * periods and stops counting against its quota.
 */
export class StreamRegistry {
  readonly #options: StreamRegistryOptions
  /** The registrations of the open streams. */
  readonly #open = new Set<string>()
  // Streams between the check of the instance's bound and the store's answer: counted against that bound.
  #opening = 0
  #timer: NodeJS.Timeout | null = null
  #renewing: Promise<void> = Promise.resolve()

  constructor (options: StreamRegistryOptions) {
    this.#options = options
  }

  /** Streams open on this instance. */
  get size (): number {
    return this.#open.size
  }

  /** Registers a stream of key `keyId` (of quota `quotaId`), unless a bound refuses it. Store failures are thrown. */
  async open (quotaId: string, keyId: string): Promise<StreamOpening> {
    const { store, maxPerQuota, maxPerInstance, clock } = this.#options
    if (this.#open.size + this.#opening >= maxPerInstance) return { outcome: 'instance_full', max: maxPerInstance }
    this.#opening++
    const id = this.#options.newId?.() ?? randomUUID()
    let opened: boolean
    try {
      const now = clock()
      opened = await store.streams.openEventStream(id, quotaId, keyId, new Date(now + this.#lifetimeMs()), new Date(now), maxPerQuota)
    } finally {
      this.#opening--
    }
    if (!opened) return { outcome: 'quota_full', max: maxPerQuota }
    this.#open.add(id)
    this.#startRenewing()
    return { outcome: 'opened', id }
  }

  /** Frees a stream's place at once, here and in the store. Never throws; closing twice is harmless. */
  async close (id: string): Promise<void> {
    if (!this.#open.delete(id)) return
    if (this.#open.size === 0) this.#stopRenewing()
    try {
      await this.#options.store.streams.closeEventStream(id)
    } catch (error) {
      this.#options.onError?.(error, 'close')
    }
  }

  /** Extends every registration of this instance by a lifetime from now. Never throws. */
  async renew (): Promise<void> {
    const ids = [...this.#open]
    if (ids.length === 0) return
    try {
      await this.#options.store.streams.renewEventStreams(ids, new Date(this.#options.clock() + this.#lifetimeMs()))
    } catch (error) {
      this.#options.onError?.(error, 'renew')
    }
  }

  /** Stops renewing (the app is closing) once a renewal under way has ended. */
  async stop (): Promise<void> {
    this.#stopRenewing()
    await this.#renewing
  }

  #lifetimeMs (): number {
    return REGISTRATION_PERIODS * this.#options.renewMs
  }

  #startRenewing (): void {
    if (this.#timer !== null) return
    this.#timer = setInterval(() => {
      // One renewal at a time: a slow store does not stack them up.
      this.#renewing = this.#renewing.then(() => this.renew())
    }, this.#options.renewMs).unref()
  }

  #stopRenewing (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
  }
}
