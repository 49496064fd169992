/**
 * The webhook sender against real local servers: what it sends, how each kind of answer or failure is reported,
 * that it stops in time and reads a bounded amount, and that, unless private networks are allowed, it connects to
 * no address that is not public, whatever the URL's spelling or the resolver's answer at the time of sending.
 */
import assert from 'node:assert/strict'
import type { LookupAddress } from 'node:dns'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createTlsServer } from 'node:https'
import { createServer as createTcpServer, getDefaultAutoSelectFamily, isIP, setDefaultAutoSelectFamily, type AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { getCACertificates, setDefaultCACertificates } from 'node:tls'
import { describe, test, type TestContext } from 'node:test'
import { checkDestination, type Resolve } from '../../src/webhooks/destination.js'
import { HttpSender, USER_AGENT, type Refusal, type SendResult, type WebhookRequest } from '../../src/webhooks/sender.js'
import { freePort } from '../helpers/net.js'

const STRICT = { allowPrivateNetworks: false }
const OPEN = { allowPrivateNetworks: true }
/**
 * The test's servers listen on loopback, whose answers are never reported: these options let a loopback server stand
 * for a public endpoint, whose answer is.
 */
const AS_PUBLIC = { policy: OPEN, keepsAnswersOf: () => true }
const SIGNATURE = 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='

interface Received {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: string
}

interface Endpoint {
  base: string
  received: Received[]
  /** Connections accepted so far. */
  connections: () => number
  /** Connections that have closed. */
  closed: () => number
}

async function listen (t: TestContext, server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return (server.address() as AddressInfo).port
}

/** An HTTP server on 127.0.0.1 that records each request, then lets `respond` answer it (or not). */
async function endpoint (t: TestContext, respond: (req: IncomingMessage, res: ServerResponse) => void): Promise<Endpoint> {
  const received: Received[] = []
  let connections = 0
  let closed = 0
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() })
      respond(req, res)
    })
  })
  server.on('connection', (socket) => {
    connections++
    socket.on('close', () => closed++)
  })
  const port = await listen(t, server)
  return { base: `http://127.0.0.1:${port}`, received, connections: () => connections, closed: () => closed }
}

