import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { awayFromMinuteBoundary } from '../helpers/clock.js'
import { waitFor, WAIT_TIMEOUT_MS } from '../helpers/wait.js'
import { REDIS_URL, redisKeyPrefix, requireRedis } from '../ratelimit/redis-env.js'
import { cliFor, EXIT_TIMEOUT_MS, freePort, startServe, within, type Cli } from './run.js'

const BIG = '9007199254740993' // 2^53 + 1: a double cannot hold it

async function newKey (cli: Cli, plan = 'free'): Promise<string> {
  const res = await cli.run(['keys', 'create', '--plan', plan])
  assert.equal(res.code, 0, res.stderr)
  return res.stdout.trimEnd()
}

describe('petstore serve', () => {
  test('when started with --seed-demo on a fresh store, then it serves the demo inventory to a new key and exits 0 on SIGTERM', async (t) => {
    const cli = cliFor(t)
    const { base, server } = await startServe(cli, ['--seed-demo'])

    const key = await newKey(cli)
    const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}` } })
    const body = await res.text()
    assert.equal(res.status, 200, body)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/)
    assert.ok(body.includes(`{"petId":${BIG},"quantity":1,"status":"available"}`), `exact int64 id in ${body}`)
    const items = JSON.parse(body) as Array<{ petId: number, quantity: number, status: string }>
    assert.equal(items.length, 6)
    assert.deepEqual(items[0], { petId: 1, quantity: 3, status: 'available' })

    server.child.kill('SIGTERM')
    const exit = await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM')
    assert.deepEqual(exit, { code: 0, signal: null }, server.output().stdout.slice(-3000) + server.output().stderr)
  })

  test('when stock was written and read through the server, then SIGTERM still exits 0 (no abort at teardown)', async (t) => {
    const cli = cliFor(t)
    const { base, server } = await startServe(cli, ['--seed-demo'])
    const key = await newKey(cli)
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${base}/v1/inventory/1`, { method: 'PATCH', headers, body: JSON.stringify({ quantity: i, note: `count ${i}` }) })
      assert.equal(res.status, 200)
      assert.equal((await fetch(`${base}/v1/inventory/1`, { headers })).status, 200)
    }
    server.child.kill('SIGTERM')
    assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
    assert.doesNotMatch(server.output().stderr, /Assertion failed|Aborted/)
  })

  test('when it starts, then one line says where the API, its reference and the metrics are and how to create a key', async (t) => {
    const cli = cliFor(t)
    const { base, port, server } = await startServe(cli, [], { LOG_LEVEL: 'info' })
    server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM')
    const lines = server.output().stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as { msg: string })
    const start = lines.filter((line) => line.msg.startsWith('Petstore Inventory Service:'))
    assert.equal(start.length, 1)
    assert.equal(start[0]?.msg, `Petstore Inventory Service: API ${base}/v1, reference ${base}/docs, metrics ${base}/metrics. ` +
      'Create a key with: npx petstore keys create --plan free --name me')
    assert.ok(port > 0)
  })

  test('when LOG_FORMAT is pretty, then the lines are for people, not JSON; when json, every line is a JSON object', async (t) => {
    const cli = cliFor(t)
    const pretty = await startServe(cli, [], { LOG_FORMAT: 'pretty', LOG_LEVEL: 'info' })
    await fetch(`${pretty.base}/v1/inventory`)
    pretty.server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, pretty.server.exited, 'exit after SIGTERM')
    const lines = pretty.server.output().stdout.trimEnd().split('\n')
    assert.ok(lines.every((line) => /^\[\d\d:\d\d:\d\d\.\d{3}\] (INFO|WARN|ERROR): /.test(line)), lines.join('\n'))
    assert.ok(lines.some((line) => line.includes('INFO: Petstore Inventory Service: API http://127.0.0.1:')))
    assert.ok(lines.some((line) => /INFO: request completed .*"status":401/.test(line)), 'one line per request, its fields on the same line')

    const json = await startServe(cli, [], { LOG_FORMAT: 'json', LOG_LEVEL: 'info' })
    json.server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, json.server.exited, 'exit after SIGTERM')
    for (const line of json.server.output().stdout.trimEnd().split('\n')) assert.equal(typeof (JSON.parse(line) as { level: number }).level, 'number')
  })

  test('when a request has no key, then the API answers 401 while /healthz stays open', async (t) => {
    const cli = cliFor(t)
    const { base, server } = await startServe(cli)
    const res = await fetch(`${base}/v1/inventory`)
    assert.equal(res.status, 401)
    assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/)
    server.child.kill('SIGTERM')
    assert.equal((await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM')).code, 0)
  })

  test('when started without --seed-demo, then the inventory is empty', async (t) => {
    const cli = cliFor(t)
    const { base, server } = await startServe(cli)
    const key = await newKey(cli)
    const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}` } })
    assert.equal(res.status, 200)
    assert.equal(await res.text(), '[]')
    server.child.kill('SIGINT')
    assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGINT'), { code: 0, signal: null })
  })

  test('when --seed-demo meets a store that already has pets, then it keeps the data as it is', async (t) => {
    const cli = cliFor(t)
    const own = cli.file('own.json', '{ "pets": [{ "id": 42, "name": "Only", "status": "sold", "quantity": 2 }] }')
    assert.equal((await cli.run(['import', own])).code, 0)
    const { base } = await startServe(cli, ['--seed-demo'])
    const key = await newKey(cli)
    const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}` } })
    assert.equal(await res.text(), '[{"petId":42,"quantity":2,"status":"sold"}]')
  })

  test('when a key is revoked with the CLI while serving, then the server rejects it', async (t) => {
    const cli = cliFor(t, { AUTH_CACHE_TTL_MS: '0' })
    const { base } = await startServe(cli)
    const created = await cli.run(['keys', 'create', '--plan', 'free', '--json'])
    const { id, key } = JSON.parse(created.stdout) as { id: string, key: string }
    const headers = { authorization: `Bearer ${key}` }
    assert.equal((await fetch(`${base}/v1/inventory`, { headers })).status, 200)
    assert.equal((await cli.run(['keys', 'revoke', id])).code, 0)
    assert.equal((await fetch(`${base}/v1/inventory`, { headers })).status, 401)
  })

  test('when the port is already taken, then it exits 1 with the reason on stderr', async (t) => {
    const cli = cliFor(t)
    const blocker = createServer()
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
    t.after(() => blocker.close())
    const address = blocker.address()
    assert.ok(address !== null && typeof address !== 'string')
    const res = await cli.run(['serve'], { PORT: String(address.port), HOST: '127.0.0.1' })
    assert.equal(res.code, 1)
    assert.match(res.stderr, /EADDRINUSE/)
  })

  test('when given an unknown option or an argument, then it exits 2 without listening', async (t) => {
    const cli = cliFor(t)
    for (const args of [['serve', '--seed'], ['serve', 'now']]) {
      const res = await cli.run(args, { PORT: '0' })
      assert.equal(res.code, 2, args.join(' '))
      assert.match(res.stderr, /Run "npx petstore help" for usage/)
    }
  })
})

