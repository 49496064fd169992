/**
 * Graceful shutdown of the real server: SIGTERM drains (readiness fails at once, requests are still served, each
 * answer closing its connection) for SHUTDOWN_DRAIN_MS, then lets an in-flight request finish and exits 0; SIGINT
 * skips the drain; the deadline bounds the wait; a second signal exits at once.
 */
import assert from 'node:assert/strict'
import { get as httpGet, type IncomingMessage } from 'node:http'
import { connect, type Socket } from 'node:net'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within } from '../cli/run.js'
import { waitFor, WAIT_TIMEOUT_MS } from '../helpers/wait.js'

const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'

/**
 * A PATCH whose body is only half sent: in flight until `finish` is called. It asks for a 100 Continue, which the
 * server sends once it has read the request's head: resolved then, the request is surely in the server's hands (a
 * fixed pause could end, on a loaded machine, before the server had read a byte). `answer` is what follows the 100.
 */
async function halfSentPatch (port: number, key: string): Promise<{ socket: Socket, finish: () => void, answer: Promise<string> }> {
  const body = '{"quantity": 42}'
  const socket = connect(port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  let text = ''
  let onText = (): void => {}
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (chunk) => { text += chunk.toString(); onText() })
    socket.on('close', () => resolve(text.startsWith(CONTINUE) ? text.slice(CONTINUE.length) : text))
    socket.on('error', () => resolve(text))
  })
  socket.write(`PATCH /v1/inventory/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`)
  await within(WAIT_TIMEOUT_MS, new Promise<void>((resolve) => {
    onText = () => { if (text.startsWith(CONTINUE)) resolve() }
    onText()
  }), `the server to read the request's head (it sent: ${JSON.stringify(text)})`)
  return { socket, finish: () => socket.write(body.slice(5)), answer }
}

/** Whether a new connection to the port is refused (nothing listens any more). */
async function refused (port: number): Promise<boolean> {
  return await new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve(false) })
    socket.once('error', () => { resolve(true) })
  })
}

async function setup (t: Parameters<typeof cliFor>[0]) {
  const cli = cliFor(t)
  assert.equal((await cli.run(['import', cli.file('p.json', '{"pets":[{"id":1,"name":"a","status":"available","quantity":1}]}')])).code, 0)
  const key = (await cli.run(['keys', 'create', '--plan', 'pro'])).stdout.trim()
  return { cli, key }
}

