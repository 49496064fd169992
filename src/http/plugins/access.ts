/**
 * The HTTP side of admission (src/access/admission.ts): reads a request's credentials and client address, asks
 * the gatekeeper, and maps its answer to the rate-limit fields, a 304, or an error. Decisions rest on what the
 * framework resolved: the gate is registered inside the scope it guards, so it runs for exactly the routes,
 * the 404 and the 405s of that scope, however the request target was spelled.
 */
import ipaddr from 'ipaddr.js'
import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { KEY_OPTIONAL, KEY_REQUIRED, keyIdOf, type Admission, type AdmissionRequest, type Gatekeeper, type OperationNeeds, type QuotaView, type Standing } from '../../access/admission.js'
import type { CredentialProblem, Credentials } from '../../access/authenticator.js'
import { KEY_PREFIXES, type Environment } from '../../model.js'
import type { ApiKeyRecord, KeyScope } from '../../model.js'
import { AppError } from '../../errors.js'
import { bindKeyId } from '../../logger.js'
import { LimiterUnavailableError, type WindowState } from '../../ratelimit/types.js'
import { insufficientScope } from '../schemas/common.js'
import { holdsOnlyTag, noneMatch } from '../preconditions.js'
import { handleError, notFound } from './errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The admitted key: set by the gate on every request that reaches a guarded handler (null: none). */
    apiKey: ApiKeyRecord | null
    /** The gatekeeper's answer for this request; null while it has not been asked. */
    admission: Admission | null
  }
  interface FastifyContextConfig {
    /**
     * For a conditional GET: the resource's current ETag (null when there is none, e.g. an unknown or malformed
     * id: the handler answers). A request naming it in If-None-Match is answered 304 by the gate.
     */
    currentETag?: (request: FastifyRequest) => Promise<string | null>
    /**
     * The scope a key needs to call the route: every route behind the gate declares one (the app does not start
     * otherwise). `read`: any key; `storefront`: keys of scope storefront or write (holds and orders); `write`: keys
     * of scope write.
     */
    scope?: KeyScope
    /** `status`: the route reports the key's quota without spending it (GET /v1/rate_limit). */
    charge?: 'status'
    /** What the gate asks of the route's callers; derived from the above when the route is added. */
    needs?: OperationNeeds
  }
}

/** The scopes as the API names them (OpenAPI security requirements, WWW-Authenticate). */
export const SCOPE_NAMES: Readonly<Record<KeyScope, string>> = { read: 'inventory:read', storefront: 'inventory:sell', write: 'inventory:write' }

const REALM = 'Bearer realm="petstore"'
// RFC 6750 section 2.1: the scheme is case-insensitive; the token is b64token.
const BEARER = /^Bearer[ ]+([A-Za-z0-9._~+/=-]+)[ ]*$/i

/** The credentials an Authorization header presents. */
function credentialsOf (header: string | undefined): Credentials {
  if (header === undefined) return { kind: 'none' }
  const match = BEARER.exec(header)
  if (match !== null) return { kind: 'bearer', token: match[1] as string }
  if (header.trim() === '') return { kind: 'none' }
  return /^bearer(\s|$)/i.test(header) ? { kind: 'malformed' } : { kind: 'unsupported' }
}

function invalidToken (description: string): AppError {
  return new AppError('unauthorized', description,
    { 'WWW-Authenticate': `${REALM}, error="invalid_token", error_description="${description}"` })
}

function unauthorized (problem: CredentialProblem, environment: Environment): AppError {
  switch (problem) {
    case 'missing':
      return new AppError('unauthorized', 'An API key is required: send Authorization: Bearer <key>.', { 'WWW-Authenticate': REALM })
    case 'unsupported':
      return new AppError('unauthorized', 'Only the Bearer scheme is accepted: send Authorization: Bearer <key>.', { 'WWW-Authenticate': REALM })
    case 'malformed':
      return invalidToken('The bearer token is malformed.')
    case 'wrong_environment':
      return invalidToken(`The API key belongs to another environment: this server accepts ${KEY_PREFIXES[environment]} keys only.`)
    case 'invalid':
      return invalidToken('The API key is unknown or revoked.')
    case 'expired':
      return invalidToken('The API key has expired.')
  }
}

/**
 * The X-RateLimit-* fields (one window) and the IETF RateLimit-Policy and RateLimit fields (both windows); named in
 * lower case, as on every request's path (src/http/plugins/bounds.ts says why).
 */
