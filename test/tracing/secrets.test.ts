/**
 * No secret in what a collector receives. The built server (bin/petstore.js serve, a child process, as a real start
 * traces) exports to a receiver in the test while requests carry an API key, a webhook signing secret, a signature
 * and credentials wherever a client can put them: paths (plain and percent-encoded), queries, body fields and member
 * names, headers; on every kind of route (inventory, batch, webhooks, the change feed and its stream, unknown paths,
 * 405s, the deprecated operation, documentation). Every byte exported is searched, JSON and protobuf alike. And a 4xx
 * leaves no error in its trace, while a 5xx is an error with its exception.
 */
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { describe, test, type TestContext } from 'node:test'
import Database from 'better-sqlite3'
import { signatures } from '../../src/domain/webhooks.js'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli } from '../cli/run.js'
import { otlpReceiver, SPAN_KIND, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { REDIS_URL, redisKeyPrefix, requireRedis } from '../ratelimit/redis-env.js'

const DEMO = fileURLToPath(new URL('../../data/demo.json', import.meta.url))
/** OTLP's status code for an error (the JSON encoding's number). */
const STATUS_ERROR = 2

function tracingEnv (receiver: OtlpReceiver, protocol: 'http/json' | 'http/protobuf', env: Record<string, string> = {}): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol,
    OTEL_EXPORTER_OTLP_COMPRESSION: 'none',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    // Webhooks to this host, so that a subscription (and its secret) can be made without a public endpoint.
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    // The requests without a valid key are counted by address: room for all of them.
    RATE_LIMIT_ANONYMOUS: '1000/10000',
    ...env
  }
}

/** The secrets a client may leak into a request, and the text each must never show up as in an export. */
interface Secrets {
  key: string
  /** A webhook signing secret (`whsec_...`), as creating a subscription answers it. */
  secret: string
  /** A Standard Webhooks signature made with it (`v1,...`). */
  signature: string
  /** Credentials of another service a client might paste (`Authorization: Bearer <token>`). */
  token: string
}

/** Each secret's telling part (what follows its marker) and the key's SHA-256, as they would appear if leaked. */
function needles (secrets: Secrets): Record<string, string> {
  return {
    key: secrets.key.slice('psk_live_'.length),
    'key hash': createHash('sha256').update(secrets.key).digest('hex'),
    'Basic credentials of the key': Buffer.from(`user:${secrets.key}`).toString('base64'),
    'webhook secret': secrets.secret.slice('whsec_'.length),
    signature: secrets.signature.slice('v1,'.length),
    token: secrets.token
  }
}

/** A store with the demo data and a pro key. */
async function prepared (cli: Cli): Promise<string> {
  assert.equal((await cli.run(['migrate'])).code, 0)
  assert.equal((await cli.run(['import', DEMO])).code, 0)
  const created = await cli.run(['keys', 'create', '--plan', 'pro', '--json'])
  assert.equal(created.code, 0, created.stderr)
  return (JSON.parse(created.stdout) as { key: string }).key
}

interface Sent { traceId: string, label: string, status: number, expected: number }

/**
 * Sends every request of the battery, each in a trace of its own (a traceparent the caller chose, sampled), and
 * returns what each was answered. Makes a webhook subscription first, for its id and its secret.
 */