describe('petstore serve with REDIS_URL', () => {
  test('when Redis is unreachable at boot, then the server still starts, limits in process and sends the headers', async (t) => {
    const cli = cliFor(t)
    const deadPort = await freePort()
    const { base, server } = await startServe(cli, [], { REDIS_URL: `redis://127.0.0.1:${deadPort}`, RATE_LIMIT_FREE: '2/100', BAN_SECONDS: '0' })
    const key = await newKey(cli)
    // The three requests must fall in one UTC minute (the server counts on the real clock).
    await awayFromMinuteBoundary(45)
    const statuses = []
    for (let i = 0; i < 3; i++) {
      // Answered without waiting on Redis: a bound that allows a loaded machine, far below a connect timeout.
      const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(5000) })
      statuses.push(res.status)
      assert.match(res.headers.get('x-ratelimit-limit') ?? '', /^2$/)
    }
    assert.deepEqual(statuses, [200, 200, 429])
    server.child.kill('SIGTERM')
    assert.equal((await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM')).code, 0)
    assert.match(server.output().stdout, /redis/i, 'the outage is logged')
  })
})

describe('petstore serve --workers', () => {
  test('when more than one worker is asked for without REDIS_URL, then it refuses with exit 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['serve', '--workers', '2'])
    assert.equal(res.code, 2)
    assert.match(res.stderr, /--workers above 1 needs REDIS_URL/)
  })
})

