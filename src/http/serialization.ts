/**
 * Response serialization with fast-json-stringify, as Fastify's default compiler does it (no shared schemas: the
 * app adds none), but each response schema compiled once per process (./compile-once.ts). A serializer is a pure
 * function of the value it writes.
 */
import fastJson from 'fast-json-stringify'
import type { FastifySerializerCompiler } from 'fastify/types/schema.js'
import { compileOnce } from './compile-once.js'

const serializer = compileOnce((schema) => fastJson(schema as Parameters<typeof fastJson>[0]))

export const serializerCompiler: FastifySerializerCompiler<unknown> = ({ schema }) => serializer(schema as object)
