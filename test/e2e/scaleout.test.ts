/**
 * Scale-out, end to end: two real instances (child processes on port 0) on one PostgreSQL database and one
 * Redis behave as one service, and losing one loses nothing.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli, type Started } from '../cli/run.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { REDIS_URL, redisKeyPrefix, requireRedis } from '../ratelimit/redis-env.js'
import { awayFromMinuteBoundary } from '../helpers/clock.js'

const DEMO = fileURLToPath(new URL('../../data/demo.json', import.meta.url))
const STOCKED = ['1', '2', '3', '4', '5', '9007199254740993'] // the demo pets with a stock entry

interface Instance { base: string, server: Started }

/** Starts `petstore serve` on port 0 and waits until it answers (startServe reads the port from its start line). */
async function startInstance (cli: Cli): Promise<Instance> {
  const { base, server } = await startServe(cli)
  return { base, server }
}

async function key (cli: Cli, plan: string, limits: string[] = []): Promise<string> {
  const res = await cli.run(['keys', 'create', '--plan', plan, ...limits])
  assert.equal(res.code, 0, res.stderr)
  return res.stdout.trim()
}

function call (base: string, key: string, path = '/v1/inventory', init: RequestInit = {}): Promise<Response> {
  return fetch(base + path, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } })
}

const patch = (base: string, key: string, petId: string, quantity: number) =>
  call(base, key, `/v1/inventory/${petId}`, { method: 'PATCH', body: JSON.stringify({ quantity }) })

async function setup (t: TestContext): Promise<{ cli: Cli, a: Instance, b: Instance }> {
  const REDIS_KEY_PREFIX = redisKeyPrefix(t)
  const cli = cliFor(t, { DATABASE_URL: await tempPostgresDatabase(t), REDIS_URL, REDIS_KEY_PREFIX, AUTH_CACHE_TTL_MS: '500', BAN_SECONDS: '0' })
  assert.equal((await cli.run(['migrate'])).code, 0)
  assert.equal((await cli.run(['import', DEMO])).code, 0)
  const [a, b] = await Promise.all([startInstance(cli), startInstance(cli)])
  return { cli, a: a as Instance, b: b as Instance }
}

const ready = (await requirePostgres('the scale-out end-to-end test')) && (await requireRedis('the scale-out end-to-end test'))

if (ready) {
  describe('two instances on PostgreSQL + Redis', () => {
    test('when used together, then they behave as one service and losing one loses nothing', async (t) => {
      const { cli, a, b } = await setup(t)
      const admin = await key(cli, 'enterprise', ['--per-minute', '100000', '--per-day', '1000000'])

      // The same inventory from both, ids above 2^53 exact.
      const [fromA, fromB] = await Promise.all([call(a.base, admin).then((r) => r.text()), call(b.base, admin).then((r) => r.text())])
      assert.equal(fromA, fromB)
      assert.ok(fromA.includes('"petId":9007199254740993'))

      // A PATCH on one is seen on the other at once.
      assert.equal((await patch(a.base, admin, '9007199254740993', 77)).status, 200)
      const seen = await (await call(b.base, admin)).json() as Array<{ petId: number, quantity: number }>
      assert.equal(seen.find((item) => item.quantity === 77)?.quantity, 77)

      // Exactly 60 of 90 requests pass for a free key, spread over both instances.
      const free = await key(cli, 'free')
      await awayFromMinuteBoundary(50)
      const statuses = await Promise.all(Array.from({ length: 90 }, (_, i) => call(i % 2 === 0 ? a.base : b.base, free).then((r) => r.status)))
      assert.equal(statuses.filter((s) => s === 200).length, 60)
      assert.equal(statuses.filter((s) => s === 429).length, 30)

      // Concurrent PATCHes on both all land: distinct pets get their own values...
      const writes = STOCKED.map((petId, i) => patch(i % 2 === 0 ? a.base : b.base, admin, petId, 1000 + i))
      assert.deepEqual((await Promise.all(writes)).map((r) => r.status), STOCKED.map(() => 200))
      // ...and many writes to one pet leave one of the written values, the same on both instances.
      const racing = Array.from({ length: 40 }, (_, i) => patch(i % 2 === 0 ? a.base : b.base, admin, '1', i))
      assert.ok((await Promise.all(racing)).every((r) => r.status === 200))
      const [onA, onB] = await Promise.all([a, b].map(async ({ base }) => await (await call(base, admin)).json() as Array<{ petId: number, quantity: number }>))
      assert.deepEqual(onA, onB)
      const one = onA?.find((item) => item.petId === 1)?.quantity
      assert.ok(one !== undefined && one >= 0 && one < 40)
      assert.deepEqual(onA?.filter((item) => item.petId !== 1).map((item) => item.quantity), [1001, 1002, 1003, 1004, 1005])

      // A revocation takes effect on every instance within the auth cache TTL (500 ms here).
      const doomed = await key(cli, 'pro')
      assert.equal((await call(a.base, doomed)).status, 200)
      assert.equal((await call(b.base, doomed)).status, 200)
      const list = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as Array<{ id: string, plan: string }>
      assert.equal((await cli.run(['keys', 'revoke', list.find((k) => k.plan === 'pro')!.id])).code, 0)
      await sleep(700)
      assert.deepEqual([(await call(a.base, doomed)).status, (await call(b.base, doomed)).status], [401, 401])

      // Killing one instance (no goodbye) leaves the other serving every acknowledged write.
      a.server.child.kill('SIGKILL')
      await within(EXIT_TIMEOUT_MS, a.server.exited, 'instance A to die')
      const after = await (await call(b.base, admin)).json() as Array<{ petId: number, quantity: number }>
      assert.deepEqual(after, onB)
      b.server.child.kill('SIGTERM')
      assert.equal((await within(EXIT_TIMEOUT_MS, b.server.exited, 'instance B to stop')).code, 0)
    })
  })
}