function setQuotaHeaders (reply: FastifyReply, quota: QuotaView): void {
  const nowSeconds = Math.floor(quota.now / 1000)
  const [minute, day] = quota.windows
  reply.header('x-ratelimit-limit', quota.shown.limit)
  reply.header('x-ratelimit-remaining', quota.shown.remaining)
  reply.header('x-ratelimit-reset', quota.shown.resetAt)
  reply.header('ratelimit-policy', policyField(minute, day))
  reply.header('ratelimit', `"minute";r=${minute.remaining};t=${minute.resetAt - nowSeconds}, "day";r=${day.remaining};t=${day.resetAt - nowSeconds}`)
}

/** The last RateLimit-Policy value built, and the limits it was built from. */
let lastPolicy = { minute: 0, minuteSeconds: 0, day: 0, daySeconds: 0, field: '' }

/**
 * RateLimit-Policy for these windows. The value changes only with a key's limits, so the last one is kept and
 * answered again while the limits stay the same: a string built for every request outlived the young generation
 * under load and was garbage for the major collections.
 */
function policyField (minute: WindowState, day: WindowState): string {
  const last = lastPolicy
  if (last.minute === minute.limit && last.minuteSeconds === minute.windowSeconds && last.day === day.limit && last.daySeconds === day.windowSeconds) {
    return last.field
  }
  const field = `"minute";q=${minute.limit};w=${minute.windowSeconds}, "day";q=${day.limit};w=${day.windowSeconds}`
  lastPolicy = { minute: minute.limit, minuteSeconds: minute.windowSeconds, day: day.limit, daySeconds: day.windowSeconds, field }
  return field
}

/** The error a refusing admission answers with; null when the admission lets the request through. */
function refusal (admission: Admission, environment: Environment): Error | null {
  switch (admission.outcome) {
    case 'admitted':
    case 'not_modified':
      return null
    case 'unauthenticated':
      return unauthorized(admission.problem, environment)
    case 'insufficient_scope': {
      const scope = SCOPE_NAMES[admission.needed]
      return new AppError('insufficient_scope', `This operation needs an API key with the ${scope} scope; this key has ${SCOPE_NAMES[admission.key.scope]}.`,
        { 'WWW-Authenticate': `${REALM}, error="insufficient_scope", scope="${scope}"` })
    }
    case 'limited': {
      const { window, retryAfterSeconds: wait } = admission
      if (admission.budget === 'status') {
        return new AppError('rate_limited', `GET /v1/rate_limit may be called ${window.limit} times per ${window.name} per key; retry in ${wait} s. ` +
          'It spends none of the key\'s own quota.', { 'Retry-After': String(wait) })
      }
      return new AppError('rate_limited', `Rate limit of ${window.limit} requests per ${window.name} exceeded; retry in ${wait} s.`,
        { 'Retry-After': String(wait) })
    }
    case 'banned':
      return new AppError('key_banned',
        `This API key is banned until ${admission.until.toISOString()} for sending requests before the Retry-After of a 429 had passed; ` +
        `retry in ${admission.retryAfterSeconds} s.`, { 'Retry-After': String(admission.retryAfterSeconds) })
    case 'unavailable':
      return admission.error instanceof Error ? admission.error : new Error(String(admission.error))
  }
}

export interface AccessOptions {
  gatekeeper: Gatekeeper
  /**
   * How the gate asks the gatekeeper about a request: the gatekeeper's own admit when omitted. A wrapper may observe
   * the admission (src/tracing/gate.ts makes it a span); it must answer as the gatekeeper does.
   */
  admit?: (asked: AdmissionRequest, request: FastifyRequest) => Admission | Promise<Admission>
  /** For the message that names the accepted key prefix. */
  environment: Environment
}

/**
 * The client's address: the one proxy-addr resolved when it is an IP address. A trusted proxy's forwarded header
 * may hold any text (proxy-addr does not check it); then the connection's peer, the proxy itself, is the client.
 */
function clientAddress (request: FastifyRequest): string {
  const peer = request.socket?.remoteAddress
  // The connection's own address (no proxy trusted, or none in front) is an address by construction.
  if (request.ip === peer) return peer
  return ipaddr.isValid(request.ip) ? request.ip : (peer ?? request.ip)
}

/**
 * Asks the gatekeeper about a request, records the answer on the request and sets the rate-limit fields;
 * synchronously when the gatekeeper answers without I/O.
 */
