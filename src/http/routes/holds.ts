/**
 * /v1/holds: a storefront holds stock while its customer checks out, confirms the hold when the payment succeeds (the
 * units are sold) and releases it when the checkout is abandoned; unconfirmed, a hold expires by itself. The domain
 * (src/domain/holds.ts) and the store decide; here are the wire shapes, the scopes and what a sale tells the listing.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Type } from 'typebox'
import { Int64, StockReference } from '../../domain/entities.js'
import {
  confirmHold, DEFAULT_HOLD_LIMIT, extendHold, getHold, type HoldAnswer, type HoldsContext, listHolds, MAX_HOLD_LIMIT, placeHold, releaseHold
} from '../../domain/holds.js'
import type { IdempotencyKeys } from '../../domain/idempotency.js'
import { AppError } from '../../errors.js'
import { MAX_REFERENCE_LENGTH } from '../../domain/rules.js'
import { HOLD_ID_PATTERN, type HoldSettings } from '../../domain/selling.js'
import { HOLD_STATES, MAX_QUANTITY, MAX_QUANTITY_TEXT, type Hold } from '../../model.js'
import { MAX_HOLD_LINES } from '../../store/selling/types.js'
import { cursorRefused, linkNext, NEXT_LINK_FORM } from '../paging.js'
import { COMMON_ERRORS, ErrorResponse, Int64Text, INVALID_REQUEST, KEY_IN_FLIGHT, PAYLOAD_TOO_LARGE, RESPONSE_HEADERS, UNSUPPORTED_MEDIA_TYPE } from '../schemas/common.js'
import { answerShortage, KEY_REUSED, REPLAYED_HEADER, SellingConflict, sellerOf, sellingKeyOf, SellingWriteHeaders } from '../schemas/selling.js'
import type { InventoryListing } from './inventory.js'

const DateTime = (description: string) => Type.String({ format: 'date-time', description })
const NullableDateTime = (description: string) => Type.Union([DateTime(description), Type.Null()], { description })

const HoldLine = Type.Object({
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'The pet whose units are held' }),
  quantity: Type.Integer({ minimum: 1, maximum: MAX_QUANTITY, description: `Units held, 1 to ${MAX_QUANTITY_TEXT}` })
}, { additionalProperties: false, description: 'Units of one pet' })

const HOLD_STATE_MEANINGS = '`active`: its units count as held (not available to anyone else) until it expires; `confirmed`: its units ' +
  'were sold and left the stock; `released`: given up, its units available again; `expired`: its expiry passed before it was ' +
  'confirmed or released (it stopped counting at that instant, whether or not the service has recorded it yet).'

const HoldSchema = Type.Object({
  id: Type.String({ pattern: HOLD_ID_PATTERN, description: 'The hold\'s id: `hold_` and 20 random characters', examples: ['hold_3q2-7wEhR1bJ0cVn8xYz'] }),
  state: Type.Enum(HOLD_STATES, { type: 'string', description: `The state at the instant of the answer. ${HOLD_STATE_MEANINGS}` }),
  lines: Type.Array(HoldLine, { minItems: 1, maxItems: MAX_HOLD_LINES, description: 'One line per pet, ordered by petId' }),
  reference: Type.Union([Type.String(), Type.Null()], { description: 'What the hold is for, as sent (a cart, a checkout); null when none was sent' }),
  createdAt: DateTime('When it was placed'),
  expiresAt: NullableDateTime('When it stops counting unless confirmed or released first; null for the hold of an order (it lasts until the order is delivered or cancelled)'),
  endedAt: NullableDateTime('When it was confirmed, released or expired; null while active'),
  // Left out, not null, for a checkout's hold: fast-json-stringify writes an int64 (a bigint) only as a lone integer,
  // never in a union with null, and the API leaves out a field a record lacks (a pet's tags, too).
  orderId: Type.Optional(Type.Unsafe<bigint>({ ...Int64, description: 'The order whose stock it keeps (move the order, not the hold); left out for a checkout\'s hold' }))
}, { additionalProperties: false, description: 'Units of pets held for a checkout or an order' })

/** A hold on the wire: dates in RFC 3339, without who placed it (the quota and key are the caller's own). */
function holdJson (hold: Hold) {
  return {
    id: hold.id,
    state: hold.state,
    lines: hold.lines,
    reference: hold.reference,
    createdAt: hold.createdAt.toISOString(),
    expiresAt: hold.expiresAt?.toISOString() ?? null,
    endedAt: hold.endedAt?.toISOString() ?? null,
    ...(hold.orderId === null ? {} : { orderId: hold.orderId })
  }
}

