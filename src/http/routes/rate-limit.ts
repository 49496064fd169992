/**
 * GET /v1/rate_limit: the caller's own key, plan, scopes and quota, as the gate saw them for this request. The
 * gate counts it in a budget of its own (the key's quota is only peeked), so asking is free of the quota it reports.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { isBanned } from '../../access/bans.js'
import { KEY_SCOPES, type ApiKeyRecord } from '../../model.js'
import { scopeCovers } from '../../domain/rules.js'
import type { QuotaView } from '../../access/admission.js'
import type { WindowState } from '../../ratelimit/types.js'
import { SCOPE_NAMES } from '../plugins/access.js'
import { COMMON_ERRORS, ErrorResponse, RESPONSE_HEADERS } from '../schemas/common.js'

const Window = (name: string) => Type.Object({
  limit: Type.Integer({ description: `Requests allowed per ${name}` }),
  remaining: Type.Integer({ description: 'Requests left in the current window (0 during a ban, as in X-RateLimit-Remaining)' }),
  reset: Type.Integer({ description: 'Unix time (seconds) at which the window ends (during a ban: when the ban ends)' }),
  used: Type.Integer({ description: 'Requests counted in the current window (also during a ban)' })
}, { additionalProperties: false })

const RateLimitStatus = Type.Object({
  plan: Type.String({ description: 'The key\'s plan: free, pro, business or enterprise' }),
  scopes: Type.Array(Type.String(), { description: 'What the key may call: inventory:read; inventory:sell too for storefront and write keys; inventory:write too for write keys' }),
  minute: Window('minute'),
  day: Window('day'),
  bannedUntil: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When the ban in force ends (a key that kept sending after 429 is banned for a while); null when not banned'
  }),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the key stops working; null: never' })
}, { additionalProperties: false, description: 'The calling key\'s quota and standing; asking spends none of the quota', headers: RESPONSE_HEADERS })

/**
 * The status of a key as the gate saw it for this request (the quota peeked, never spent): each window's limit,
 * remaining and reset as the rate-limit fields show them (during a ban: nothing remaining until the ban ends), and
 * `used` as the window counted.
 */
export function rateLimitStatus (key: ApiKeyRecord, quota: QuotaView, usage: readonly [WindowState, WindowState] = quota.windows) {
  const window = (shown: WindowState, counted: WindowState) =>
    ({ limit: shown.limit, remaining: shown.remaining, reset: shown.resetAt, used: Math.max(0, counted.limit - counted.remaining) })
  return {
    plan: key.plan,
    scopes: KEY_SCOPES.filter((scope) => scopeCovers(key.scope, scope)).map((scope) => SCOPE_NAMES[scope]),
    minute: window(quota.windows[0], usage[0]),
    day: window(quota.windows[1], usage[1]),
    bannedUntil: isBanned(key.ban, quota.now) ? key.ban.until.toISOString() : null,
    expiresAt: key.expiresAt?.toISOString() ?? null
  }
}

export const rateLimitRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/rate_limit', {
    config: { scope: 'read', charge: 'status' },
    schema: {
      operationId: 'getRateLimit',
      summary: 'The calling key\'s quota, plan, scopes, ban and expiry',
      description: 'Both windows as they stand (limit, remaining, reset), without spending any of them: this call is not ' +
        'counted against the key\'s quota, and a banned key may make it. It is counted instead in a small budget of its own ' +
        'per key (60 calls per minute and 10,000 per day by default, `RATE_LIMIT_STATUS`); beyond it, 429 with Retry-After. ' +
        'The rate-limit fields of a 200 describe the key\'s quota, as on every answer; those of the 429 the status budget.',
      tags: ['keys'],
      response: {
        200: RateLimitStatus,
        ...COMMON_ERRORS,
        429: ErrorResponse(['rate_limited'], 'The status budget of this key\'s quota is spent (`RATE_LIMIT_STATUS`); the X-RateLimit-* fields ' +
          'describe that budget. The key\'s own quota is untouched.', { 'Retry-After': Type.Integer({ description: 'Seconds until the status budget admits again' }) })
      }
    }
  }, async (request) => {
    // The gate admitted the request: the key and the quota it peeked are on the request.
    const admission = request.admission
    if (request.apiKey === null || admission === null) throw new Error('the gate admitted a status call without a key')
    return rateLimitStatus(request.apiKey, admission.quota, admission.outcome === 'admitted' ? admission.usage : undefined)
  })
}