async function sendBattery (base: string, key: string): Promise<{ sent: Sent[], secrets: Secrets }> {
  const auth = { authorization: `Bearer ${key}` }
  const json = { ...auth, 'content-type': 'application/json' }
  const created = await fetch(`${base}/v1/webhooks`, { method: 'POST', headers: json, body: JSON.stringify({ url: 'http://127.0.0.1:9/hook', events: ['inventory.changed'] }) })
  assert.equal(created.status, 201, await created.clone().text())
  const webhook = await created.json() as { id: string, secret: string }
  const secret = webhook.secret
  const signature = signatures([secret], 'evt_1', 1_795_600_000, '{}')
  const token = randomBytes(24).toString('base64url')
  const secrets: Secrets = { key, secret, signature, token }
  const encodedKey = '%70' + encodeURIComponent(key.slice(1))
  const doubleEncodedKey = encodeURIComponent(encodeURIComponent(key))
  const bearerText = `Authorization: Bearer ${token}`
  const batch = (changes: unknown[]): string => JSON.stringify({ changes })

  // Each with the status that shows it took the path meant (a 400 of validation, not a 401 before it, say).
  const battery: Array<{ status: number, label: string, method: string, path: string, headers?: Record<string, string>, body?: string }> = [
    // Paths.
    { status: 404, label: 'a key as a webhook id', method: 'GET', path: `/v1/webhooks/${key}`, headers: auth },
    { status: 404, label: 'a key percent-encoded as a webhook id', method: 'GET', path: `/v1/webhooks/${encodedKey}`, headers: auth },
    { status: 404, label: 'a key double-encoded in a path', method: 'GET', path: `/v1/webhooks/${doubleEncodedKey}`, headers: auth },
    { status: 404, label: 'a key as a webhook id, HEAD', method: 'HEAD', path: `/v1/webhooks/${key}`, headers: auth },
    { status: 404, label: 'a key in PATCH /v1/webhooks/{id}', method: 'PATCH', path: `/v1/webhooks/${key}`, headers: json, body: '{"enabled":false}' },
    { status: 404, label: 'a key in DELETE /v1/webhooks/{id}', method: 'DELETE', path: `/v1/webhooks/${key}`, headers: auth },
    { status: 404, label: 'a key in the secret rotation path', method: 'POST', path: `/v1/webhooks/${key}/secret`, headers: auth },
    { status: 404, label: 'a key in the deliveries path', method: 'GET', path: `/v1/webhooks/${key}/deliveries`, headers: auth },
    { status: 400, label: 'a key as a delivery id', method: 'POST', path: `/v1/webhooks/${webhook.id}/deliveries/${key}/retry`, headers: auth },
    { status: 404, label: 'a webhook secret as a webhook id', method: 'GET', path: `/v1/webhooks/${encodeURIComponent(secret)}`, headers: auth },
    { status: 404, label: 'a signature as a webhook id', method: 'GET', path: `/v1/webhooks/${encodeURIComponent(signature)}`, headers: auth },
    { status: 400, label: 'a key as a pet id', method: 'GET', path: `/v1/inventory/${key}`, headers: auth },
    { status: 400, label: 'a key as a pet id, PATCH', method: 'PATCH', path: `/v1/inventory/${key}`, headers: json, body: '{"quantity":1}' },
    { status: 400, label: 'a key as a pet id, deprecated operation', method: 'GET', path: `/v1/pets/${key}`, headers: auth },
    { status: 404, label: 'a key in an unknown /v1 path', method: 'GET', path: `/v1/nothing/${key}`, headers: auth },
    { status: 404, label: 'a key in an unknown path', method: 'GET', path: `/${key}`, headers: auth },
    { status: 404, label: 'a key in the documentation path', method: 'GET', path: `/docs/${key}` },
    // Queries.
    { status: 200, label: 'a key as a query name', method: 'GET', path: `/v1/inventory?${key}=1`, headers: auth },
    { status: 400, label: 'a key as a cursor', method: 'GET', path: `/v1/inventory?cursor=${key}&limit=${key}`, headers: auth },
    { status: 400, label: 'a key as the feed\'s after', method: 'GET', path: `/v1/inventory/changes?after=${key}`, headers: auth },
    { status: 400, label: 'a key as the stream\'s after', method: 'GET', path: `/v1/inventory/changes/stream?after=${key}`, headers: auth },
    { status: 400, label: 'a webhook secret as a deliveries cursor', method: 'GET', path: `/v1/webhooks/${webhook.id}/deliveries?after=${encodeURIComponent(secret)}`, headers: auth },
    { status: 405, label: 'a key in the query of a 405', method: 'DELETE', path: `/v1/inventory?token=${key}`, headers: auth },
    { status: 405, label: 'a key in the query of an unusual method', method: 'PROPFIND', path: `/v1/inventory?${key}`, headers: auth },
    { status: 200, label: 'a key in the query of the API document', method: 'GET', path: `/v1/openapi.json?${key}` },
    // Body fields and member names.
    { status: 400, label: 'a key as an event type', method: 'POST', path: '/v1/webhooks', headers: json, body: JSON.stringify({ url: 'http://127.0.0.1:9/hook', events: [key, secret] }) },
    { status: 400, label: 'a key in a webhook URL', method: 'POST', path: '/v1/webhooks', headers: json, body: JSON.stringify({ url: `ftp://127.0.0.1/${key}?s=${secret}`, events: ['inventory.changed'] }) },
    { status: 400, label: 'a key as a webhook URL', method: 'POST', path: '/v1/webhooks', headers: json, body: JSON.stringify({ url: key, events: ['inventory.changed'] }) },
    { status: 400, label: 'a key as a webhook URL\'s password', method: 'POST', path: '/v1/webhooks', headers: json, body: JSON.stringify({ url: `http://user:${key}@127.0.0.1/`, events: ['inventory.changed'] }) },
    { status: 400, label: 'a key as an event type on update', method: 'PATCH', path: `/v1/webhooks/${webhook.id}`, headers: json, body: JSON.stringify({ events: [key], description: secret }) },
    { status: 400, label: 'a key as a member name', method: 'POST', path: '/v1/webhooks', headers: json, body: JSON.stringify({ url: 'http://127.0.0.1:9/hook', events: ['inventory.changed'], [key]: 1 }) },
    { status: 400, label: 'a key as a repeated member name', method: 'PATCH', path: '/v1/inventory/1', headers: json, body: `{"${key}":1,"${key}":2}` },
    { status: 400, label: 'a key as a bare JSON value', method: 'PATCH', path: '/v1/inventory/1', headers: json, body: `{"quantity":${key}}` },
    { status: 400, label: 'a key as a quantity', method: 'PATCH', path: '/v1/inventory/1', headers: json, body: JSON.stringify({ quantity: key }) },
    { status: 400, label: 'a key as a reason, credentials in a note', method: 'PATCH', path: '/v1/inventory/1', headers: json, body: JSON.stringify({ quantity: 1, reason: key, note: bearerText }) },
    { status: 400, label: 'a key as a delta', method: 'POST', path: '/v1/inventory/1/adjustments', headers: json, body: JSON.stringify({ delta: key }) },
    { status: 400, label: 'a key as a batch ifMatch', method: 'POST', path: '/v1/inventory/batch', headers: json, body: batch([{ petId: 1, quantity: 1, ifMatch: key }]) },
    { status: 400, label: 'a key as a batch pet id', method: 'POST', path: '/v1/inventory/batch', headers: json, body: batch([{ petId: key, quantity: 1 }]) },
    {
      status: 400, label: 'an import-like batch with secrets in every note and one bad change',
      method: 'POST',
      path: '/v1/inventory/batch',
      headers: json,
      // 99 changes that would apply and one that cannot, within the 16 KiB a body may have.
      body: batch([...Array.from({ length: 99 }, (_, i) => ({ petId: (i % 5) + 1, delta: 0, note: i % 2 === 0 ? key : secret })), { petId: 1, quantity: key }])
    },
    { status: 400, label: 'a key as a body\'s member name, secret as value', method: 'POST', path: '/v1/inventory/batch', headers: json, body: JSON.stringify({ changes: [], [key]: secret, [secret]: signature }) },
    // Headers.
    { status: 401, label: 'a key with a letter too many', method: 'GET', path: '/v1/inventory', headers: { authorization: `Bearer ${key}x` } },
    { status: 401, label: 'a key in Basic credentials', method: 'GET', path: '/v1/inventory', headers: { authorization: `Basic ${Buffer.from(`user:${key}`).toString('base64')}` } },
    { status: 401, label: 'a key without a scheme', method: 'GET', path: '/v1/inventory', headers: { authorization: key } },
    { status: 401, label: 'another service\'s token', method: 'GET', path: '/v1/inventory', headers: { authorization: `Bearer ${token}` } },
    { status: 200, label: 'a key as the request id', method: 'GET', path: '/v1/inventory', headers: { ...auth, 'x-request-id': key } },
    { status: 200, label: 'a webhook secret as the request id', method: 'GET', path: '/v1/inventory', headers: { ...auth, 'x-request-id': `whsec_${secret.slice(6).replace(/[^A-Za-z0-9]/g, '')}` } },
    { status: 400, label: 'a key as an Idempotency-Key of a refused write', method: 'PATCH', path: '/v1/inventory/1', headers: { ...json, 'idempotency-key': key }, body: JSON.stringify({ quantity: -1 }) },
    { status: 400, label: 'a malformed quoted Idempotency-Key', method: 'PATCH', path: '/v1/inventory/1', headers: { ...json, 'idempotency-key': `"${key}` }, body: '{"quantity":1}' },
    { status: 400, label: 'a key as If-Match', method: 'PATCH', path: '/v1/inventory/1', headers: { ...json, 'if-match': key }, body: '{"quantity":1}' },
    { status: 200, label: 'a key as If-None-Match', method: 'GET', path: '/v1/inventory/1', headers: { ...auth, 'if-none-match': key } },
    { status: 400, label: 'a key as Last-Event-ID', method: 'GET', path: '/v1/inventory/changes/stream', headers: { ...auth, 'last-event-id': key } },
    { status: 200, label: 'a signature and a secret in headers', method: 'GET', path: '/v1/inventory', headers: { ...auth, 'webhook-signature': signature, cookie: `s=${secret}` } },
    { status: 415, label: 'a key as a content type', method: 'PATCH', path: '/v1/inventory/1', headers: { ...auth, 'content-type': `application/${key}` }, body: '{"quantity":1}' }
  ]

  const sent: Sent[] = []
  for (const request of battery) {
    const traceId = randomBytes(16).toString('hex')
    const res = await fetch(`${base}${request.path}`, {
      method: request.method,
      headers: { ...request.headers, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` },
      ...(request.body === undefined ? {} : { body: request.body })
    })
    await res.arrayBuffer()
    sent.push({ traceId, label: request.label, status: res.status, expected: request.status })
  }
  return { sent, secrets }
}

/** Fails naming each secret found in an exported body, and where. */
function assertNothingLeaked (bodies: readonly Buffer[], secrets: Secrets): void {
  assert.ok(bodies.length > 0, 'something was exported')
  const found = Object.entries(needles(secrets)).flatMap(([what, needle]) => bodies.flatMap((body) => {
    const at = body.indexOf(needle)
    return at === -1 ? [] : [`${what}: ...${body.subarray(Math.max(0, at - 120), at + needle.length + 20).toString('latin1')}...`]
  }))
  assert.deepEqual(found, [], 'no secret in any byte exported')
}

/** A 4xx leaves no error in its trace: no span failed, none has an exception event, the server span's status unset. */
function assertNoErrorsIn4xxTraces (spans: readonly ReceivedSpan[], sent: readonly Sent[]): void {
  const failures = sent.filter(({ status }) => status >= 400 && status < 500).flatMap(({ traceId, label, status }) => {
    const trace = spans.filter((span) => span.traceId === traceId)
    if (!trace.some((span) => span.kind === SPAN_KIND.SERVER)) return [`${label} (${status}): no server span`]
    return trace.filter((span) => span.status.code === STATUS_ERROR || span.events.some((event) => event.name === 'exception'))
      .map((span) => `${label} (${status}): ${span.name} ${JSON.stringify(span.status)} ${span.events.map((event) => event.name).join(',')}`)
  })
  assert.deepEqual(failures, [], 'no error in the trace of a 4xx')
}

describe('no secret in traces (OTLP/HTTP JSON, SQLite)', () => {
  test('when requests carry a key, a webhook secret, a signature and credentials anywhere, then no exported byte holds them and no 4xx trace holds an error', async (t) => {
    const receiver = await otlpReceiver(t)
    const cli = cliFor(t)
    const key = await prepared(cli)
    const { base, server } = await startServe(cli, [], tracingEnv(receiver, 'http/json'))
    const { sent, secrets } = await sendBattery(base, key)
    assert.deepEqual(sent.filter(({ status, expected }) => status !== expected), [], 'each request answered as meant')

    const spans = await receiver.waitFor((spans) => sent.every(({ traceId }) => spans.some((span) => span.traceId === traceId && span.kind === SPAN_KIND.SERVER)))
    assertNoErrorsIn4xxTraces(spans, sent)
    server.child.kill('SIGTERM')
    assert.equal((await within(EXIT_TIMEOUT_MS, server.exited, 'the server to stop')).code, 0)
    assertNothingLeaked(receiver.rawBodies(), secrets)
    // What was redacted is still shown for what it was.
    const paths = receiver.spans().map((span) => span.attributes['url.path'])
    assert.ok(paths.includes('/v1/webhooks/psk_live_[redacted]'), 'the path shows a key was there')
    // And the logs say no more than the traces.
    const { stdout } = server.output()
    for (const [what, needle] of Object.entries(needles(secrets))) assert.ok(!stdout.includes(needle), `${what} in the logs`)
  })

  test('when a request fails the service (5xx), then its server span is an error with the exception, and the failed store call too; a 4xx beside it is not', async (t) => {
    const receiver = await otlpReceiver(t)
    const cli = cliFor(t)
    const key = await prepared(cli)
    const { base } = await startServe(cli, [], tracingEnv(receiver, 'http/json'))
    // The store breaks under the running server: every listing of subscriptions fails (500).
    const db = new Database(cli.db)
    db.exec('DROP TABLE webhook_deliveries; DROP TABLE webhooks')
    db.close()
    const send = async (path: string): Promise<{ traceId: string, status: number }> => {
      const traceId = randomBytes(16).toString('hex')
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}`, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } })
      await res.arrayBuffer()
      return { traceId, status: res.status }
    }
    const failed = await send('/v1/webhooks')
    const missing = await send('/v1/inventory/424242')
    assert.deepEqual([failed.status, missing.status], [500, 404])

    const spans = await receiver.waitFor((spans) => [failed, missing].every(({ traceId }) => spans.some((span) => span.traceId === traceId && span.kind === SPAN_KIND.SERVER)))
    const of = (traceId: string, kind: number, name?: string): ReceivedSpan | undefined =>
      spans.find((span) => span.traceId === traceId && span.kind === kind && (name === undefined || span.name === name))
    const server = of(failed.traceId, SPAN_KIND.SERVER)
    assert.equal(server?.status.code, STATUS_ERROR, 'the server span is an error')
    const exception = server?.events.find((event) => event.name === 'exception')
    assert.match(String(exception?.attributes['exception.message']), /no such table/, 'the server span has the exception')
    assert.equal(server?.attributes['http.response.status_code'], 500)
    const call = spans.find((span) => span.traceId === failed.traceId && span.name.startsWith('store ') && span.status.code === STATUS_ERROR)
    assert.ok(call !== undefined && call.parentSpanId === server?.spanId, 'the failed store call, an error under the server span')
    assert.match(String(call.status.message), /no such table/)
    const notFound = of(missing.traceId, SPAN_KIND.SERVER)
    assert.deepEqual([notFound?.attributes['http.response.status_code'], notFound?.status.code ?? 0, notFound?.events.length], [404, 0, 0])
    assert.ok(spans.filter((span) => span.traceId === missing.traceId).every((span) => (span.status.code ?? 0) === 0), 'nothing in the 404\'s trace failed')
  })
})

