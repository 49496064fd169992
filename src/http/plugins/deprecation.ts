/**
 * Deprecation (RFC 9745) and Sunset (RFC 8594) headers for a deprecated operation, on every response it gives
 * (errors included), and 410 Gone once the sunset has passed.
 */
import type { onSendHookHandler, preHandlerAsyncHookHandler } from 'fastify'
import { isSunset } from '../../domain/pets.js'
import { AppError } from '../../errors.js'

export interface DeprecationPolicy {
  deprecatedAt: Date
  sunset: Date
  /** Human documentation of this deprecation and of the sunset policy. */
  deprecationLink: string
  sunsetLink: string
}

function deprecationHeaders (policy: DeprecationPolicy): Record<string, string> {
  return {
    Deprecation: `@${Math.floor(policy.deprecatedAt.getTime() / 1000)}`,
    // toUTCString() writes the IMF-fixdate form, e.g. "Fri, 31 Dec 2027 23:59:59 GMT".
    Sunset: policy.sunset.toUTCString(),
    Link: `<${policy.deprecationLink}>; rel="deprecation"; type="text/html", <${policy.sunsetLink}>; rel="sunset"; type="text/html"`
  }
}

/** Route hooks: onSend adds the headers to every response; preHandler answers 410 after the sunset. */
export function deprecationHooks (policy: DeprecationPolicy, clock: () => number): { onSend: onSendHookHandler, preHandler: preHandlerAsyncHookHandler } {
  const headers = deprecationHeaders(policy)
  return {
    onSend: async (_request, reply, payload) => {
      reply.headers(headers)
      return payload
    },
    preHandler: async () => {
      if (isSunset(policy.sunset, clock())) {
        throw new AppError('gone', `This operation was sunset on ${headers.Sunset}; see ${policy.deprecationLink}.`)
      }
    }
  }
}
