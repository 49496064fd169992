// The framework floor: Fastify 5 answering GET /v1/inventory with fixed bytes and the same response header fields
// the service sends (request id, nosniff, no-store, the five rate-limit fields, ETag), with no authentication,
// no limiter and no store. What the service cannot go below while it uses Fastify and sends those fields; run
// beside the bare ceiling to see how much of the ceiling the framework and the fields alone leave.
// `gate` adds the least any key gate and limiter can do in Fastify: a synchronous onRequest hook that reads the
// bearer token, finds it in a Map (no hashing), counts the request in two fixed windows of a Map entry and
// renders the five rate-limit fields from those counts (no store, no strikes, no bans, no logging).
// Usage: node bench/peer/floor.js BODY_FILE [bare|gate]; `bare` sends only Content-Type (Fastify alone).
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
if (mode === 'gate') {
  const keys = new Map([[process.env.BENCH_KEY ?? '', { id: 'k1', perMinute: 1_000_000_000, perDay: 1_000_000_000 }]])
  const counts = new Map()
  app.addHook('onRequest', (request, reply, done) => {
    const header = request.headers.authorization
    const key = header !== undefined && header.startsWith('Bearer ') ? keys.get(header.slice(7)) : undefined
    if (key === undefined) {
      reply.code(401).send({ code: 'unauthorized', message: 'An API key is required.', status: 401 })
      return
    }
    const now = Math.floor(Date.now() / 1000)
    const minute = Math.floor(now / 60)
    const day = Math.floor(now / 86_400)
    let c = counts.get(key.id)
    if (c === undefined) counts.set(key.id, c = { minute, m: 0, day, d: 0 })
    if (c.minute !== minute) { c.minute = minute; c.m = 0 }
    if (c.day !== day) { c.day = day; c.d = 0 }
    c.m++
    c.d++
    const mr = key.perMinute - c.m
    const dr = key.perDay - c.d
    reply.header('x-request-id', randomUUID())
      .header('x-content-type-options', 'nosniff')
      .header('cache-control', 'no-store')
      .header('x-ratelimit-limit', key.perMinute)
      .header('x-ratelimit-remaining', mr)
      .header('x-ratelimit-reset', (minute + 1) * 60)
      .header('ratelimit-policy', `"minute";q=${key.perMinute};w=60, "day";q=${key.perDay};w=86400`)
      .header('ratelimit', `"minute";r=${mr};t=${(minute + 1) * 60 - now}, "day";r=${dr};t=${(day + 1) * 86_400 - now}`)
    done()
  })
}
app.get('/v1/inventory', (_request, reply) => {
  reply.type('application/json; charset=utf-8')
  if (mode === 'gate') {
    reply.header('etag', '"inv-6"')
  } else if (mode !== 'bare') {
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