function ask (options: AccessOptions, request: FastifyRequest, reply: FastifyReply, needs: OperationNeeds,
  holdsCurrent?: () => Promise<boolean>): Admission | Promise<Admission> {
  const asked: AdmissionRequest = {
    credentials: credentialsOf(request.headers.authorization),
    client: clientAddress(request),
    needs,
    ...(holdsCurrent === undefined ? {} : { holdsCurrent })
  }
  const admission = options.admit === undefined ? options.gatekeeper.admit(asked) : options.admit(asked, request)
  return admission instanceof Promise ? admission.then((answer) => noted(request, reply, answer)) : noted(request, reply, admission)
}

function noted (request: FastifyRequest, reply: FastifyReply, admission: Admission): Admission {
  request.admission = admission
  setQuotaHeaders(reply, admission.quota)
  // From here on every line of the request names the key it named, whatever the answer (never the key itself).
  const keyId = keyIdOf(admission)
  if (keyId !== null) bindKeyId(request.log, keyId)
  if (admission.outcome === 'banned' && admission.imposed !== undefined) {
    const { ban, strikes } = admission.imposed
    request.log.warn({ bannedUntil: ban.until.toISOString(), banSeconds: ban.seconds, strikes }, 'API key banned for sending requests before Retry-After')
  }
  if (admission.outcome === 'limited' && admission.banNotRecorded !== undefined) {
    request.log.error({ err: admission.banNotRecorded.error }, 'could not record a ban; answering 429 without it')
  }
  return admission
}

/** Lets an admitted request through (its key on the request), or returns the error to answer with. */
function pass (options: AccessOptions, request: FastifyRequest, admission: Admission): Error | null {
  const error = refusal(admission, options.environment)
  if (error === null) request.apiKey = (admission as Admission & { outcome: 'admitted' | 'not_modified' }).key
  return error
}

/** A conditional GET/HEAD on a route that knows its current ETag. */
function conditionalRead (request: FastifyRequest, config: FastifyContextConfig): { header: string, current: () => Promise<string | null> } | null {
  const currentETag = config.currentETag
  const header = request.headers['if-none-match']
  if (currentETag === undefined || header === undefined || (request.method !== 'GET' && request.method !== 'HEAD')) return null
  let etag: Promise<string | null> | undefined
  return { header, current: () => (etag ??= currentETag(request)) }
}

/**
 * A conditional read: free (304, nothing counted) when the client holds the current tag alone, else counted
 * like any request, and 304 when If-None-Match matches (`*` matches any current representation).
 */
async function guardConditional (options: AccessOptions, request: FastifyRequest, reply: FastifyReply, needs: OperationNeeds,
  conditional: { header: string, current: () => Promise<string | null> }): Promise<void> {
  const holdsCurrent = async (): Promise<boolean> => {
    const etag = await conditional.current()
    return etag !== null && holdsOnlyTag(conditional.header, etag)
  }
  const admission = await ask(options, request, reply, needs, holdsCurrent)
  const error = pass(options, request, admission)
  if (error !== null) throw error
  const etag = await conditional.current()
  if (etag !== null && (admission.outcome === 'not_modified' || noneMatch(conditional.header, etag))) {
    await reply.code(304).header('ETag', etag).send()
  }
}

/** Ends a gate hook with a failure. Fails closed: a failure that is not an Error must not read as "go on". */
function failClosed (done: HookHandlerDoneFunction, error: unknown): void {
  done(error instanceof Error ? error : new Error(`admission failed: ${String(error)}`))
}

/**
 * Declares the request fields the gate sets (apiKey, admission) on the root instance: every request has them, those
 * outside a guarded scope too (chargeErrorPath reads whether a request was already admitted, wherever it failed).
 */
export function decorateAdmission (app: FastifyInstance): void {
  app.decorateRequest('apiKey', null)
  app.decorateRequest('admission', null)
}

/**
 * Guards the scope it is registered in: every route of the scope, its 404, its 405s and the errors raised before
 * the gate ran. A request reaches a handler of the scope only when admitted.
 */
