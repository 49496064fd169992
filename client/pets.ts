/** The classic Petstore's pet by id: a deprecated operation, answered with what its deprecation headers say. */
import { int64Text } from './int64-values.js'
import { linkTarget } from './paging.js'
import type { Transport } from './transport.js'
import type { DeprecationInfo, Pet, PetstoreClient } from './types.js'

/** The deprecation headers: RFC 9745 `Deprecation` (`@` and Unix seconds), RFC 8594 `Sunset`, their `Link`. */
function deprecationOf (headers: Headers, base: string): DeprecationInfo {
  const deprecation = /^@(-?[0-9]+)$/.exec(headers.get('deprecation') ?? '')
  const sunset = headers.get('sunset')
  const sunsetAt = sunset === null ? Number.NaN : Date.parse(sunset)
  return {
    deprecatedAt: deprecation === null ? null : new Date(Number(deprecation[1]) * 1000),
    sunset: Number.isNaN(sunsetAt) ? null : new Date(sunsetAt),
    link: linkTarget(headers.get('link'), 'deprecation', base)
  }
}

export function petOperations ({ send, url }: Transport): Pick<PetstoreClient, 'getPet'> {
  return {
    async getPet (petId) {
      const { meta, body, url: requested } = await send({ operationId: 'getPetById', method: 'GET', url: url(`/pets/${int64Text(petId, 'petId')}`) })
      return { ...meta, data: body as Pet, deprecation: deprecationOf(meta.headers, requested) }
    }
  }
}
