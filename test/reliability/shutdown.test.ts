/**
 * Graceful shutdown of the real server: SIGTERM lets an in-flight request finish and exits 0; the deadline
 * bounds the wait; a second signal exits at once.
 */
import assert from 'node:assert/strict'
import { connect, type Socket } from 'node:net'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { cliFor, startServe, within } from '../cli/run.js'

/** A PATCH whose body is only half sent: in flight until `finish` is called. */
async function halfSentPatch (port: number, key: string): Promise<{ socket: Socket, finish: () => void, answer: Promise<string> }> {
  const body = '{"quantity": 42}'
  const socket = connect(port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  let text = ''
  const answer = new Promise<string>((resolve) => {
    socket.on('data', (chunk) => { text += chunk.toString() })
    socket.on('close', () => resolve(text))
    socket.on('error', () => resolve(text))
  })
  socket.write(`PATCH /v1/inventory/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`)
  await sleep(100)
  return { socket, finish: () => socket.write(body.slice(5)), answer }
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
    await sleep(300)
    await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'no new connections while stopping')
    inFlight.finish()
    assert.match(await inFlight.answer, /^HTTP\/1\.1 200 [\s\S]*"quantity":42/)
    assert.deepEqual(await within(5000, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
  })

  test('when in-flight requests outlast SHUTDOWN_TIMEOUT_MS, then the process exits 1 at the deadline', async (t) => {
    const { cli, key } = await setup(t)
    const { port, server } = await startServe(cli, [], { SHUTDOWN_TIMEOUT_MS: '500' })
    const inFlight = await halfSentPatch(port, key)
    const stoppedAt = Date.now()
    server.child.kill('SIGTERM')
    const exit = await within(5000, server.exited, 'exit at the deadline')
    assert.equal(exit.code, 1)
    assert.ok(Date.now() - stoppedAt < 3000)
    inFlight.socket.destroy()
  })

  test('when a second signal arrives while stopping, then the process exits at once', async (t) => {
    const { cli, key } = await setup(t)
    const { port, server } = await startServe(cli)
    const inFlight = await halfSentPatch(port, key)
    server.child.kill('SIGTERM')
    await sleep(200)
    const secondAt = Date.now()
    server.child.kill('SIGINT')
    const exit = await within(3000, server.exited, 'exit after the second signal')
    assert.equal(exit.code, 1)
    assert.ok(Date.now() - secondAt < 1500)
    inFlight.socket.destroy()
  })
})