/** A TCP server on 127.0.0.1 that only counts connections: whatever reaches it was connected to. */
async function connectionCounter (t: TestContext): Promise<{ port: number, count: () => number }> {
  let count = 0
  const server = createTcpServer((socket) => {
    count++
    socket.destroy()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  return { port: (server.address() as AddressInfo).port, count: () => count }
}

/** A resolver answering from a table, as dns.lookup with all: true would. */
function resolver (table: Record<string, string[]>): Resolve {
  return async (hostname) => {
    const addresses = table[hostname]
    if (addresses === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
    return addresses.map((address): LookupAddress => ({ address, family: isIP(address) }))
  }
}

function webhook (url: string): WebhookRequest {
  return {
    url,
    headers: { 'webhook-id': 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', 'webhook-timestamp': '1764115200', 'webhook-signature': SIGNATURE },
    body: '{"type":"stock.changed","data":{"petId":"7","quantity":3}}'
  }
}

/** Whatever is reported, give the connection attempts that should not exist a moment to show up. */
async function settle (): Promise<void> {
  await sleep(50)
}

describe('HttpSender', () => {
  test('when the endpoint answers 2xx, then the status, the duration and the start of the body are reported', async (t) => {
    const target = await endpoint(t, (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'))
    const result = await new HttpSender(AS_PUBLIC).send(webhook(`${target.base}/in`))
    assert.equal(result.status, 200)
    assert.equal(result.error, null)
    assert.equal(result.responseExcerpt, '{"ok":true}')
    assert.ok(Number.isInteger(result.durationMs) && result.durationMs >= 0 && result.durationMs < 5000, String(result.durationMs))
  })

  test('when the endpoint receives the request, then it is a POST with the given headers and body, the JSON type and our user agent', async (t) => {
    const target = await endpoint(t, (_req, res) => res.writeHead(204).end())
    const request = webhook(`${target.base}/hooks/in?tenant=7`)
    const result = await new HttpSender({ policy: OPEN }).send(request)
    assert.equal(result.status, 204)
    assert.equal(result.responseExcerpt, undefined)
    assert.equal(target.received.length, 1)
    const [received] = target.received as [Received]
    assert.equal(received.method, 'POST')
    assert.equal(received.url, '/hooks/in?tenant=7')
    assert.equal(received.body, request.body)
    assert.equal(received.headers['content-type'], 'application/json')
    assert.equal(received.headers['user-agent'], USER_AGENT)
    assert.equal(received.headers['content-length'], String(Buffer.byteLength(request.body)))
    assert.equal(received.headers['webhook-id'], request.headers['webhook-id'])
    assert.equal(received.headers['webhook-timestamp'], request.headers['webhook-timestamp'])
    assert.equal(received.headers['webhook-signature'], SIGNATURE)
  })

  test('when the endpoint answers 500 or 410, then the status is reported with the body and no error', async (t) => {
    const target = await endpoint(t, (req, res) => {
      if (req.url === '/gone') res.writeHead(410).end('subscription removed')
      else res.writeHead(500).end('boom')
    })
    const sender = new HttpSender(AS_PUBLIC)
    assert.deepEqual(omitDuration(await sender.send(webhook(`${target.base}/fail`))), { status: 500, error: null, responseExcerpt: 'boom' })
    assert.deepEqual(omitDuration(await sender.send(webhook(`${target.base}/gone`))), { status: 410, error: null, responseExcerpt: 'subscription removed' })
  })

  test('when the endpoint redirects, then the redirect is not followed and is reported as a failure with its status', async (t) => {
    const elsewhere = await endpoint(t, (_req, res) => res.writeHead(200).end())
    const target = await endpoint(t, (_req, res) => res.writeHead(302, { location: `${elsewhere.base}/moved` }).end())
    const result = await new HttpSender(AS_PUBLIC).send(webhook(`${target.base}/in`))
    assert.equal(result.status, 302)
    assert.equal(result.error, `redirect not followed (302 to ${elsewhere.base}/moved)`)
    await settle()
    assert.equal(elsewhere.connections(), 0)
  })

  test('when the endpoint never answers, then the attempt ends with a timeout at the deadline', async (t) => {
    const target = await endpoint(t, () => {})
    const started = performance.now()
    const result = await new HttpSender({ policy: OPEN, timeoutMs: 300 }).send(webhook(`${target.base}/in`))
    const elapsed = performance.now() - started
    assert.deepEqual(omitDuration(result), { status: null, error: 'timeout after 300 ms' })
    // At the deadline, not before; the upper bound allows a loaded machine (an endpoint that never answers would keep
    // an attempt without a deadline for ever).
    assert.ok(elapsed >= 290 && elapsed < 3000, `returned after ${elapsed} ms`)
    await settle()
    assert.equal(target.closed(), target.connections(), 'the connection was closed')
  })

  test('when the answer\'s body stalls after the status, then the status is reported at the deadline', async (t) => {
    const target = await endpoint(t, (_req, res) => {
      res.writeHead(200)
      res.write('partial')
    })
    const result = await new HttpSender({ ...AS_PUBLIC, timeoutMs: 300 }).send(webhook(`${target.base}/in`))
    assert.deepEqual(omitDuration(result), { status: 200, error: null, responseExcerpt: 'partial' })
    assert.ok(result.durationMs >= 290 && result.durationMs < 1000, String(result.durationMs))
  })

  test('when the endpoint streams a body without end, then at most the cap is read and the attempt returns promptly', async (t) => {
    let written = 0
    const target = await endpoint(t, (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      const chunk = Buffer.alloc(16 * 1024, 'é')
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk)) written += chunk.length
        if (!res.destroyed) res.once('drain', pump)
      }
      pump()
    })
    const result = await new HttpSender({ ...AS_PUBLIC, timeoutMs: 10_000 }).send(webhook(`${target.base}/in`))
    assert.equal(result.status, 200)
    assert.equal(result.error, null)
    assert.ok(result.durationMs < 2000, `returned after ${result.durationMs} ms`)
    // 1 KiB of two-byte characters: 512 of them, none cut in half.
    assert.equal(result.responseExcerpt, 'é'.repeat(512))
    await settle()
    assert.equal(target.closed(), 1, 'the connection was dropped')
    assert.ok(written > 64 * 1024, 'the server had more to send')
  })

  test('when the endpoint is at an address that is not public (private networks allowed), then its status and timing are reported, never its body or a redirect\'s target', async (t) => {
    const internal = await endpoint(t, (req, res) => {
      if (req.url === '/moved') res.writeHead(302, { location: 'http://admin.internal.example/console?token=abc' }).end('see there')
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"cluster":"internal-7","nodes":["10.0.0.8"]}')
    })
    const sender = new HttpSender({ policy: OPEN })
    assert.deepEqual(omitDuration(await sender.send(webhook(`${internal.base}/in`))), { status: 200, error: null })
    assert.deepEqual(omitDuration(await sender.send(webhook(`${internal.base}/moved`))), { status: 302, error: 'redirect not followed (302)' })
  })

  test('when the certificate names other hosts, then the error says it is not valid for the URL\'s host without listing the names it holds', async (t) => {
    // The certificate, trusted for this test, names 127.0.0.1 only: asked for as hooks.test, its names would be an
    // internal listener's (Node's message lists them).
    const trusted = getCACertificates('default')
    setDefaultCACertificates([...trusted, SELF_SIGNED_CERT])
    t.after(() => { setDefaultCACertificates(trusted) })
    const server = createTlsServer({ key: SELF_SIGNED_KEY, cert: SELF_SIGNED_CERT }, (_req, res) => res.writeHead(200).end())
    const port = await listen(t, server)
    const sender = new HttpSender({ policy: OPEN, resolve: resolver({ 'hooks.test': ['127.0.0.1'] }) })
    assert.equal((await sender.send(webhook(`https://127.0.0.1:${port}/in`))).status, 200, 'trusted for its own name')
    const result = await sender.send(webhook(`https://hooks.test:${port}/in`))
    assert.deepEqual(omitDuration(result), { status: null, error: 'TLS: the certificate is not valid for hooks.test' })
  })

  test('when nothing listens on the port, then the connection is reported refused', async () => {
    const port = await freePort()
    const result = await new HttpSender({ policy: OPEN }).send(webhook(`http://127.0.0.1:${port}/in`))
    assert.deepEqual(omitDuration(result), { status: null, error: 'connection refused' })
  })

  test('when the certificate is not trusted, then a TLS error is reported', async (t) => {
    const server = createTlsServer({ key: SELF_SIGNED_KEY, cert: SELF_SIGNED_CERT }, (_req, res) => res.writeHead(200).end())
    const port = await listen(t, server)
    const result = await new HttpSender({ policy: OPEN }).send(webhook(`https://127.0.0.1:${port}/in`))
    assert.deepEqual(omitDuration(result), { status: null, error: 'TLS: self-signed certificate' })
  })

  test('when the caller aborts, then the attempt ends at once as aborted', async (t) => {
    const target = await endpoint(t, () => {})
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 50)
    const result = await new HttpSender({ policy: OPEN }).send(webhook(`${target.base}/in`), controller.signal)
    assert.deepEqual(omitDuration(result), { status: null, error: 'aborted' })
    assert.ok(result.durationMs < 1000)
  })

  test('when private networks are allowed, then a name that resolves to 127.0.0.1 is delivered to', async (t) => {
    const target = await endpoint(t, (_req, res) => res.writeHead(200).end())
    const port = new URL(target.base).port
    const sender = new HttpSender({ policy: OPEN, resolve: resolver({ 'hooks.test': ['127.0.0.1'] }) })
    const result = await sender.send(webhook(`http://hooks.test:${port}/in`))
    assert.equal(result.status, 200)
    assert.equal(target.received[0]?.headers.host, `hooks.test:${port}`)
  })

  test('when the URL is http, then it is refused by default and delivered when private networks are allowed', async (t) => {
    const target = await endpoint(t, (_req, res) => res.writeHead(200).end())
    const refused = await new HttpSender({ policy: STRICT }).send(webhook(`${target.base}/in`))
    assert.match(refused.error ?? '', /^refused: The URL must use https/)
    assert.equal(refused.status, null)
    assert.equal(target.connections(), 0)
    const delivered = await new HttpSender({ policy: OPEN }).send(webhook(`${target.base}/in`))
    assert.equal(delivered.status, 200)
  })

  test('when the URL has a user name and password, then it is refused, also when private networks are allowed', async (t) => {
    const target = await endpoint(t, (_req, res) => res.writeHead(200).end())
    const result = await new HttpSender({ policy: OPEN }).send(webhook(target.base.replace('http://', 'http://user:secret@') + '/in'))
    assert.deepEqual(omitDuration(result), { status: null, error: 'refused: The URL must not contain a user name or password.' })
    assert.equal(target.connections(), 0)
  })

  test('when the host is a loopback, private or metadata address in any spelling, then nothing is connected to', async (t) => {
    const counter = await connectionCounter(t)
    const sender = new HttpSender({ policy: STRICT })
    // The URL's host as the parser normalized it: the subscriber's own text, nothing the resolver said.
    const cases: Array<[url: string, host: string]> = [
      [`https://127.0.0.1:${counter.port}/`, '127.0.0.1'],
      [`https://2130706433:${counter.port}/`, '127.0.0.1'],
      [`https://0x7f.1:${counter.port}/`, '127.0.0.1'],
      [`https://[::ffff:127.0.0.1]:${counter.port}/`, '::ffff:7f00:1'],
      [`https://[::1]:${counter.port}/`, '::1'],
      ['https://169.254.169.254/latest/meta-data/', '169.254.169.254'],
      ['https://10.0.0.1/', '10.0.0.1'],
      ['https://[fd00::1]/', 'fd00::1']
    ]
    for (const [url, host] of cases) {
      const result = await sender.send(webhook(url))
      assert.deepEqual(omitDuration(result), { status: null, error: `refused: ${host} is not a public address` }, url)
    }
    await settle()
    assert.equal(counter.count(), 0)
  })

  test('when a name resolves to an address that is not public, then nothing is connected to, and the error names the host, never the address', async (t) => {
    const counter = await connectionCounter(t)
    for (const addresses of [['169.254.169.254'], ['10.0.0.1'], ['::1'], ['fd00::1'], ['::ffff:127.0.0.1'], ['127.0.0.1'], ['93.184.216.34', '127.0.0.1']]) {
      const refusals: Refusal[] = []
      const sender = new HttpSender({ policy: STRICT, resolve: resolver({ 'evil.test': addresses }), refused: (refusal) => refusals.push(refusal) })
      const result = await sender.send(webhook(`https://evil.test:${counter.port}/`))
      assert.deepEqual(omitDuration(result), { status: null, error: 'refused: evil.test is not a public address (or does not resolve)' }, addresses.join())
      // The operator's log is told what the subscriber is not.
      assert.deepEqual(refusals.map((r) => [r.host, r.address]), [['evil.test', addresses.at(-1)]])
    }
    await settle()
    assert.equal(counter.count(), 0)
  })

  test('when a name that was public when saved resolves to 127.0.0.1 when sending (DNS rebinding), then nothing is connected to', async (t) => {
    const counter = await connectionCounter(t)
    let lookups = 0
    const rebinding: Resolve = async () => {
      lookups++
      return [lookups === 1 ? { address: '93.184.216.34', family: 4 } : { address: '127.0.0.1', family: 4 }]
    }
    const url = `https://rebind.test:${counter.port}/in`
    await checkDestination(url, STRICT, rebinding)
    const result = await new HttpSender({ policy: STRICT, resolve: rebinding }).send(webhook(url))
    assert.deepEqual(omitDuration(result), { status: null, error: 'refused: rebind.test is not a public address (or does not resolve)' })
    assert.equal(lookups, 2)
    await settle()
    assert.equal(counter.count(), 0)
  })

  test('when resolving the name hangs, then the deadline still ends the attempt', async () => {
    const hanging: Resolve = () => new Promise(() => {})
    const result = await new HttpSender({ policy: STRICT, timeoutMs: 200, resolve: hanging }).send(webhook('https://slow-dns.test/in'))
    assert.deepEqual(omitDuration(result), { status: null, error: 'timeout after 200 ms' })
    assert.ok(result.durationMs < 1000, String(result.durationMs))
  })

  test('when net.connect asks for a single address (autoSelectFamily off), then names are still checked and delivered to', async (t) => {
    const before = getDefaultAutoSelectFamily()
    setDefaultAutoSelectFamily(false)
    t.after(() => setDefaultAutoSelectFamily(before))
    const target = await endpoint(t, (_req, res) => res.writeHead(200).end())
    const port = new URL(target.base).port
    const table = { 'hooks.test': ['127.0.0.1'], 'evil.test': ['10.0.0.1'] }
    const delivered = await new HttpSender({ policy: OPEN, resolve: resolver(table) }).send(webhook(`http://hooks.test:${port}/in`))
    assert.equal(delivered.status, 200)
    const refused = await new HttpSender({ policy: STRICT, resolve: resolver(table) }).send(webhook(`https://evil.test:${port}/in`))
    assert.equal(refused.error, 'refused: evil.test is not a public address (or does not resolve)')
    assert.equal(target.connections(), 1)
  })

  test('when a name does not resolve, then it reads as a refused host (as when saved), and as a DNS failure with private networks allowed', async () => {
    const guarded = await new HttpSender({ policy: STRICT, resolve: resolver({}) }).send(webhook('https://nowhere.test/in'))
    const internal = await new HttpSender({ policy: STRICT, resolve: resolver({ 'nowhere.test': ['10.1.1.1'] }) }).send(webhook('https://nowhere.test/in'))
    assert.deepEqual(omitDuration(guarded), { status: null, error: 'refused: nowhere.test is not a public address (or does not resolve)' })
    assert.equal(guarded.error, internal.error, 'the deliveries log does not tell which internal names exist')
    const open = await new HttpSender({ policy: OPEN, resolve: resolver({}) }).send(webhook('http://nowhere.test/in'))
    assert.deepEqual(omitDuration(open), { status: null, error: 'DNS: nowhere.test not found' })
  })

  test('when an attempt fails, then the error does not carry the request\'s headers', async (t) => {
    const silent = await endpoint(t, () => {})
    const outcomes = [
      await new HttpSender({ policy: OPEN, timeoutMs: 100 }).send(webhook(`${silent.base}/in`)),
      await new HttpSender({ policy: STRICT }).send(webhook('https://127.0.0.1/in')),
      await new HttpSender({ policy: OPEN }).send({ ...webhook(`${silent.base}/in`), headers: { 'webhook-signature': `${SIGNATURE}\r\nx: y` } })
    ]
    assert.equal(outcomes[2]?.error, 'invalid request (ERR_INVALID_CHAR)')
    for (const outcome of outcomes) {
      assert.ok(!JSON.stringify(outcome).includes(SIGNATURE.slice(3, 20)), JSON.stringify(outcome))
    }
  })
})

/** The outcome without its duration, which varies, to compare whole. */
function omitDuration (result: SendResult): Omit<SendResult, 'durationMs'> {
  const { status, error, responseExcerpt } = result
  return responseExcerpt === undefined ? { status, error } : { status, error, responseExcerpt }
}

// A throwaway self-signed certificate for 127.0.0.1 (P-256, valid until 2126), made for this test alone.
const SELF_SIGNED_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg2xYQdKoEoS3tcesE
7uk9sbTmxwvG6z7pZvMAz/Pi2zmhRANCAAQnvuI7IToqNxYWELq2FfVN9yiq17wZ
0FQ1bt5YazbFRLH15syq3vuRCUApKutOXRp5LSJKcBJ0/hvOKTtAsjM+
-----END PRIVATE KEY-----
`
const SELF_SIGNED_CERT = `-----BEGIN CERTIFICATE-----
MIIBkTCCATagAwIBAgIUJ8z9EFiHNuKNCQmkyq3sjoeHDXMwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNjAwMTEyNFoYDzIxMjYxMTAy
MDAxMTI0WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQnvuI7IToqNxYWELq2FfVN9yiq17wZ0FQ1bt5YazbFRLH15syq3vuR
CUApKutOXRp5LSJKcBJ0/hvOKTtAsjM+o2QwYjAdBgNVHQ4EFgQUFKDCC3KiPSeC
ojF9Vm4OnLuu1x4wHwYDVR0jBBgwFoAUFKDCC3KiPSeCojF9Vm4OnLuu1x4wDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0kAMEYC
IQCvkNZnal86HSug4zUND3GHvX3EhTda+MkpnnQpiK/spwIhAPci3Y+B3efh0BNI
RnUvcBW0MTEyC2Z1lXBL/8CP1JvY
-----END CERTIFICATE-----
`