const Answer = (description: string, headers = {}) =>
  Type.Object(HoldSchema.properties, { additionalProperties: false, description, headers: { ...RESPONSE_HEADERS, ...REPLAYED_HEADER, ...headers } })

const HoldParams = Type.Object({
  holdId: Type.String({ maxLength: 64, description: 'The hold\'s id, as placing it answered (`hold_` and 20 characters)' })
})

const HOLD_NOT_FOUND = ErrorResponse(['not_found'], 'No hold has this id.')

export interface HoldRouteOptions {
  store: HoldsContext['store']
  clock: () => number
  settings: HoldSettings
  /** The idempotency keys of writes (shared with stock writes: one key names one request of a caller). */
  idempotency: IdempotencyKeys
  /** The listing the app serves: a confirmation's sale is told to it as a stock write's change. */
  listing: InventoryListing
}

export const holdRoutes: FastifyPluginAsyncTypebox<HoldRouteOptions> = async (app, { store, clock, settings, idempotency, listing }) => {
  const context: HoldsContext = { store, clock, settings }
  const keyed = 'Requires an `Idempotency-Key` (400 `invalid_request` without one): a retry with the same key and request is answered ' +
    'what the first one was, status code included, with `Idempotent-Replayed: true`, and changes nothing again; the key with another ' +
    'request is 422 `idempotency_key_reused`.'
  const writeErrors = {
    400: INVALID_REQUEST,
    404: HOLD_NOT_FOUND,
    413: PAYLOAD_TOO_LARGE,
    415: UNSUPPORTED_MEDIA_TYPE,
    422: KEY_REUSED,
    ...COMMON_ERRORS
  }

  app.post('/holds', {
    config: { scope: 'storefront' },
    schema: {
      operationId: 'placeHold',
      summary: 'Hold units of one or more pets for a checkout',
      description: `Holds units of 1 to ${MAX_HOLD_LINES} pets, all of them or none: the hold is granted only if every line's units are ` +
        'available when it commits (available = on hand - units of active holds), decided in one transaction, so that two ' +
        'customers can never both hold the last unit, on any number of instances. While active the units are not available to ' +
        `anyone else; the hold expires after \`expiresIn\` seconds (default ${settings.defaultTtlSeconds}, at most ` +
        `${settings.maxTtlSeconds}) and stops counting at that instant. Confirm it when the payment succeeds (the units are sold), ` +
        'release it when the checkout is abandoned. Refused with 409 `insufficient_stock` (with `shortages`: every line and how ' +
        `many units are available) or \`hold_limit_reached\` (a key's quota may have ${settings.maxActivePerQuota} active holds of ` +
        `${settings.maxUnitsPerQuota} units at most); nothing is held then. Counts as one request against the rate limit. ${keyed} Beta.`,
      tags: ['holds'],
      'x-stability': 'beta',
      headers: SellingWriteHeaders,
      body: Type.Object({
        lines: Type.Array(HoldLine, { minItems: 1, maxItems: MAX_HOLD_LINES, description: `1 to ${MAX_HOLD_LINES} lines, one per pet (a pet appears once)` }),
        expiresIn: Type.Optional(Type.Integer({
          minimum: 1,
          maximum: settings.maxTtlSeconds,
          description: `Seconds until the hold expires, 1 to ${settings.maxTtlSeconds} (default ${settings.defaultTtlSeconds})`
        })),
        reference: Type.Optional(Type.String({ ...StockReference, description: 'What the hold is for, in your own terms (a cart, a checkout); recorded with the sale when confirmed' }))
      }, { additionalProperties: false, description: 'What to hold' }),
      response: {
        201: Answer('The hold, granted (also on a replay)', {
          Location: Type.String({ description: 'The hold, relative to the request URL: `holds/{holdId}`' })
        }),
        ...writeErrors,
        404: ErrorResponse(['not_found'], 'A pet of the lines has no stock entry; nothing was held.'),
        409: SellingConflict(['insufficient_stock', 'hold_limit_reached', 'idempotency_key_in_flight'],
          `Conflict: not enough units available (\`shortages\` lists every short line), the quota's caps reached, or ${KEY_IN_FLIGHT}; nothing was held.`)
      }
    }
  }, async (request, reply) => {
    const { lines, expiresIn, reference } = request.body
    try {
      const placed = await placeHold(context, { lines, expiresIn, reference }, sellerOf(request), sellingKeyOf(request, idempotency))
      reply.code(201).header('Location', `holds/${placed.hold.id}`)
      return answer(reply, placed)
    } catch (error) {
      return answerShortage(reply, error)
    }
  })

  app.get('/holds', {
    config: { scope: 'read' },
    schema: {
      operationId: 'listHolds',
      summary: 'List holds',
      description: 'The holds of every key, oldest first, one page at a time, filtered by pet, reference or state (the state at the ' +
        'instant of the answer: an active hold past its expiry is `expired`). While more remain, the response carries ' +
        '`Link: <...>; rel="next"`; follow it unchanged to get the next page. Ended holds are kept for a while and then deleted. Beta.',
      tags: ['holds'],
      'x-stability': 'beta',
      querystring: Type.Object({
        petId: Type.Optional(Int64Text('Only holds with a line of this pet')),
        reference: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_REFERENCE_LENGTH, description: 'Only holds with this reference' })),
        state: Type.Optional(Type.Enum(HOLD_STATES, { type: 'string', description: 'Only holds in this state now' })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_HOLD_LIMIT, default: DEFAULT_HOLD_LIMIT, description: 'Page size' })),
        cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Opaque cursor from a rel="next" link' }))
      }, { additionalProperties: false }),
      response: {
        200: Type.Array(HoldSchema, {
          description: 'One page of holds, oldest first',
          headers: { ...RESPONSE_HEADERS, Link: Type.String({ description: 'rel="next" link while more holds remain.' + NEXT_LINK_FORM }) }
        }),
        400: INVALID_REQUEST,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const { petId, reference, state, limit = DEFAULT_HOLD_LIMIT, cursor } = request.query
    const page = await listHolds(context, { petId: petId === undefined ? undefined : BigInt(petId), reference, state },
      { limit, cursor: cursor ?? null }).catch(cursorRefused)
    if (page.nextCursor !== null) {
      linkNext(reply, {
        limit: String(limit),
        cursor: page.nextCursor,
        ...(petId === undefined ? {} : { petId }),
        ...(reference === undefined ? {} : { reference }),
        ...(state === undefined ? {} : { state })
      })
    }
    return page.holds.map(holdJson)
  })

  app.get('/holds/:holdId', {
    config: { scope: 'read' },
    schema: {
      operationId: 'getHold',
      summary: 'Get a hold',
      description: 'One hold as it stands at the instant of the answer (an active hold past its expiry is `expired`). Beta.',
      tags: ['holds'],
      'x-stability': 'beta',
      params: HoldParams,
      response: {
        200: Type.Object(HoldSchema.properties, { additionalProperties: false, description: 'The hold', headers: RESPONSE_HEADERS }),
        404: HOLD_NOT_FOUND,
        ...COMMON_ERRORS
      }
    }
  }, async (request) => holdJson(await getHold(context, request.params.holdId)))

  const endConflict = (what: string) => ErrorResponse(['hold_not_active', 'hold_of_order', 'idempotency_key_in_flight'],
    `Conflict: the hold is no longer active (confirmed, released or expired), it keeps an order's stock (move the order), or ${KEY_IN_FLIGHT}; ${what}.`)

  app.post('/holds/:holdId/extend', {
    config: { scope: 'storefront' },
    schema: {
      operationId: 'extendHold',
      summary: 'Move a hold\'s expiry',
      description: 'Sets an active hold to expire `expiresIn` seconds from now (sooner or later than before), at most ' +
        `${settings.maxTtlSeconds} seconds after it was placed: a later expiry is refused with 400 naming the latest allowed. ` +
        `${keyed} Beta.`,
      tags: ['holds'],
      'x-stability': 'beta',
      params: HoldParams,
      headers: SellingWriteHeaders,
      body: Type.Object({
        expiresIn: Type.Integer({ minimum: 1, maximum: settings.maxTtlSeconds, description: 'Seconds from now until the hold expires' })
      }, { additionalProperties: false }),
      response: {
        200: Answer('The hold with its new expiry'),
        ...writeErrors,
        409: endConflict('nothing was changed')
      }
    }
  }, async (request, reply) => answer(reply, await extendHold(context, request.params.holdId, request.body.expiresIn, sellerOf(request), sellingKeyOf(request, idempotency))))

  app.post('/holds/:holdId/confirm', {
    config: { scope: 'storefront' },
    schema: {
      operationId: 'confirmHold',
      summary: 'Sell the units of a hold',
      description: 'Confirms an active hold when its checkout is paid: its units leave the stock as a sale, one stock change per pet with ' +
        'reason `sale` and the hold\'s reference, in one transaction, and the listing shows it to every request that starts after ' +
        'the answer. Refused with 409 `insufficient_stock` when a pet has fewer units on hand than its line (its stock was set below ' +
        `what was held since; \`shortages\` says what is on hand): nothing is sold and the hold stays active. ${keyed} ` +
        'The body is empty or `{}`. Beta.',
      tags: ['holds'],
      'x-stability': 'beta',
      params: HoldParams,
      headers: SellingWriteHeaders,
      response: {
        200: Answer('The hold, confirmed'),
        ...writeErrors,
        409: SellingConflict(['hold_not_active', 'hold_of_order', 'insufficient_stock', 'idempotency_key_in_flight'],
          `Conflict: the hold is no longer active, keeps an order's stock, a pet has fewer units on hand than its line (\`shortages\`), or ${KEY_IN_FLIGHT}; nothing was sold.`)
      }
    }
  }, async (request, reply) => {
    emptyBody(request.body)
    try {
      const sale = await confirmHold(context, request.params.holdId, sellerOf(request), sellingKeyOf(request, idempotency))
      // What a stock write does before its answer: the listing and every instance learn of the sale.
      if (!sale.replayed) await listing.written(sale.entries, { version: sale.version, feed: sale.feed })
      return answer(reply, sale)
    } catch (error) {
      return answerShortage(reply, error)
    }
  })

  app.post('/holds/:holdId/release', {
    config: { scope: 'storefront' },
    schema: {
      operationId: 'releaseHold',
      summary: 'Give up a hold',
      description: 'Releases an active hold when its checkout is abandoned: its units are available again at once. ' +
        `${keyed} The body is empty or \`{}\`. Beta.`,
      tags: ['holds'],
      'x-stability': 'beta',
      params: HoldParams,
      headers: SellingWriteHeaders,
      response: {
        200: Answer('The hold, released'),
        ...writeErrors,
        409: endConflict('nothing was changed')
      }
    }
  }, async (request, reply) => {
    emptyBody(request.body)
    return answer(reply, await releaseHold(context, request.params.holdId, sellerOf(request), sellingKeyOf(request, idempotency)))
  })

  /**
   * Confirm and release take no content: no body, or `{}` (what many clients send with a POST). Anything else is
   * refused rather than ignored, so that a client that means something by it learns that nothing reads it.
   */
  function emptyBody (body: unknown): void {
    if (body === undefined || body === null) return
    if (typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0) return
    throw new AppError('invalid_request', 'The body must be empty or {}: this operation takes no fields.')
  }


  /** The hold on the wire; a replay says so. */
  function answer (reply: FastifyReply, { hold, replayed }: HoldAnswer) {
    if (replayed) reply.header('Idempotent-Replayed', 'true')
    return holdJson(hold)
  }
}
