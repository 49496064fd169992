import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import fastJson from 'fast-json-stringify'
import { Type, type TSchema } from 'typebox'
import { Readable } from 'node:stream'
import type { IdempotencyKeys } from '../../domain/idempotency.js'
import { decodeCursor, encodeCursor } from '../../domain/cursor.js'
import {
  adjustQuantity, applyBatch, requireDistinctPets, type AppliedChange, BatchRefusedError, type BatchChangeRequest, DEFAULT_INVENTORY_LIMIT, type IdempotentRequest, getStockEntry, INVENTORY_CURSOR_PREFIX, MAX_INVENTORY_LIMIT, StaleEntryError, updateQuantity
} from '../../domain/inventory.js'
import { MAX_QUANTITY, MAX_QUANTITY_TEXT, type InventoryItem as Item, type StockEntry } from '../../model.js'
import { parseInt64 } from '../../int64.js'
import type { Availability, SellingReads } from '../../store/selling/types.js'
import type { FeedPlace, StockStore } from '../../store/stock/types.js'
import type { AlertReads } from '../../store/alerts/types.js'
import { listLowStock } from '../../domain/alerts.js'
import { InventoryCache, type InventoryView } from '../inventory-cache.js'
import type { ChangeSignal } from '../../changes/types.js'
import { IDEMPOTENCY_KEY_DESCRIPTION, idempotencyKeyOf } from '../idempotency.js'
import { AppError, errorBody } from '../../errors.js'
import { cursorRefused, linkNext, NEXT_LINK_FORM } from '../paging.js'
import { entryTag, ifMatchTags, revisionOf } from '../preconditions.js'
import { COMMON_ERRORS, ErrorResponse, Int64Text, INVALID_REQUEST, KEY_IN_FLIGHT, NOT_FOUND, PAYLOAD_TOO_LARGE, RESPONSE_HEADERS, UNSUPPORTED_MEDIA_TYPE } from '../schemas/common.js'
import {
  InventoryAdjustment, InventoryBatch, type InventoryBatchChange, InventoryItem, InventoryUpdate, MAX_BATCH_CHANGES
} from '../../domain/entities.js'

const ETAG_HEADER = { ETag: Type.String({ description: 'Strong validator of the whole inventory; send it back in If-None-Match' }) }
const ENTRY_ETAG_HEADER = {
  ETag: Type.String({ description: 'Strong validator of this stock entry (e.g. "r7"); send it in If-Match to update only an unchanged entry, or in If-None-Match to revalidate' })
}

/** The parameter that opts in to availability: without it every answer is exactly what it was before holds. */
const INCLUDE_AVAILABILITY = 'availability'
const Include = Type.Optional(Type.Enum([INCLUDE_AVAILABILITY], {
  type: 'string',
  description: '`availability` adds `onHand`, `held` and `available` to each entry, as they stand at the instant of the answer ' +
    '(beta). Such an answer is always read fresh from the store: it carries no ETag and no Changes-Cursor, and If-None-Match ' +
    'is ignored (what is held changes without the entry changing, and expiries change it without any write).'
}))

/** The fields `include=availability` adds to an entry. */
const AvailabilityFields = {
  onHand: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_QUANTITY, description: 'With include=availability: the units in stock (= quantity)' })),
  held: Type.Optional(Type.Integer({ minimum: 0, description: 'With include=availability: the units of active, unexpired holds (checkouts and orders) on the pet' })),
  available: Type.Optional(Type.Integer({
    minimum: 0,
    maximum: MAX_QUANTITY,
    description: 'With include=availability: what a new hold can take, onHand - held, never below 0 (on hand may be set below what is held: a count is the physical truth; the holds stay)'
  }))
}

/** An entry as the inventory answers it: the spec's three fields, and availability when asked for. */
const InventoryEntry = Type.Object({ ...InventoryItem.properties, ...AvailabilityFields }, { additionalProperties: false, description: 'The stock entry of one pet' })