if (await requireRedis('serve --workers with Redis')) {
  describe('petstore serve --workers with Redis', () => {
    /** The workers (their pids) that have said they drain: each says so once its /readyz answers 503. */
    const drainingWorkers = (server: { output: () => { stdout: string } }): Set<number> => new Set(server.output().stdout.split('\n')
      .filter((line) => line.includes('"msg":"draining')).map((line) => (JSON.parse(line) as { pid: number }).pid))

    test('when two workers share the port, then a key gets exactly its limit across them and SIGTERM stops all with exit 0', async (t) => {
      const cli = cliFor(t)
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      const { base, server } = await startServe(cli, ['--workers', '2'], { REDIS_URL, REDIS_KEY_PREFIX, RATE_LIMIT_FREE: '7/1000', BAN_SECONDS: '0' })
      const key = await newKey(cli)
      const statuses = await Promise.all(Array.from({ length: 16 }, () =>
        fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}`, connection: 'close' } }).then((r) => r.status)))
      const passed = statuses.filter((s) => s === 200).length
      // A minute boundary inside the burst could admit a second window's worth, never more.
      assert.ok(passed === 7 || (passed > 7 && passed <= 14), `passed ${passed}: ${statuses.join(' ')}`)
      assert.equal(statuses.filter((s) => s === 429).length, 16 - passed)
      server.child.kill('SIGTERM')
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
    })

    test('when the primary gets SIGTERM while its workers are still starting, then each stops once it listens and all exit 0', async (t) => {
      const cli = cliFor(t)
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      assert.equal((await cli.run(['migrate'])).code, 0)
      const server = cli.start(['serve', '--workers', '2'], { PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', REDIS_URL, REDIS_KEY_PREFIX, SHUTDOWN_DRAIN_MS: '200' })
      // The primary has forked its workers (and handles signals); they take a second or more to load and listen.
      await server.waitForOutput(/primary started workers/)
      assert.doesNotMatch(server.output().stdout, /listening at/, 'no worker listens yet')
      server.child.kill('SIGTERM')
      assert.deepEqual(await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM'), { code: 0, signal: null })
      // Both workers came up and were stopped, rather than lost the message and served on.
      assert.equal(drainingWorkers(server).size, 2)
    })

    test('when the primary gets SIGTERM, then every worker drains: /readyz answers 503 while requests are still served, then all exit 0', async (t) => {
      const cli = cliFor(t)
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      // A drain long enough for eight requests on a loaded machine (CI runs two test files at once).
      const { base, server } = await startServe(cli, ['--workers', '2'], { REDIS_URL, REDIS_KEY_PREFIX, SHUTDOWN_DRAIN_MS: '10000' })
      const key = await newKey(cli)
      server.child.kill('SIGTERM')
      // The primary tells each worker. (Two 503s in a row proved nothing: the primary may hand both connections to the
      // same worker.)
      await within(WAIT_TIMEOUT_MS, (async () => {
        while (drainingWorkers(server).size < 2) await sleep(20)
      })(), 'both workers draining')
      // Each request on a new connection: the primary hands them to both workers in turn.
      for (let i = 0; i < 4; i++) {
        assert.equal((await fetch(`${base}/readyz`, { headers: { connection: 'close' } })).status, 503)
        const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}`, connection: 'close' } })
        assert.equal(res.status, 200)
      }
      assert.deepEqual(await within(10_000 + EXIT_TIMEOUT_MS, server.exited, 'exit after the drain'), { code: 0, signal: null })
    })
  })
}

describe('npm start', () => {
  test('when run on a fresh store as the README says, then it serves the demo data to a new key', async (t) => {
    const cli = cliFor(t)
    const root = fileURLToPath(new URL('../..', import.meta.url))
    // detached: npm starts node under a shell; the whole process group is stopped afterwards. Port 0: the port
    // the server got is read from the line it logs at start.
    const child = spawn('npm', ['start', '--silent'], {
      cwd: root, detached: true, stdio: ['ignore', 'pipe', 'ignore'], env: { ...cli.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' }
    })
    let stdout = ''
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => { stdout += chunk })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    t.after(async () => {
      try {
        process.kill(-(child.pid as number), 'SIGTERM')
      } catch {
        // already gone
      }
      await within(EXIT_TIMEOUT_MS, exited, 'npm start to stop')
    })
    const listening = /Petstore Inventory Service: API (http:\/\/127\.0\.0\.1:\d+)\/v1/
    await waitFor('npm start saying where it listens', () => listening.test(stdout), { timeoutMs: 60_000, intervalMs: 100, detail: () => stdout })
    const base = listening.exec(stdout)?.[1] as string
    const key = await newKey(cli)
    const body = await (await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}` } })).text()
    assert.ok(body.includes(`"petId":${BIG}`), body)
  })
})