describe('shutdown', () => {
  test('when SIGTERM arrives during a request, then the request completes, new connections are refused, and the exit code is 0', async (t) => {
    const { cli, key } = await setup(t)
    const { port, server } = await startServe(cli)
    const inFlight = await halfSentPatch(port, key)
    server.child.kill('SIGTERM')
    // The listener closes when the server has handled the signal: wait for that, not a guess of how long it takes.
    await waitFor('no new connections while stopping', () => refused(port))
    assert.equal(server.child.exitCode, null, 'still running for the request in flight')
    inFlight.finish()
    assert.match(await inFlight.answer, /^HTTP\/1\.1 200 [\s\S]*"quantity":42/)
    assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
  })

  test('when in-flight requests outlast SHUTDOWN_TIMEOUT_MS, then the process exits 1 at the deadline', async (t) => {
    const { cli, key } = await setup(t)
    const { port, server } = await startServe(cli, [], { SHUTDOWN_TIMEOUT_MS: '500' })
    const inFlight = await halfSentPatch(port, key)
    const stoppedAt = Date.now()
    server.child.kill('SIGTERM')
    const exit = await within(EXIT_TIMEOUT_MS, server.exited, 'exit at the deadline')
    assert.equal(exit.code, 1)
    // The request never ends: without the deadline the process would wait for ever. The bound leaves a loaded machine
    // seconds to act on the signal and exit.
    const stoppedAfter = Date.now() - stoppedAt
    assert.ok(stoppedAfter >= 500 && stoppedAfter < 8000, `exited ${stoppedAfter} ms after SIGTERM`)
    inFlight.socket.destroy()
  })

  test('when a second signal arrives while stopping, then the process exits at once', async (t) => {
    const { cli, key } = await setup(t)
    // A deadline far beyond the bound below: only the second signal can end the process that soon.
    const { port, server } = await startServe(cli, [], { SHUTDOWN_TIMEOUT_MS: '60000' })
    const inFlight = await halfSentPatch(port, key)
    server.child.kill('SIGTERM')
    // The second signal must come while the server is stopping: once it said so, not after a guessed pause.
    await server.waitForOutput(/"msg":"shutting down"/)
    const secondAt = Date.now()
    server.child.kill('SIGINT')
    const exit = await within(EXIT_TIMEOUT_MS, server.exited, 'exit after the second signal')
    assert.equal(exit.code, 1)
    assert.match(server.output().stdout, /second signal: exiting now/)
    const exitedAfter = Date.now() - secondAt
    assert.ok(exitedAfter < 10_000, `exited ${exitedAfter} ms after the second signal (the deadline is 60 s)`)
    inFlight.socket.destroy()
  })

  test('when SIGTERM arrives with a drain, then /readyz answers 503 at once, requests are served with Connection: close until the drain ends, then the listener closes and the exit code is 0', async (t) => {
    const { cli, key } = await setup(t)
    // A drain long enough for the checks below on a loaded machine (CI runs two test files at once).
    const { base, port, server } = await startServe(cli, [], { SHUTDOWN_DRAIN_MS: '8000' })
    const auth = { authorization: `Bearer ${key}` }
    // Before: ready, and answers keep their connection.
    assert.equal((await fetch(`${base}/readyz`)).status, 200)
    assert.notEqual((await fetch(`${base}/v1/inventory`, { headers: auth })).headers.get('connection'), 'close')

    const stoppedAt = Date.now()
    server.child.kill('SIGTERM')
    // The signal is handled on the server's next turn: poll rather than guess how long that takes.
    const ready = await within(WAIT_TIMEOUT_MS, (async () => {
      for (;;) {
        const res = await fetch(`${base}/readyz`)
        if (res.status === 503) return res
        await res.arrayBuffer()
        await sleep(20)
      }
    })(), '/readyz answering 503')
    assert.equal(((await ready.json()) as { code: string }).code, 'service_unavailable')
    assert.equal((await fetch(`${base}/healthz`)).status, 200, 'still alive while draining')
    // New connections are still accepted and served; each answer ends its connection.
    const read = await fetch(`${base}/v1/inventory`, { headers: auth })
    assert.equal(read.status, 200)
    assert.equal(read.headers.get('connection'), 'close')
    const write = await fetch(`${base}/v1/inventory/1`, { method: 'PATCH', headers: { ...auth, 'content-type': 'application/json' }, body: '{"quantity": 7}' })
    assert.equal(write.status, 200)
    assert.equal(write.headers.get('connection'), 'close')

    const exit = await within(8000 + EXIT_TIMEOUT_MS, server.exited, 'exit after the drain')
    assert.deepEqual(exit, { code: 0, signal: null })
    const stoppedAfter = Date.now() - stoppedAt
    assert.ok(stoppedAfter >= 8000, `exited ${stoppedAfter} ms after SIGTERM, before the drain ended`)
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'no listener after the drain')
    assert.match(server.output().stdout, /draining/)
  })

  test('when a request is in flight as the drain ends, then it completes before the exit', async (t) => {
    const { cli, key } = await setup(t)
    // The request starts within the drain (once the server says it drains; a drain long enough for a loaded machine
    // to connect) and is still open when the drain ends (once the server says so).
    const { port, server } = await startServe(cli, [], { SHUTDOWN_DRAIN_MS: '5000' })
    server.child.kill('SIGTERM')
    await server.waitForOutput(/"msg":"draining/)
    const inFlight = await halfSentPatch(port, key)
    await server.waitForOutput(/"msg":"drained: closing the listener"/)
    await waitFor('the listener closed', () => refused(port))
    inFlight.finish()
    assert.match(await inFlight.answer, /^HTTP\/1\.1 200 [\s\S]*"quantity":42/)
    assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after the in-flight request'), { code: 0, signal: null })
  })

  test('when SIGTERM arrives while a change stream is open and a client holds a connection that has sent nothing, then the process exits 0, not at the deadline', async (t) => {
    const { cli, key } = await setup(t)
    const { port, server } = await startServe(cli, [], { SHUTDOWN_TIMEOUT_MS: '10000' })
    const stream = await new Promise<IncomingMessage>((resolve, reject) => {
      httpGet({ host: '127.0.0.1', port, path: '/v1/inventory/changes/stream', headers: { authorization: `Bearer ${key}` }, agent: false }, resolve).once('error', reject)
    })
    assert.equal(stream.statusCode, 200)
    stream.resume()
    // A pool's or a browser's spare connection: accepted, and nothing sent on it yet.
    const spare = connect(port, '127.0.0.1')
    spare.on('error', () => {})
    await new Promise((resolve) => spare.once('connect', resolve))
    t.after(() => { spare.destroy() })
    const stoppedAt = Date.now()
    server.child.kill('SIGTERM')
    assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
    // The stream ends at once and the spare connection is closed with the listener: far sooner than the 10 s deadline.
    const stoppedAfter = Date.now() - stoppedAt
    assert.ok(stoppedAfter < 8000, `exited ${stoppedAfter} ms after SIGTERM`)
  })

  test('when SIGINT arrives (a terminal\'s Ctrl+C), then the drain is skipped and the process exits at once', async (t) => {
    const { cli } = await setup(t)
    const { port, server } = await startServe(cli, [], { SHUTDOWN_DRAIN_MS: '60000' })
    // Far sooner than the drain would end, with room for a loaded machine.
    assert.deepEqual(await within(15_000, (server.child.kill('SIGINT'), server.exited), 'exit after SIGINT'), { code: 0, signal: null })
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`))
  })
})