/** The listing the cache serializes: the spec's fields only, so its bytes are exactly those of before availability. */
const CachedList = Type.Array(InventoryItem)

const InventoryList = Type.Array(InventoryEntry, {
  description: 'All stock entries, ordered by petId; with `limit` or `cursor`, one page of them',
  headers: {
    ...RESPONSE_HEADERS,
    ETag: Type.String({ description: 'Strong validator of the whole inventory (not sent with a page, nor with include=availability); send it back in If-None-Match' }),
    Link: Type.String({ description: 'With `limit` or `cursor`: rel="next" link while more entries remain.' + NEXT_LINK_FORM }),
    'Changes-Cursor': Type.String({
      description: 'The change feed\'s cursor this listing reflects: every change up to it is in the listing, none after it. ' +
        'To keep a copy, store the listing, then follow `GET /v1/inventory/changes?after=<this cursor>`: nothing you already ' +
        'have is replayed. It keeps up with the feed: once writes stop, every instance answers the feed\'s last change ' +
        'within the listing\'s freshness bound (at once on the instance that wrote; a few seconds at most elsewhere). A ' +
        'cursor from before a restore of the store may be refused later with 410 `cursor_expired`: take the listing again. ' +
        'With pages, on the first page only (later pages may reflect later changes). Absent while no change has ever ' +
        'been recorded (follow the feed from its start). Beta'
    })
  }
})

const InventoryQuery = Type.Object({
  limit: Type.Optional(Type.Integer({
    minimum: 1,
    maximum: MAX_INVENTORY_LIMIT,
    description: `Page size (default ${DEFAULT_INVENTORY_LIMIT} once paging). Without limit and cursor the whole listing is answered.`
  })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Opaque cursor from a rel="next" link' })),
  include: Include,
  lowStock: Type.Optional(Type.Enum(['true', 'false'], {
    type: 'string',
    description: 'With `true`, only the entries at or below their reorder point (`PUT /v1/inventory/{petId}/reorder-point`), in the ' +
      'same shape and order, read from the store at the instant of the request; pages with `limit` and `cursor` as the whole ' +
      'listing does. No ETag and no Changes-Cursor. `false` (or absent): the whole listing. Beta'
  }))
})

const Entry = (description: string) =>
  Type.Object(InventoryEntry.properties, { additionalProperties: false, description, headers: { ...RESPONSE_HEADERS, ...ENTRY_ETAG_HEADER } })

const PetIdParams = Type.Object({ petId: Int64Text('The pet whose stock entry is meant') })

/** The request headers of a stock write: a precondition and an idempotency key. */
const WriteHeaders = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'ETag(s) of the entry as the client last saw it (strong comparison), or *' })),
  'idempotency-key': Type.Optional(Type.String({ description: IDEMPOTENCY_KEY_DESCRIPTION }))
})

const REPLAYED_HEADER = {
  'Idempotent-Replayed': Type.Literal('true', { description: 'Sent when this answer replays an earlier request with the same Idempotency-Key: nothing was applied now' })
}

/** An applied write's answer: the entry, its ETag, and whether it is the replay of an earlier request with the key. */
const Written = (description: string) => Type.Object(InventoryItem.properties, {
  additionalProperties: false,
  description,
  headers: { ...RESPONSE_HEADERS, ...ENTRY_ETAG_HEADER, ...REPLAYED_HEADER }
})

// The errors of the stock writes.
const PRECONDITION_FAILED = ErrorResponse(['precondition_failed'], 'The entry has changed since the ETag sent in If-Match; nothing was changed. ' +
  'The ETag header carries the entry\'s current ETag.', ENTRY_ETAG_HEADER)
const KEY_REUSED = ErrorResponse(['idempotency_key_reused'], 'The Idempotency-Key was used for a different request (operation, pet, body or ' +
  'If-Match) within its retention; nothing was changed.')