export function registerGate (scope: FastifyInstance, options: AccessOptions): void {
  // Each route's needs, fixed once as it is added: the gate reads them from the route the framework matched.
  scope.addHook('onRoute', (route) => {
    const config = (route.config ?? {}) as NonNullable<typeof route.config>
    if (config.scope === undefined) {
      // The 405 claims of the scope are hidden and answer before any handler; every operation must say what it needs.
      if (route.schema?.hide === true) return
      throw new Error(`${String(route.method)} ${route.url} declares no scope (config.scope: 'read', 'storefront' or 'write')`)
    }
    const needs: OperationNeeds = Object.freeze({
      credential: 'required',
      scope: config.scope,
      ...(route.schema?.deprecated === true ? { deprecated: true } : {}),
      ...(config.charge === undefined ? {} : { charge: config.charge })
    })
    route.config = { ...config, needs }
    if (route.schema !== undefined) {
      route.schema.security = [{ bearerAuth: [SCOPE_NAMES[config.scope]] }]
      if (config.scope !== 'read' && route.schema.response !== undefined) {
        route.schema.response = { ...(route.schema.response as object), 403: insufficientScope(SCOPE_NAMES[config.scope]) }
      }
    }
  })
  // A callback hook, not an async one: a request the gatekeeper admits without I/O (a warm key, the in-process
  // limiter) goes on to its handler without a promise in between.
  scope.addHook('onRequest', (request, reply, done) => {
    // Authenticated data is per key and changes: no cache may keep it (clients revalidate with If-None-Match).
    reply.header('cache-control', 'no-store')
    // The matched route's config (routeOptions builds a new object on each read: once per request). What the route
    // declared it needs; the 404 and 405s of the scope declare nothing: any valid key.
    const config = request.routeOptions.config
    const needs = config.needs ?? KEY_REQUIRED
    const conditional = conditionalRead(request, config)
    if (conditional !== null) {
      guardConditional(options, request, reply, needs, conditional).then(() => { if (!reply.sent) done() }, (error: unknown) => { failClosed(done, error) })
      return
    }
    let admission
    try {
      admission = ask(options, request, reply, needs)
    } catch (error) {
      failClosed(done, error)
      return
    }
    if (admission instanceof Promise) {
      admission.then((answer) => { done(pass(options, request, answer) ?? undefined) }, (error: unknown) => { failClosed(done, error) })
    } else {
      done(pass(options, request, admission) ?? undefined)
    }
  })
  scope.setNotFoundHandler(notFound)
  scope.setErrorHandler<Error>(async (error, request, reply) => handleError(await chargeErrorPath(options, request, reply, error), request, reply))
}

/**
 * For an answer that lasts (a change stream): asks whether the key an admitted request came with would still be
 * admitted to its operation (Gatekeeper.standing), each time the returned function is called.
 */
export function keyStanding (options: AccessOptions, request: FastifyRequest): () => Standing | Promise<Standing> {
  const credentials = credentialsOf(request.headers.authorization)
  const needs = request.routeOptions.config.needs ?? KEY_REQUIRED
  return () => options.gatekeeper.standing(credentials, needs)
}

/**
 * Charges the caller of an admitted request for the `extra` requests its operation is worth beyond the one the gate
 * counted (a batch of N changes costs N), all at once or none: when the key lacks the room, a 429 that names what is
 * left, with the rate-limit fields showing it. `what` names the operation in messages ("This batch of 5 changes").
 */
export async function chargeMore (options: AccessOptions, request: FastifyRequest, reply: FastifyReply, extra: number, what: string): Promise<void> {
  const key = request.apiKey
  if (key === null || extra <= 0) return
  const admission = await options.gatekeeper.chargeMore(key, extra, what)
  setQuotaHeaders(reply, admission.quota)
  if (admission.outcome !== 'limited') return
  const { window, retryAfterSeconds: wait } = admission
  throw new AppError('rate_limited', `${what} counts as ${extra + 1} requests, and this key has ${window.remaining + 1} left this ${window.name} ` +
    `(this request included); nothing was changed; retry in ${wait} s.`, { 'Retry-After': String(wait) })
}

/**
 * For an error answered without the gate having asked (a malformed URL, an unknown path outside the guarded
 * scope, a request refused by a check that runs first): the caller is charged like any request, a valid key
 * or else the client address, and the error keeps its answer, unless the caller is over its limit or banned,
 * which it then hears instead. Returns the error to answer with.
 */
export async function chargeErrorPath (options: AccessOptions, request: FastifyRequest, reply: FastifyReply, error: Error): Promise<Error> {
  // Undefined rather than null on the bare request Fastify makes for a URL it could not route.
  if ((request.admission ?? null) !== null || error instanceof LimiterUnavailableError) return error
  try {
    const admission = await ask(options, request, reply, KEY_OPTIONAL)
    if (admission.outcome === 'limited' || admission.outcome === 'banned') return refusal(admission, options.environment) as Error
  } catch (askError) {
    request.log.error({ err: askError }, 'could not count an error answer against its caller')
  }
  return error
}
