/**
 * Holds on stock for a checkout: place (all lines or none), read, list page by page, extend, confirm (the sale) and
 * release, each write retried with its Idempotency-Key.
 */
import { int64Text } from './int64-values.js'
import { followNext, holdPage } from './paging.js'
import { sellingResult } from './selling.js'
import type { Transport } from './transport.js'
import type { Hold, HoldQuery, PetstoreClient } from './types.js'

type HoldOperations = Pick<PetstoreClient, 'placeHold' | 'getHold' | 'listHolds' | 'allHolds' | 'extendHold' | 'confirmHold' | 'releaseHold'>

export function holdOperations ({ send, url, write }: Transport): HoldOperations {
  const holdPath = (holdId: string) => `/holds/${encodeURIComponent(holdId)}`
  const holdsUrl = ({ petId, ...query }: HoldQuery) =>
    url('/holds', { ...query, petId: petId === undefined ? undefined : int64Text(petId, 'petId') })
  // Confirming and releasing take no body; `{}` is what the service takes as none.
  const end = (operationId: string, name: string) => async (holdId: string, options = {}) => {
    const call = write(operationId, 'POST', `${holdPath(holdId)}/${name}`, {}, options)
    return sellingResult<Hold>(await send(call), call.idempotencyKey)
  }
  return {
    async placeHold (hold, options = {}) {
      // Every id checked as the single-pet methods check theirs: a number above 2^53 may already be another pet.
      const lines = hold.lines.map((line, i) => ({ ...line, petId: BigInt(int64Text(line.petId, `lines[${i}].petId`)) }))
      const call = write('placeHold', 'POST', '/holds', { ...hold, lines }, options)
      return sellingResult<Hold>(await send(call), call.idempotencyKey)
    },

    async getHold (holdId) {
      const { meta, body } = await send({ operationId: 'getHold', method: 'GET', url: url(holdPath(holdId)) })
      return { ...meta, data: body as Hold }
    },

    async listHolds (query = {}) {
      return holdPage(await send({ operationId: 'listHolds', method: 'GET', url: holdsUrl(query) }))
    },

    allHolds (query = {}) {
      return followNext<Hold>(holdsUrl(query), (next) => send({ operationId: 'listHolds', method: 'GET', url: next }))
    },

    async extendHold (holdId, expiresIn, options = {}) {
      const call = write('extendHold', 'POST', `${holdPath(holdId)}/extend`, { expiresIn }, options)
      return sellingResult<Hold>(await send(call), call.idempotencyKey)
    },

    confirmHold: end('confirmHold', 'confirm'),
    releaseHold: end('releaseHold', 'release')
  }
}