/** The answers of a write to one entry (PATCH, adjustments): they differ only in what their 409 can say. */
function entryWriteResponses<C extends TSchema> (conflict: C) {
  return {
    200: Written('The updated stock entry'),
    400: INVALID_REQUEST,
    404: NOT_FOUND,
    409: conflict,
    412: PRECONDITION_FAILED,
    413: PAYLOAD_TOO_LARGE,
    415: UNSUPPORTED_MEDIA_TYPE,
    422: KEY_REUSED,
    ...COMMON_ERRORS
  }
}

const BATCH_REFUSED = Type.Object({
  ...ErrorResponse(['batch_refused', 'idempotency_key_in_flight'], '').properties,
  failures: Type.Optional(Type.Array(Type.Object({
    index: Type.Integer({ minimum: 0, description: 'The failing change\'s position in `changes`, from 0' }),
    petId: InventoryItem.properties.petId,
    code: Type.Enum(['not_found', 'precondition_failed', 'stock_out_of_range'], { type: 'string', description: 'What a single change would have answered' }),
    message: Type.String(),
    etag: Type.Optional(Type.String({ description: 'The entry\'s current ETag (for precondition_failed and stock_out_of_range)' }))
  }, { additionalProperties: false }), { description: 'With batch_refused: every change that cannot apply' }))
}, {
  additionalProperties: false,
  description: 'Conflict: at least one change cannot apply, so none was applied (with `failures`); or ' + KEY_IN_FLIGHT +
    '. Error codes: `batch_refused`, `idempotency_key_in_flight`.',
  headers: RESPONSE_HEADERS
})

/** One change of a batch body as the domain takes it; its ifMatch read as revisions, or a 400 naming the change. */
function batchChange (change: InventoryBatchChange, index: number): BatchChangeRequest {
  const { petId, quantity, delta, ifMatch, reason = 'adjustment', note = null, reference = null } = change
  if ((quantity === undefined) === (delta === undefined)) {
    throw new AppError('invalid_request', `body.changes[${index}] must have either quantity (to set the stock) or delta (to add to it), not ${quantity === undefined ? 'neither' : 'both'}.`)
  }
  let revisions: bigint[] | null
  try {
    revisions = expectedRevisions(ifMatch)
  } catch {
    throw new AppError('invalid_request', `body.changes[${index}].ifMatch must be * or an entity tag such as "r3" (quotes included).`)
  }
  const common = { petId, reason, note, reference, expectedRevisions: revisions }
  return delta === undefined ? { ...common, quantity: quantity as number } : { ...common, delta }
}

/** A retention in the largest whole unit: "24 hours", "90 minutes". */
function retention (seconds: number): string {
  const [amount, unit] = seconds % 3600 === 0 ? [seconds / 3600, 'hour'] : seconds % 60 === 0 ? [seconds / 60, 'minute'] : [seconds, 'second']
  return `${amount} ${unit}${amount === 1 ? '' : 's'}`
}

/** The wire form of an entry: the revision travels as the ETag, not in the body. */
const item = (entry: StockEntry): Item => ({ petId: entry.petId, quantity: entry.quantity, status: entry.status })

/** The revisions an If-Match header allows; null when any entry may be changed (no header, or `*`). */
function expectedRevisions (header: string | undefined): bigint[] | null {
  const condition = ifMatchTags(header)
  if (condition === null || 'any' in condition) return null
  // Tags this service never issued match no revision: the update is refused with 412 if the entry exists.
  return condition.tags.map(revisionOf).filter((revision) => revision !== null)
}

/** A stale entry as HTTP says it: 412, with the entry's current ETag to read again. */
function preconditionFailed (error: unknown): never {
  if (!(error instanceof StaleEntryError)) throw error
  const etag = entryTag(error.current)
  throw new AppError('precondition_failed',
    `The inventory entry of pet ${error.current.petId} has changed since the ETag sent in If-Match; its current ETag is ${etag}.`, { ETag: etag })
}

