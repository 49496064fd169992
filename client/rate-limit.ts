/** The calling key's standing: plan, scopes, both windows, ban and expiry, answered during a ban too. */
import type { Transport } from './transport.js'
import type { PetstoreClient, RateLimitStatus } from './types.js'

export function rateLimitOperations ({ send, url }: Transport): Pick<PetstoreClient, 'rateLimit'> {
  return {
    async rateLimit () {
      const { meta, body } = await send({ operationId: 'getRateLimit', method: 'GET', url: url('/rate_limit') })
      return { ...meta, data: body as RateLimitStatus }
    }
  }
}
