/**
 * The benchmark's open-loop generator (bench/open-loop.ts) against small servers of known behaviour: it reads every
 * framing a server may use (Content-Length, chunked, a head split over reads, no body, the end of the connection),
 * sends exactly the requests it was asked for, keeps to its schedule while answers are slow, and fails what times out.
 */
import assert from 'node:assert/strict'
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createNetServer, type Server, type Socket } from 'node:net'
import { after, describe, it } from 'node:test'
import { encodeRequests, openLoop, type OpenLoopSpec } from '../../bench/open-loop.js'

const servers: Server[] = []
after(async () => {
  for (const server of servers) {
    if ('closeAllConnections' in server) (server as unknown as { closeAllConnections: () => void }).closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})

async function listen (server: Server): Promise<string> {
  servers.push(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return `http://127.0.0.1:${address.port}`
}

/** A node:http server; `seen` gets each request's method, url, headers and body. */
async function httpServer (
  answer: (req: IncomingMessage, res: ServerResponse, body: string) => void,
  seen: Array<{ method: string, url: string, headers: IncomingMessage['headers'], body: string }> = []
): Promise<string> {
  return await listen(createHttpServer((req, res) => {
    let body = ''
    req.setEncoding('utf8').on('data', (chunk: string) => { body += chunk })
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body })
      answer(req, res, body)
    })
  }) as unknown as Server)
}

const spec = (origins: string[], extra: Partial<OpenLoopSpec> = {}): OpenLoopSpec =>
  ({ origins, rate: 200, warmup: 0.2, duration: 1, maxConnections: 8, timeoutMs: 2000, ...extra })