/** The body of a whole listing: one buffer as it is, or its pieces streamed in order without copying. */
function listingBody (view: InventoryView): Buffer | Readable {
  return Buffer.isBuffer(view.body) ? view.body : Readable.from(view.body, { objectMode: false })
}

/**
 * Sends the whole listing: already-serialized bytes, which Fastify sends as they are. The header names are in lower
 * case, as on every request's path (src/http/plugins/bounds.ts says why).
 */
function sendListing (reply: FastifyReply, view: InventoryView): void {
  if (view.feed !== null) reply.header('changes-cursor', view.feed)
  reply.header('etag', view.etag).header('content-length', view.length).send(listingBody(view) as never)
}

/**
 * The listing GET /v1/inventory serves from memory, and what every write that changes stock tells before it answers:
 * the listing itself, this instance's pushers, and every instance (the change signal). One per app, shared by the
 * routes that change stock (the stock writes here, a hold's confirmation, an order's delivery), so a GET that starts
 * after any of their answers, on any instance, sees the change.
 */
export interface InventoryListing {
  readonly cache: InventoryCache
  /** Tells of entries a write changed (with the version and feed place the store told, where it told them). */
  written (entries: readonly StockEntry[], made: { version?: bigint | undefined, feed?: FeedPlace | undefined }): Promise<void>
  close (): void
}

export interface InventoryListingOptions {
  store: { readonly stock: StockStore }
  /** Tells every instance of an acknowledged change, and what this one has seen of theirs (signal freshness); absent without one. */
  changes?: ChangeSignal
  /** Tells this instance's pushers (webhooks, streams) that a change committed here, so they need not wait for their poll. */
  committed?: () => void
}

/** The app's inventory listing (see InventoryListing). */
export function inventoryListing ({ store, changes, committed }: InventoryListingOptions): InventoryListing {
  // The 200 response's entries without the opt-in fields, compiled once: the cached bytes are what Fastify would have sent.
  const serialize = fastJson(CachedList)
  const cache = new InventoryCache({ store, serialize: (items) => serialize(items), ...(changes === undefined ? {} : { watch: changes.watch }) })
  return {
    cache,
    async written (entries, made) {
      cache.applied(entries, made.version, made.feed)
      committed?.()
      await changes?.announce()
    },
    close: () => { cache.close() }
  }
}

export interface InventoryRouteOptions {
  store: { readonly stock: StockStore, readonly selling: Pick<SellingReads, 'availability' | 'availableEntries'>, readonly alerts: Pick<AlertReads, 'listLowStock'> }
  clock: () => number
  /** The idempotency keys of stock writes (their records live in the store). */
  idempotency: IdempotencyKeys
  /** The listing the app serves and its writes tell (its owner closes it). */
  listing: InventoryListing
  /** Charges the caller for what an operation is worth beyond one request (src/http/plugins/access.ts chargeMore). */
  chargeMore: (request: FastifyRequest, reply: FastifyReply, extra: number, what: string) => Promise<void>
}

