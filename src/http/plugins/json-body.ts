/**
 * The app's only body reader: JSON (text/plain would otherwise reach validation as a string), read exactly
 * (src/http/json-body.ts).
 */
import type { FastifyInstance } from 'fastify'
import { AppError } from '../../errors.js'
import { JsonBodyError, parseJsonBody } from '../json-body.js'

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Replaces Fastify's body parsers with the strict JSON reader. */
export function jsonBody (app: FastifyInstance): void {
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // JSON is UTF-8 (RFC 8259): another charset is not read as if it were, and bytes that are not UTF-8 are
    // refused rather than replaced with U+FFFD.
    const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(request.headers['content-type'] ?? '')?.[1]
    if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
      return done(new AppError('unsupported_media_type', 'The body must be application/json in UTF-8.'), undefined)
    }
    let text: string
    try {
      text = UTF8.decode(body as Buffer)
    } catch {
      return done(new AppError('invalid_request', 'The request body is not valid UTF-8.'), undefined)
    }
    if (text === '') return done(new AppError('invalid_request', 'The request body is empty; send a JSON object.'), undefined)
    try {
      done(null, parseJsonBody(text))
    } catch (error) {
      done(error instanceof JsonBodyError ? new AppError('invalid_request', error.message) : error as Error, undefined)
    }
  })
}
