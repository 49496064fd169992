// The framework floor: Fastify 5 answering GET /v1/inventory with fixed bytes and the same response header fields
// the service sends (request id, nosniff, no-store, the five rate-limit fields, ETag), with no authentication,
// no limiter and no store. What the service cannot go below while it uses Fastify and sends those fields; run
// beside the bare ceiling to see how much of the ceiling the framework and the fields alone leave.
// Usage: node bench/peer/floor.js BODY_FILE [bare]; `bare` sends only Content-Type (Fastify alone).
import Fastify from 'fastify'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'

const [file, mode] = process.argv.slice(2)
if (file === undefined) {
  console.error('usage: node bench/peer/floor.js BODY_FILE [bare]')
  process.exit(2)
}
const body = readFileSync(file)
const app = Fastify({ logger: false })
app.get('/v1/inventory', (_request, reply) => {
  reply.type('application/json; charset=utf-8')
  if (mode !== 'bare') {
    reply.header('x-request-id', randomUUID())
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'no-store')
      .header('x-ratelimit-limit', 1000000000)
      .header('x-ratelimit-remaining', 999999999)
      .header('x-ratelimit-reset', 1795478400)
      .header('ratelimit-policy', '"minute";q=1000000000;w=60, "day";q=1000000000;w=86400')
      .header('ratelimit', '"minute";r=999999999;t=49, "day";r=999999999;t=58069')
      .header('etag', '"inv-6"')
  }
  reply.send(body)
})
await app.listen({ port: 0, host: '127.0.0.1' })
console.log(`listening ${app.server.address().port}`)
process.on('SIGTERM', () => { app.close().then(() => process.exit(0)) })