export const inventoryRoutes: FastifyPluginAsyncTypebox<InventoryRouteOptions> = async (app, { store, clock, idempotency, listing, chargeMore }) => {
  const keyedWrites = ` With an Idempotency-Key a retry is safe: the same key with the same request within ${retention(idempotency.ttlSeconds)} ` +
    'is answered what the first request was, with `Idempotent-Replayed: true`, and applies nothing again (a replay counts ' +
    'against the rate limit); the key with another request is 422 `idempotency_key_reused`, and while the first request ' +
    'is still processed, 409 `idempotency_key_in_flight`. Only a change that applied is recorded.'
  const { cache } = listing
  const paged = (query: unknown): boolean => {
    const q = query as { limit?: unknown, cursor?: unknown, lowStock?: unknown } | undefined
    return q?.limit !== undefined || q?.cursor !== undefined || q?.lowStock === 'true'
  }
  // Read from the raw query by the rate-limit hook too (before validation): any include answers fresh, never 304.
  const included = (query: unknown): boolean => (query as { include?: unknown } | undefined)?.include !== undefined

  app.get('/inventory', {
    // Lets the rate-limit hook answer a matching If-None-Match with 304 before anything is counted.
    // A page carries no ETag: only the whole listing is revalidated.
    config: { scope: 'read', currentETag: async (request) => paged(request.query) || included(request.query) ? null : await cache.etag() },
    schema: {
      operationId: 'listInventory',
      summary: 'List the stock entries of all pets',
      description: 'Returns current stock levels for all pets in the store, ordered by petId. The response carries a ' +
        'strong ETag; a request with a matching If-None-Match gets 304 without a body, and (as on GitHub) a 304 does ' +
        'not count against the rate limit. With `limit` or `cursor` (an addition to the specification, beta) the answer is ' +
        'one page, ordered by petId, with `Link: <...>; rel="next"` while more remain; pages carry no ETag. With ' +
        '`lowStock=true` (beta) only the entries at or below their reorder point are listed, as they stand in the store. With ' +
        '`include=availability` (beta) each entry also has `onHand`, `held` and `available` at the instant of the answer, read ' +
        'fresh from the store (no ETag, no Changes-Cursor, no 304); without it the answer is exactly the specification\'s.',
      tags: ['inventory'],
      querystring: InventoryQuery,
      headers: Type.Object({
        'if-none-match': Type.Optional(Type.String({ description: 'ETag of a representation the client holds' }))
      }),
      response: {
        200: InventoryList,
        304: Type.Null({ description: 'Not Modified: the inventory is unchanged since the ETag sent; no body.', headers: { ...RESPONSE_HEADERS, ...ETAG_HEADER } }),
        ...COMMON_ERRORS
      }
    }
  }, (request, reply) => {
    reply.type('application/json; charset=utf-8')
    const { limit, cursor, include, lowStock } = request.query
    if (lowStock === 'true') {
      if (include === INCLUDE_AVAILABILITY) throw new AppError('invalid_request', 'lowStock=true does not combine with include=availability yet: ask for one of them.')
      return sendLowStock(request.query, reply)
    }
    if (include === INCLUDE_AVAILABILITY) return sendAvailability(request.query, reply)
    if (limit === undefined && cursor === undefined) {
      // Not an async handler: a listing that needs no store check is sent without a promise.
      const view = cache.currentNow()
      if (view === undefined) {
        // Awaiting the reply resolves once the answer is sent: Fastify must not take the handler's end for an
        // empty answer while a streamed listing has not started writing.
        return cache.current().then(async (fresh) => {
          sendListing(reply, fresh)
          await reply
        })
      }
      sendListing(reply, view)
      return
    }
    return sendPage(request.query, reply)
  })

  /** The pet id a listing's cursor continues after (null: from the first); a cursor that is not one is 400. */
  function afterOf (cursor: string | undefined): bigint | null {
    try {
      return cursor === undefined ? null : decodeCursor(INVENTORY_CURSOR_PREFIX, cursor)
    } catch (error) {
      return cursorRefused(error)
    }
  }

  async function sendPage ({ limit, cursor }: { limit?: number, cursor?: string }, reply: FastifyReply): Promise<void> {
    const size = limit ?? DEFAULT_INVENTORY_LIMIT
    const after = afterOf(cursor)
    const page = await cache.page(after, size)
    // The first page only: later pages may come from newer snapshots, and a follower must start from the oldest.
    if (page.feed !== null && after === null) reply.header('Changes-Cursor', page.feed)
    if (page.more && page.last !== null) {
      linkNext(reply, { limit: String(size), cursor: encodeCursor(INVENTORY_CURSOR_PREFIX, page.last) })
    }
    reply.send(page.body as never)
    // Resolves once the answer is sent, so Fastify never takes the handler's end for an answer still to send.
    await reply
  }

  /**
   * The entries at or below their reorder point, from the store (not the cached listing: the filter is rare, and the
   * points are not part of what the listing's version covers). Whole, or in pages as the listing pages.
   */
  async function sendLowStock ({ limit, cursor }: { limit?: number, cursor?: string }, reply: FastifyReply): Promise<Item[]> {
    if (limit === undefined && cursor === undefined) return await listLowStock(store, null, Number.MAX_SAFE_INTEGER)
    const size = limit ?? DEFAULT_INVENTORY_LIMIT
    const after = afterOf(cursor)
    const items = await listLowStock(store, after, size + 1)
    const page = items.slice(0, size)
    const last = page.at(-1)
    if (items.length > size && last !== undefined) {
      linkNext(reply, { lowStock: 'true', limit: String(size), cursor: encodeCursor(INVENTORY_CURSOR_PREFIX, last.petId) })
    }
    return page
  }

  /**
   * The listing with availability: on hand, held and available of every pet at one instant, with each pet's status
   * (the listing's, as the store has it). Read from the store each time, paged like the listing from memory.
   */
  async function sendAvailability ({ limit, cursor }: { limit?: number, cursor?: string }, reply: FastifyReply): Promise<Array<Item & Omit<Availability, 'petId'>>> {
    const after = afterOf(cursor)
    const whole = limit === undefined && cursor === undefined
    const size = limit ?? DEFAULT_INVENTORY_LIMIT
    // One more than the page: whether another page follows, without a second query.
    const entries = (await store.selling.availableEntries(after, whole ? null : size + 1, new Date(clock())))
      .map(({ petId, status, onHand, held, available }) => ({ petId, quantity: onHand, status, onHand, held, available }))
    if (whole) return entries
    const page = entries.slice(0, size)
    const last = page.at(-1)
    if (entries.length > size && last !== undefined) {
      linkNext(reply, { limit: String(size), cursor: encodeCursor(INVENTORY_CURSOR_PREFIX, last.petId), include: INCLUDE_AVAILABILITY })
    }
    return page
  }

  app.get('/inventory/:petId', {
    config: {
      scope: 'read',
      currentETag: async (request) => {
        if (included(request.query)) return null
        const petId = parseInt64((request.params as { petId?: string }).petId ?? '')
        const entry = petId === null ? null : await store.stock.getStockEntry(petId)
        return entry === null ? null : entryTag(entry)
      }
    },
    schema: {
      operationId: 'getInventoryItem',
      summary: 'Get the stock entry of one pet',
      description: 'Returns one stock entry with its strong ETag, for a later PATCH with If-Match (optimistic concurrency). ' +
        'A request with a matching If-None-Match gets 304 without a body and, like the listing, costs no quota. ' +
        'With `include=availability` the entry also has `onHand`, `held` and `available` at the instant of the answer, read ' +
        'fresh (no ETag, no 304). Beta: an addition to the specification\'s two inventory operations.',
      tags: ['inventory'],
      'x-stability': 'beta',
      params: PetIdParams,
      // Open like before the parameter existed: a query this route never read must not start being refused.
      querystring: Type.Object({ include: Include }),
      headers: Type.Object({
        'if-none-match': Type.Optional(Type.String({ description: 'ETag of a representation the client holds' }))
      }),
      response: {
        200: Entry('The stock entry (its ETag is not sent with include=availability)'),
        304: Type.Null({ description: 'Not Modified: the entry is unchanged since the ETag sent; no body.', headers: { ...RESPONSE_HEADERS, ...ENTRY_ETAG_HEADER } }),
        400: INVALID_REQUEST,
        404: NOT_FOUND,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const petId = BigInt(request.params.petId)
    if (request.query.include === INCLUDE_AVAILABILITY) {
      const [entry, [counts]] = await Promise.all([getStockEntry(store, petId), store.selling.availability([petId], new Date(clock()))])
      if (counts === undefined) throw new AppError('not_found', `No inventory entry exists for pet ${petId}.`)
      const { onHand, held, available } = counts
      return { petId, quantity: onHand, status: entry.status, onHand, held, available }
    }
    const entry = await getStockEntry(store, petId)
    reply.header('ETag', entryTag(entry))
    return item(entry)
  })

  app.patch('/inventory/:petId', {
    config: { scope: 'write' },
    schema: {
      operationId: 'updateInventory',
      summary: 'Set the stock quantity of one pet',
      description: 'Sets the stock quantity of one pet (arrivals, returns, manual adjustments) and records the change, with ' +
        'its reason, note and reference, in the stock ledger in the same transaction. With If-Match the change applies only if the entry ' +
        'is unchanged since that ETag (412 otherwise); without it the change applies unconditionally. ' +
        'Experimental: the request shape may change before it becomes stable. The pet\'s status is not changed.' + keyedWrites,
      tags: ['inventory'],
      'x-stability': 'experimental',
      params: PetIdParams,
      headers: WriteHeaders,
      body: InventoryUpdate,
      response: entryWriteResponses(ErrorResponse(['idempotency_key_in_flight'], `Conflict: ${KEY_IN_FLIGHT}.`))
    }
  }, async (request, reply) => {
    const { quantity, reason = 'adjustment', note = null, reference = null } = request.body
    const change = await updateQuantity(store, BigInt(request.params.petId),
      { quantity, reason, note, reference, expectedRevisions: expectedRevisions(request.headers['if-match']) },
      { keyId: request.apiKey?.id ?? null, requestId: request.id }, clock, keyedBy(request)).catch(preconditionFailed)
    return await answerChange(reply, change)
  })

  app.post('/inventory/:petId/adjustments', {
    config: { scope: 'write' },
    schema: {
      operationId: 'adjustInventory',
      summary: 'Add to or take from the stock of one pet',
      description: 'Adds `delta` to the stock quantity of one pet (positive for arrivals and returns, negative for what left), ' +
        'atomically: concurrent adjustments never lose one another, with no read and If-Match needed. The change and its ' +
        `reason, note and reference are recorded in the stock ledger in the same transaction. A result outside 0 to ${MAX_QUANTITY_TEXT} is ` +
        'refused with 409 `stock_out_of_range` and changes nothing. With If-Match the change applies only if the entry is ' +
        'unchanged since that ETag (412 otherwise). Answers the updated entry and its ETag. ' +
        'Beta: an addition to the specification.' + keyedWrites,
      tags: ['inventory'],
      'x-stability': 'beta',
      params: PetIdParams,
      headers: WriteHeaders,
      body: InventoryAdjustment,
      response: entryWriteResponses(ErrorResponse(['stock_out_of_range', 'idempotency_key_in_flight'],
        `Conflict: the result would be below 0 or above ${MAX_QUANTITY_TEXT}, or ${KEY_IN_FLIGHT}; nothing was changed.`))
    }
  }, async (request, reply) => {
    const { delta, reason = 'adjustment', note = null, reference = null } = request.body
    const change = await adjustQuantity(store, BigInt(request.params.petId),
      { delta, reason, note, reference, expectedRevisions: expectedRevisions(request.headers['if-match']) },
      { keyId: request.apiKey?.id ?? null, requestId: request.id }, clock, keyedBy(request)).catch(preconditionFailed)
    return await answerChange(reply, change)
  })

  app.post('/inventory/batch', {
    config: { scope: 'write' },
    schema: {
      operationId: 'batchUpdateInventory',
      summary: 'Change the stock of several pets at once, all or nothing',
      description: `Applies 1 to ${MAX_BATCH_CHANGES} stock changes in one transaction: each sets a \`quantity\` (as PATCH) or adds a ` +
        '`delta` (as an adjustment) for one pet, optionally only if the entry still has the ETag in `ifMatch`. Either every ' +
        `change applies, or none: when any cannot (no entry, a stale \`ifMatch\`, a result outside 0 to ${MAX_QUANTITY_TEXT}), the ` +
        'answer is 409 `batch_refused` listing every failing change (`index`, `petId`, `code`, `message`, and the entry\'s ' +
        'current `etag` where it has one), and nothing is changed. A pet appears at most once per batch. The ledger rows of a ' +
        'batch share one batch id. A batch of N changes costs N requests of quota; when fewer remain it is refused whole ' +
        'with 429, and the rate-limit fields show what is left. Answers every resulting entry with its ETag, in the ' +
        'batch\'s order. Beta: an addition to the specification.' + keyedWrites,
      tags: ['inventory'],
      'x-stability': 'beta',
      headers: Type.Object({ 'idempotency-key': WriteHeaders.properties['idempotency-key'] }),
      body: InventoryBatch,
      response: {
        200: Type.Object({
          entries: Type.Array(Type.Object({
            ...InventoryItem.properties,
            etag: Type.String({ description: 'The entry\'s new ETag, for a later If-Match', examples: ['"r8"'] })
          }, { additionalProperties: false }), { description: 'The entries as the batch left them, in its order' })
        }, {
          additionalProperties: false,
          description: 'Every change applied',
          headers: { ...RESPONSE_HEADERS, ...REPLAYED_HEADER }
        }),
        400: INVALID_REQUEST,
        409: BATCH_REFUSED,
        413: PAYLOAD_TOO_LARGE,
        415: UNSUPPORTED_MEDIA_TYPE,
        422: KEY_REUSED,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    if (request.headers['if-match'] !== undefined) {
      throw new AppError('invalid_request', 'If-Match does not apply to a batch: put each change\'s ETag in its ifMatch.')
    }
    const changes = request.body.changes.map((change, index) => batchChange(change, index))
    // A body that will be refused whole costs what any refused request costs, not N.
    requireDistinctPets(changes)
    await chargeMore(request, reply, changes.length - 1, `This batch of ${changes.length} changes`)
    try {
      const { entries, version, feed, replayed } = await applyBatch(store, changes, { keyId: request.apiKey?.id ?? null, requestId: request.id }, clock, keyedBy(request))
      await settle(reply, entries, { version, feed }, replayed)
      return { entries: entries.map((entry) => ({ ...item(entry), etag: entryTag(entry) })) }
    } catch (error) {
      if (!(error instanceof BatchRefusedError)) throw error
      // The Error body, with the failing changes: what a client needs to fix and resend the batch.
      return await reply.code(409).send({
        ...errorBody('batch_refused', error.message),
        failures: error.failures.map(({ index, petId, code, message, current }) => ({ index, petId, code, message, ...(current === undefined ? {} : { etag: entryTag(current) }) }))
      })
    }
  })

  /** The request's idempotency key with the process's keys; undefined without one. */
  function keyedBy (request: FastifyRequest): IdempotentRequest | undefined {
    const key = idempotencyKeyOf(request.raw)
    return key === null ? undefined : { keys: idempotency, key, owner: request.apiKey?.quotaId ?? null }
  }

  /**
   * The answer to an applied change: the listing and every instance learn of it first, then the entry and its ETag.
   * A replay applied nothing now: it is answered as the first request was, and says so.
   */
  async function answerChange (reply: FastifyReply, { entry, version, feed, replayed }: AppliedChange): Promise<Item> {
    await settle(reply, [entry], { version, feed }, replayed)
    reply.header('ETag', entryTag(entry))
    return item(entry)
  }

  /**
   * What every applied write does before its answer: the listing and every instance learn of the entries it changed,
   * so a GET that starts after the answer, on any instance, sees them. A replay applied nothing now, and says so.
   */
  async function settle (reply: FastifyReply, entries: readonly StockEntry[], made: { version?: bigint | undefined, feed?: FeedPlace | undefined },
    replayed: boolean): Promise<void> {
    if (replayed) {
      reply.header('Idempotent-Replayed', 'true')
      return
    }
    await listing.written(entries, made)
  }
}
