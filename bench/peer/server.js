// The peer: GET /v1/inventory built the usual way, as a second reference beside the bare ceiling. Fastify 5,
// @fastify/bearer-auth (its `auth` function: the SHA-256 of the token looked up in a set of hashes),
// @fastify/rate-limit (one window, in memory, its default headers; a limit that never binds), and on every request
// a better-sqlite3 SELECT on a WAL file, serialized through a Fastify response schema. No logger: the peer gets
// the benefit of every doubt. Plain JavaScript, like the bare server; its dependencies are its own
// (bench/peer/package.json, installed by bench/run.ts on first use).
// Usage: node bench/peer/server.js DB_FILE ROWS_FILE KEY_SHA256
//   DB_FILE    the SQLite file to create (WAL mode); its stock table is filled from ROWS_FILE
//   ROWS_FILE  a JSON array of {petId, quantity, status}: the harness passes the service's own answer, so the
//              peer answers the same bytes
//   KEY_SHA256 the hex SHA-256 of the one bearer token accepted
// Prints "listening PORT" once bound to a free port.
import bearerAuth from '@fastify/bearer-auth'
import rateLimit from '@fastify/rate-limit'
import Database from 'better-sqlite3'
import Fastify from 'fastify'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'

const [file, rowsFile, keyHash] = process.argv.slice(2)
if (file === undefined || rowsFile === undefined || keyHash === undefined) {
  console.error('usage: node bench/peer/server.js DB_FILE ROWS_FILE KEY_SHA256')
  process.exit(2)
}

const db = new Database(file)
const [{ journal_mode: mode }] = db.pragma('journal_mode = WAL')
if (mode !== 'wal') {
  console.error(`peer: ${file} is not in WAL mode (${mode})`)
  process.exit(1)
}
db.exec('CREATE TABLE IF NOT EXISTS stock (pet_id INTEGER PRIMARY KEY, quantity INTEGER NOT NULL, status TEXT NOT NULL)')
const insert = db.prepare('INSERT OR REPLACE INTO stock (pet_id, quantity, status) VALUES (?, ?, ?)')
db.transaction((rows) => { for (const row of rows) insert.run(row.petId, row.quantity, row.status) })(JSON.parse(readFileSync(rowsFile, 'utf8')))
const list = db.prepare('SELECT pet_id AS petId, quantity, status FROM stock ORDER BY pet_id')

const sha256 = (text) => createHash('sha256').update(text).digest('hex')
const keyHashes = new Set([keyHash])

const app = Fastify({ logger: false })
await app.register(rateLimit, { max: 1_000_000_000, timeWindow: 60_000 })
await app.register(bearerAuth, { auth: (token) => keyHashes.has(sha256(token)) })
app.get('/v1/inventory', {
  schema: {
    response: {
      200: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            petId: { type: 'integer' },
            quantity: { type: 'integer' },
            status: { type: 'string', enum: ['available', 'pending', 'sold'] }
          },
          required: ['petId', 'quantity', 'status']
        }
      }
    }
  }
}, async () => list.all())

await app.listen({ port: 0, host: '127.0.0.1' })
console.log(`listening ${app.server.address().port}`)

process.on('SIGTERM', () => {
  app.close().then(() => { db.close(); process.exit(0) })
})
