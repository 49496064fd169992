/**
 * What the selling operations (holds, orders placed through the API) share on the wire: the Idempotency-Key they
 * require, the header of a replay, and the 409 of a shortage, which carries every short line beside the Error body.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { IdempotencyKeys } from '../../domain/idempotency.js'
import { InsufficientStockError, type Seller, type SellingKey } from '../../domain/selling.js'
import { Int64 } from '../../domain/entities.js'
import { errorBody, type ErrorCode } from '../../errors.js'
import { IDEMPOTENCY_KEY_DESCRIPTION, idempotencyKeyOf } from '../idempotency.js'
import { ErrorResponse, RESPONSE_HEADERS } from './common.js'

/**
 * The headers of a selling write. The key is required, but left optional to the validator: a request without one
 * is refused by the domain with a message that says why it is needed (400 invalid_request naming the header).
 */
export const SellingWriteHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({
    description: 'Required on every hold and order write (400 `invalid_request` without it). ' + IDEMPOTENCY_KEY_DESCRIPTION
  }))
})

/** Sent on the answer to a retry: it replays the first answer, status code included. */
export const REPLAYED_HEADER = {
  'Idempotent-Replayed': Type.Literal('true', { description: 'Sent when this answer replays an earlier request with the same Idempotency-Key (same status and body): nothing was applied now' })
}

/** 422: the key was sent before with another request. */
export const KEY_REUSED = ErrorResponse(['idempotency_key_reused'], 'The Idempotency-Key was used for a different request (operation, ' +
  'target or body) within its retention; nothing was changed.')

/** One line of a refusal for want of stock. */
export const Shortage = Type.Object({
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'The pet of the short line' }),
  requested: Type.Integer({ minimum: 1, description: 'The units the line asked for' }),
  available: Type.Integer({ minimum: 0, description: 'The units available when the request was decided (for a confirmation or delivery: on hand)' })
}, { additionalProperties: false })

/**
 * A 409 whose codes include insufficient_stock: the Error body, and with that code `shortages`, every line that asked
 * for more than there was.
 */
export function SellingConflict (codes: ErrorCode[], description: string) {
  return Type.Object({
    ...ErrorResponse(codes, '').properties,
    shortages: Type.Optional(Type.Array(Shortage, { description: 'With insufficient_stock: every line that asked for more units than there were' }))
  }, { additionalProperties: false, description: `${description} Error codes: ${codes.map((c) => '`' + c + '`').join(', ')}.`, headers: RESPONSE_HEADERS })
}

/**
 * Answers an InsufficientStockError with its shortages and returns the reply (return it from the handler); rethrows
 * anything else, for the error handler to answer.
 */
export function answerShortage (reply: FastifyReply, error: unknown): FastifyReply {
  if (!(error instanceof InsufficientStockError)) throw error
  // The Error body, with the short lines: what a storefront needs to tell its customer, or to hold less.
  return reply.code(409).type('application/json; charset=utf-8').send({ ...errorBody('insufficient_stock', error.message), shortages: error.shortages })
}

/** Who places or moves a hold or an order: every selling route is behind the gate, so a key is known. */
export function sellerOf (request: FastifyRequest): Seller {
  const key = request.apiKey
  if (key === null) throw new Error('A selling write needs an API key')
  return { quotaId: key.quotaId, keyId: key.id, requestId: request.id }
}

/** The request's idempotency key (required: the domain refuses a write without one), owned by the key's quota. */
export function sellingKeyOf (request: FastifyRequest, keys: IdempotencyKeys): SellingKey {
  return { keys, key: idempotencyKeyOf(request.raw), owner: request.apiKey?.quotaId ?? null }
}