describe('the open-loop generator', () => {
  it('reads answers framed by Content-Length and by chunks, and counts their statuses', async () => {
    let n = 0
    const origin = await httpServer((_req, res) => {
      n++
      if (n % 3 === 0) {
        // No Content-Length: node:http sends it chunked, here in three chunks of different sizes.
        res.writeHead(200, { 'content-type': 'application/json' })
        res.write('{"inventory":[')
        // Bytes that look like framing inside a chunk: only the chunk sizes say where the body ends.
        res.write('x\r\n\r\n0\r\n\r\n'.repeat(500))
        res.end(']}')
      } else if (n % 3 === 1) {
        res.writeHead(200, { 'Content-Length': '17' }).end('{"inventory":[1]}')
      } else {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"code":"not_found","message":"no","status":404}')
      }
    })
    const r = await openLoop(spec([origin]), {})
    assert.equal(r.scheduled, 200)
    assert.equal(r.answered, 200)
    assert.equal(r.errors, 0)
    assert.equal(r.unfinished, 0)
    assert.equal((r.statusCodes['200'] ?? 0) + (r.statusCodes['404'] ?? 0), 200)
    assert.ok((r.statusCodes['404'] ?? 0) >= 60, JSON.stringify(r.statusCodes))
    assert.equal(r.non2xx, r.statusCodes['404'])
    assert.equal(n, 240, 'warm-up and window: 1.2 s at 200/s')
    assert.ok(r.connectionsOpened <= 8, `each answer read to its end and no further: ${r.connectionsOpened} connections`)
  })

  it('reads a head split over reads, answers without a body, a body ended by the connection, and Connection: close', async () => {
    let n = 0
    const origin = await listen(createNetServer((socket: Socket) => {
      let pending = ''
      let closing = false
      socket.setNoDelay(true)
      socket.on('data', (data) => {
        pending += data.toString('latin1')
        while (!closing && pending.includes('\r\n\r\n')) {
          pending = pending.slice(pending.indexOf('\r\n\r\n') + 4)
          n++
          if (n % 4 === 3) {
            // Framed by its length, but the last answer of this connection: what is sent on it after is never answered.
            socket.write('HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}')
            closing = true
            setTimeout(() => socket.end(), 30)
          } else if (n % 4 === 0) {
            // The head in three writes, a few milliseconds apart (chained: timers of different delays may fire out of order).
            socket.write('HTTP/1.1 200 OK\r\nConte')
            setTimeout(() => {
              socket.write('nt-Length: 2\r\n')
              setTimeout(() => socket.write('\r\n{}'), 2)
            }, 2)
          } else if (n % 4 === 1) {
            socket.write('HTTP/1.1 204 No Content\r\nX-Any: 1\r\n\r\n')
          } else {
            // Neither Content-Length nor chunked: the body ends with the connection.
            socket.end('HTTP/1.1 201 Created\r\nConnection: close\r\n\r\n{"made":true}')
          }
        }
      })
      socket.on('error', () => {})
    }))
    const r = await openLoop(spec([origin], { rate: 100 }), {})
    assert.equal(r.answered, 100)
    assert.equal(r.errors, 0, JSON.stringify(r))
    assert.equal(r.non2xx, 0)
    assert.deepEqual(Object.keys(r.statusCodes).sort(), ['200', '201', '202', '204'])
    assert.ok(r.connectionsOpened >= 50, `each 201 and 202 closed its connection: ${r.connectionsOpened} opened`)
  })

  it('sends the bytes given, PATCH bodies for pets in range, over every origin in turn', async () => {
    const seen: Array<{ method: string, url: string, headers: IncomingMessage['headers'], body: string }> = []
    const answer = (_req: IncomingMessage, res: ServerResponse): void => { res.writeHead(200, { 'content-length': '2' }).end('{}') }
    const origins = [await httpServer(answer, seen), await httpServer(answer, seen)]
    const r = await openLoop(spec(origins, { patchPets: 50 }), { authorization: 'Bearer k1' })
    assert.equal(r.answered, 200)
    assert.equal(seen.length, 240)
    for (const request of seen) {
      assert.equal(request.method, 'PATCH')
      const pet = Number(/^\/v1\/inventory\/(\d+)$/.exec(request.url)?.[1])
      assert.ok(pet >= 1 && pet <= 50, request.url)
      assert.equal(request.headers.authorization, 'Bearer k1')
      assert.equal(request.headers['content-type'], 'application/json')
      const quantity = (JSON.parse(request.body) as { quantity: number }).quantity
      assert.ok(Number.isInteger(quantity) && quantity >= 0 && quantity < 1000)
    }
    assert.equal(r.connectionsOpened > 0, true)
    const hosts = new Set(seen.map((s) => s.headers.host))
    assert.deepEqual([...hosts].sort(), origins.map((o) => new URL(o).host).sort())
  })

  it('keeps its schedule while answers are slow: they queue, and wait from their due time', async () => {
    // Each answer takes 100 ms; 4 connections serve 40 a second at most, the schedule asks 100.
    const origin = await httpServer((_req, res) => { setTimeout(() => res.writeHead(200, { 'content-length': '0' }).end(), 100) })
    const r = await openLoop(spec([origin], { rate: 100, warmup: 0, duration: 1, maxConnections: 4, timeoutMs: 5000 }), {})
    assert.equal(r.answered, 100)
    assert.ok(r.sentRate >= 99, `sent ${r.sentRate}/s`)
    // Waiting for answers, the last would go out about 1.5 s late; a busy machine delays a timer far less.
    assert.ok(r.lag.max < 500, `lag max ${r.lag.max} ms`)
    assert.ok(r.queuedForConnection > 50, `${r.queuedForConnection} queued`)
    assert.ok(r.maxInFlight > 50, `in flight ${r.maxInFlight}`)
    // The last request is due at 0.99 s and answered after about 100 / 4 x 100 ms = 2.5 s.
    assert.ok(r.latency.max > 1200, `max ${r.latency.max} ms`)
    // The 50th is due at 0.5 s and answered after about 50 / 4 x 100 ms: its wait in the queue counts.
    assert.ok(r.latency.p50 > 500, `p50 ${r.latency.p50} ms`)
    assert.ok(r.serviceTime.p50 <= r.latency.p50, 'from dispatch, the lag is left out')
    assert.equal(r.connectionsOpened, 4)
  })

  it('fails a request unanswered after the timeout, with its latency, and goes on', async () => {
    let n = 0
    const origin = await httpServer((_req, res) => {
      if (++n === 30) return // never answered
      res.writeHead(200, { 'content-length': '0' }).end()
    })
    // A timeout well above what a loaded machine delays an answer (CI once timed out a second request at 300 ms).
    const r = await openLoop(spec([origin], { rate: 100, warmup: 0, duration: 1, timeoutMs: 1500 }), {})
    assert.deepEqual({ answered: r.answered, errors: r.errors, timeouts: r.timeouts, ok: r.statusCodes['200'] },
      { answered: 100, errors: 1, timeouts: 1, ok: 99 })
    assert.ok(r.latency.max >= 1500, `max ${r.latency.max} ms`)
  })

  it('reuses an idle connection only while the server\'s Keep-Alive hint says it stays open', async () => {
    const opened = async (keepAliveTimeout: number): Promise<number> => {
      const server = createHttpServer((_req, res) => { res.writeHead(200, { 'content-length': '0' }).end() })
      server.keepAliveTimeout = keepAliveTimeout
      // A request every second: within a 5 s hint, past the half second a 1 s hint leaves by half a second (at 667 ms
      // apart, a loaded CI machine once sent two within 500 ms, catching up on its schedule).
      const r = await openLoop(spec([await listen(server as unknown as Server)], { rate: 1, warmup: 0, duration: 3 }), {})
      assert.equal(r.answered, 3)
      assert.equal(r.errors, 0)
      return r.connectionsOpened
    }
    assert.equal(await opened(5000), 1)
    assert.equal(await opened(1000), 3)
  })

  it('encodes one GET per origin and a fixed set of PATCHes', () => {
    const [get] = encodeRequests('http://127.0.0.1:8080', { authorization: 'Bearer x' })
    assert.equal(get?.toString('latin1'), 'GET /v1/inventory HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nauthorization: Bearer x\r\n\r\n')
    const patches = encodeRequests('http://127.0.0.1:8080', {}, 10)
    assert.equal(patches.length, 4096)
    const text = patches[5]?.toString('latin1') ?? ''
    assert.match(text, /^PATCH \/v1\/inventory\/\d+ HTTP\/1\.1\r\n/)
    assert.ok(text.endsWith('content-length: 14\r\n\r\n{"quantity":5}'), text)
  })
})