const services = (await requirePostgres('secrets in traces on PostgreSQL and Redis')) && (await requireRedis('secrets in traces on PostgreSQL and Redis'))

if (services) {
  describe('no secret in traces (OTLP/HTTP protobuf, PostgreSQL and Redis)', () => {
    async function setup (t: TestContext): Promise<Cli> {
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      return cliFor(t, { DATABASE_URL: await tempPostgresDatabase(t), REDIS_URL, REDIS_KEY_PREFIX })
    }

    test('when requests carry a key, a webhook secret, a signature and credentials anywhere, then no exported byte holds them', async (t) => {
      const receiver = await otlpReceiver(t)
      const cli = await setup(t)
      const key = await prepared(cli)
      // The default protocol: protobuf, whose strings are their bytes.
      const { base, server } = await startServe(cli, [], tracingEnv(receiver, 'http/protobuf'))
      const { sent, secrets } = await sendBattery(base, key)
      assert.deepEqual(sent.filter(({ status, expected }) => status !== expected), [], 'each request answered as meant')
      // The stop flushes what is still batched: after it, every trace is in.
      server.child.kill('SIGTERM')
      assert.equal((await within(EXIT_TIMEOUT_MS, server.exited, 'the server to stop')).code, 0)
      const bodies = receiver.rawBodies()
      const missing = sent.filter(({ traceId }) => !bodies.some((body) => body.includes(Buffer.from(traceId, 'hex'))))
      assert.deepEqual(missing, [], 'every request was traced')
      assert.ok(bodies.some((body) => body.includes('instrumentation-pg')) && bodies.some((body) => body.includes('ioredis')), 'pg and Redis spans too')
      assertNothingLeaked(bodies, secrets)
    })
  })
}
