/**
 * Bearer authentication (RFC 6750). The scheme name is case-insensitive. Failures answer
 * 401 with a WWW-Authenticate challenge; the token itself is never logged or echoed.
 */
import type { FastifyRequest } from 'fastify'
import type { Authenticator } from '../../domain/keys.js'
import type { ApiKeyRecord } from '../../domain/model.js'
import { AppError } from '../../errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated key; set by the auth hook on every /v1 request that reaches a handler. */
    apiKey: ApiKeyRecord | null
  }
}

const REALM = 'Bearer realm="petstore"'
const BEARER = /^Bearer[ ]+([A-Za-z0-9._~+/=-]+)[ ]*$/i

function invalidToken (description: string): AppError {
  return new AppError('unauthorized', description,
    { 'WWW-Authenticate': `${REALM}, error="invalid_token", error_description="${description}"` })
}

/** The active key of a request and its token; throws an unauthorized AppError with the challenge otherwise. */
export async function authenticate (authenticator: Authenticator, request: FastifyRequest): Promise<{ key: ApiKeyRecord, token: string }> {
  const header = request.headers.authorization
  if (header === undefined || header.trim() === '') {
    throw new AppError('unauthorized', 'An API key is required: send Authorization: Bearer <key>.', { 'WWW-Authenticate': REALM })
  }
  if (!/^bearer(\s|$)/i.test(header)) {
    throw new AppError('unauthorized', 'Only the Bearer scheme is accepted: send Authorization: Bearer <key>.', { 'WWW-Authenticate': REALM })
  }
  const match = BEARER.exec(header)
  if (match === null) throw invalidToken('The bearer token is malformed.')
  const token = match[1] as string
  const key = await authenticator.authenticate(token)
  if (key === null) throw invalidToken('The API key is unknown or revoked.')
  return { key, token }
}
