/**
 * Response serialization with fast-json-stringify, as Fastify's default compiler does it (no shared schemas: the
 * app adds none), but each response schema compiled once per process and kept by its JSON text: an app built again (a
 * worker's, a test's) reuses the serializers instead of compiling every route's responses anew, although routes build
 * some schemas afresh. A serializer is a pure function of the value it writes.
 */
import fastJson from 'fast-json-stringify'
import type { FastifySerializerCompiler } from 'fastify/types/schema.js'

const compiled = new Map<string, (data: unknown) => string>()

export const serializerCompiler: FastifySerializerCompiler<unknown> = ({ schema }) => {
  const key = JSON.stringify(schema)
  let serialize = compiled.get(key)
  if (serialize === undefined) {
    serialize = fastJson(schema as Parameters<typeof fastJson>[0])
    compiled.set(key, serialize)
  }
  return serialize
}
