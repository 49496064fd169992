/**
 * Ten instances as one service, end to end: ten `petstore serve` processes (port 0, one process each) over a private
 * three-node Redis Cluster (REDIS_MODE=cluster) and PostgreSQL through a private PgBouncer in transaction mode
 * (DATABASE_POOLER=transaction, three connections per instance, a dozen server connections in all). The test starts
 * the cluster and the pooler itself; with CI=true a missing redis-server or pgbouncer (or PostgreSQL) fails it.
 *
 * One cluster, one pooler, one database and one set of ten instances serve every scenario; the scenarios use keys
 * and pets of their own. In order:
 * 1. a free key gets exactly 60 of 200 concurrent requests spread round-robin over the ten;
 * 2. 100 concurrent writes (PATCHes of distinct pets, adjustments of shared pets) spread over the ten all land, and
 *    the adjustments of each pet form one chain (each answer = the previous answer + its delta); then a write that one
 *    instance acknowledges is in the next GET of every instance;
 * 3. under continuous adjustments across the instances, three of them are killed (SIGKILL): every acknowledged write
 *    is in the store (its Idempotency-Key replays its answer), and every write whose answer was lost, sent again with
 *    its key to a survivor, applies exactly once, so the final stock is the initial stock plus every delta;
 * 4. a key revoked with the CLI is refused (401) by every surviving instance within AUTH_CACHE_TTL_MS of the
 *    revocation (+ a margin for a busy machine);
 * 5. a Redis Cluster node killed (SIGKILL) during a stream of reads and writes across the survivors and started
 *    again: no 5xx and no failed request at all, every write lands, and afterwards every instance decides in Redis
 *    again (/readyz), limits are exact across instances again, and a write is seen by every instance's next GET.
 *
 * Migrations, the data import and the keys go through the pooler (the CLI with the instances' environment); the
 * checks of what landed read PostgreSQL directly as well as through the API. Nothing is left behind: the instances
 * and the pooler are stopped, the database is dropped, and the private cluster (the only place the instances wrote
 * Redis keys) is killed and its directories removed.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { cliFor, EXIT_TIMEOUT_MS, startServe, within, type Cli, type Started } from '../cli/run.js'
import { startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.js'
import { requirePostgres, tempPostgresDatabase } from '../helpers/postgres.js'
import { requireRedisServer, startRedisCluster } from '../helpers/redis-servers.js'
import { awayFromMinuteBoundary } from '../helpers/clock.js'

const INSTANCES = 10
/** The instances' key cache: the bound on how fast a revocation applies. */
const AUTH_CACHE_TTL_MS = 1000
/** What a busy 2-core machine may add to that bound (a lookup in flight at the revocation, a late event loop). */
const REVOCATION_MARGIN_MS = 1000
/** The free plan's default per-minute limit (RATE_LIMIT_FREE is left at its default 60/1000). */
const FREE_PER_MINUTE = 60

const range = (first: number, count: number): number[] => Array.from({ length: count }, (_, i) => first + i)

// The pets of each scenario, imported with these quantities.
const PATCHED = range(2001, 50) // scenario 2: one PATCH each
const SHARED = range(2101, 5) // scenario 2: ten adjustments each
const UNDER_KILL = range(3001, 8) // scenario 3: adjusted while instances die
const UNDER_OUTAGE = range(5001, 4) // scenario 5: adjusted while a Redis node is away
const FRESH = 5101 // scenario 5: PATCHed after the outage, then read on every instance
const INITIAL = new Map<number, number>([
  ...PATCHED.map((id) => [id, 1] as const),
  ...SHARED.map((id) => [id, 1000] as const),
  ...UNDER_KILL.map((id) => [id, 100] as const),
  ...UNDER_OUTAGE.map((id) => [id, 100] as const),
  [FRESH, 7]
])

interface Instance {
  index: number
  base: string
  server: Started
  /** SIGKILLed by the test (scenario 3): errors from it are expected, nothing is sent to it afterwards. */
  killed: boolean
}

interface Answer { status: number, body: string, headers: Headers, sentAt: number, doneAt: number }
/** A request's outcome: an answer, or no answer at all (a refused or reset connection, a timeout). */
type Outcome = Answer | { error: string, sentAt: number }

const answered = (outcome: Outcome): outcome is Answer => 'status' in outcome

async function send (base: string, key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Outcome> {
  const sentAt = performance.now()
  try {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(15_000)
    })
    return { status: res.status, body: await res.text(), headers: res.headers, sentAt, doneAt: performance.now() }
  } catch (error) {
    const cause = (error as { cause?: { code?: string, message?: string } }).cause
    return { error: `${(error as Error).message}${cause === undefined ? '' : ` (${cause.code ?? cause.message ?? ''})`}`, sentAt }
  }
}

const adjust = (base: string, key: string, petId: number, delta: number, idempotencyKey: string): Promise<Outcome> =>
  send(base, key, 'POST', `/v1/inventory/${petId}/adjustments`, { delta, reason: 'arrival' }, { 'idempotency-key': idempotencyKey })

function shown (outcome: Outcome): string {
  return answered(outcome) ? `${outcome.status} ${outcome.body.slice(0, 200)}` : `no answer: ${outcome.error}`
}

/** Runs `work` on every item, at most `limit` at a time, answers in the items' order. */
async function mapLimit<T, R> (items: readonly T[], limit: number, work: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length)
  let next = 0
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await work(items[i] as T, i)
    }
  }))
  return results
}

function tally (statuses: readonly number[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
  return counts
}

const ready = (await requirePostgres('the ten-instance end-to-end test')) && (await requireRedisServer('the ten-instance end-to-end test'))

if (ready) {
  test('ten instances on a Redis Cluster and PostgreSQL through PgBouncer behave as one service', { timeout: 300_000 }, async (t) => {
    const instances: Instance[] = []
    let bouncer: PgBouncer | null = null
    let pool: pg.Pool | null = null
    // Registered first, so it runs first (node:test runs after hooks in order): the instances and the pooler go
    // before the database is dropped and the cluster is killed.
    t.after(async () => {
      await Promise.all(instances.map(async ({ server }) => {
        if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL')
        await within(EXIT_TIMEOUT_MS, server.exited, 'an instance to exit')
      }))
      await bouncer?.stop()
      await pool?.end()
    })

    // --- The cluster, the pooler, the database, the data, the keys, the instances.
    const setupStarted = performance.now()
    const cluster = await startRedisCluster(t.after.bind(t), 3)
    bouncer = await startPgBouncer(t, { poolSize: 12 })
    if (bouncer === null) return
    const database = await tempPostgresDatabase(t)
    const cli: Cli = cliFor(t, {
      DATABASE_URL: bouncer.url(database),
      DATABASE_POOLER: 'transaction',
      DATABASE_POOL_SIZE: '3',
      REDIS_MODE: 'cluster',
      REDIS_URL: cluster.seeds,
      REDIS_KEY_PREFIX: `e2e:${randomUUID()}:`,
      AUTH_CACHE_TTL_MS: String(AUTH_CACHE_TTL_MS),
      BAN_SECONDS: '0'
    })
    const phases: string[] = [`cluster and pooler ${Math.round(performance.now() - setupStarted)} ms`]
    const migrated = await cli.run(['migrate'])
    assert.equal(migrated.code, 0, migrated.stderr)
    const data = cli.file('pets.json', JSON.stringify({
      pets: [...INITIAL].map(([id, quantity]) => ({ id, name: `Pet ${id}`, status: 'available', quantity })),
      orders: []
    }))
    const createKey = async (plan: string, limits: string[] = []): Promise<{ id: string, key: string }> => {
      const res = await cli.run(['keys', 'create', '--plan', plan, '--json', ...limits])
      assert.equal(res.code, 0, res.stderr)
      return JSON.parse(res.stdout) as { id: string, key: string }
    }
    const unlimited = ['--per-minute', '1000000', '--per-day', '100000000']
    // The import and the keys before the instances start, not beside them: on a busy machine ten starting instances
    // can starve a CLI run past its 20 s limit (cli/run.ts).
    const [imported, free, admin, doomed, stream, exact] = await Promise.all([
      cli.run(['import', data]),
      createKey('free'),
      createKey('enterprise', unlimited),
      createKey('enterprise', unlimited),
      createKey('enterprise', unlimited),
      createKey('enterprise', ['--per-minute', '20', '--per-day', '100000'])
    ])
    assert.equal(imported.code, 0, imported.stderr)
    phases.push(`migrate, import and keys ${Math.round(performance.now() - setupStarted)} ms`)
    instances.push(...await Promise.all(range(0, INSTANCES).map(async (index): Promise<Instance> => {
      const { base, server } = await startServe(cli, [], {}, 60_000)
      return { index, base, server, killed: false }
    })))
    assert.equal(new Set(instances.map((i) => i.base)).size, INSTANCES, 'ten instances on ten ports')
    phases.push(`${INSTANCES} instances ${Math.round(performance.now() - setupStarted)} ms`)
    t.diagnostic(`setup: ${phases.join(', then ')}`)

    const survivors = (): Instance[] => instances.filter((i) => !i.killed)
    const direct = new pg.Pool({ connectionString: database, max: 2 })
    direct.on('error', () => {}) // an idle connection ended by the DROP DATABASE of the cleanup
    pool = direct
    /** The quantities of `ids` as PostgreSQL has them (read directly, not through the pooler). */
    const inPostgres = async (ids: readonly number[]): Promise<Map<number, number>> => {
      const { rows } = await direct.query<{ pet_id: string, quantity: number }>('SELECT pet_id::text, quantity FROM inventory WHERE pet_id = ANY($1::bigint[])', [ids])
      return new Map(rows.map((row) => [Number(row.pet_id), row.quantity]))
    }
    /** The quantities of `ids` in the listing one instance answers. */
    const through = async (instance: Instance, ids: readonly number[]): Promise<Map<number, number>> => {
      const outcome = await send(instance.base, admin.key, 'GET', '/v1/inventory')
      assert.ok(answered(outcome) && outcome.status === 200, `GET /v1/inventory on instance ${instance.index}: ${shown(outcome)}`)
      const wanted = new Set(ids)
      const items = JSON.parse(outcome.body) as Array<{ petId: number, quantity: number }>
      return new Map(items.filter((item) => wanted.has(item.petId)).map((item) => [item.petId, item.quantity]))
    }
    /** Every live instance's listing and PostgreSQL hold `expected`. */
    const assertStock = async (expected: Map<number, number>, what: string): Promise<void> => {
      const ids = [...expected.keys()]
      assert.deepEqual(await inPostgres(ids), expected, `${what}: PostgreSQL`)
      for (const instance of survivors()) assert.deepEqual(await through(instance, ids), expected, `${what}: the listing of instance ${instance.index}`)
    }
    const ledgerRows = async (ids: readonly number[]): Promise<number> => {
      const { rows } = await direct.query<{ n: number }>("SELECT count(*)::int AS n FROM stock_ledger WHERE pet_id = ANY($1::bigint[]) AND reason <> 'import'", [ids])
      return rows[0]?.n ?? -1
    }

    await t.test('1. a free key gets exactly 60 of 200 concurrent requests spread over the ten instances', async (st) => {
      await awayFromMinuteBoundary()
      const started = performance.now()
      const outcomes = await Promise.all(range(0, 200).map((i) => send((instances[i % INSTANCES] as Instance).base, free.key, 'GET', '/v1/inventory')))
      st.diagnostic(`200 GETs over ${INSTANCES} instances: ${Math.round(performance.now() - started)} ms`)
      const failed = outcomes.filter((o) => !answered(o))
      assert.deepEqual(failed, [], 'every request is answered')
      const answers = outcomes.filter(answered)
      assert.deepEqual(tally(answers.map((a) => a.status)), { 200: FREE_PER_MINUTE, 429: 200 - FREE_PER_MINUTE })
      // One count in Redis for all: the passing requests saw each remaining count from 59 down to 0 exactly once.
      const remaining = answers.filter((a) => a.status === 200).map((a) => Number(a.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b)
      assert.deepEqual(remaining, range(0, FREE_PER_MINUTE))
      for (const refused of answers.filter((a) => a.status === 429)) {
        assert.equal((JSON.parse(refused.body) as { code: string }).code, 'rate_limited')
        assert.equal(refused.headers.get('x-ratelimit-remaining'), '0')
      }
    })

    await t.test('2. 100 concurrent PATCHes and adjustments spread over the ten instances all land', async (st) => {
      interface Write { petId: number, instance: Instance, quantity?: number, delta?: number }
      const patches: Write[] = PATCHED.map((petId, i) => ({ petId, instance: instances[i % INSTANCES] as Instance, quantity: 500 + i }))
      // Each shared pet gets one adjustment on each instance, deltas 1 to 10 (positive: each answer is a new high).
      const adjustments: Write[] = range(0, 50).map((j) => ({
        petId: SHARED[j % SHARED.length] as number, instance: instances[Math.floor(j / SHARED.length) % INSTANCES] as Instance, delta: 1 + Math.floor(j / SHARED.length)
      }))
      const writes = patches.flatMap((patch, i) => [patch, adjustments[i] as Write])
      const started = performance.now()
      const outcomes = await Promise.all(writes.map((w) => w.delta === undefined
        ? send(w.instance.base, admin.key, 'PATCH', `/v1/inventory/${w.petId}`, { quantity: w.quantity })
        : adjust(w.instance.base, admin.key, w.petId, w.delta, `s2-${randomUUID()}`)))
      st.diagnostic(`100 writes over ${INSTANCES} instances: ${Math.round(performance.now() - started)} ms`)
      const refused = outcomes.map((o, i) => [writes[i], o] as const).filter(([, o]) => !answered(o) || o.status !== 200)
      assert.deepEqual(refused.map(([w, o]) => `pet ${w?.petId} on instance ${w?.instance.index}: ${shown(o)}`), [], 'every write is acknowledged')

      const expected = new Map<number, number>()
      for (const [i, w] of writes.entries()) {
        const entry = JSON.parse((outcomes[i] as Answer).body) as { petId: number, quantity: number }
        assert.equal(entry.petId, w.petId)
        if (w.quantity !== undefined) {
          assert.equal(entry.quantity, w.quantity)
          expected.set(w.petId, w.quantity)
        }
      }
      // Adjustments are atomic: ordered by the quantity each answered, every answer is the one before plus its delta.
      for (const petId of SHARED) {
        const chain = writes.map((w, i) => ({ w, quantity: (JSON.parse((outcomes[i] as Answer).body) as { quantity: number }).quantity }))
          .filter(({ w }) => w.petId === petId && w.delta !== undefined).sort((a, b) => a.quantity - b.quantity)
        let previous = INITIAL.get(petId) as number
        for (const { w, quantity } of chain) {
          assert.equal(quantity, previous + (w.delta as number), `pet ${petId}: an adjustment of ${w.delta} answered ${quantity} after ${previous}`)
          previous = quantity
        }
        assert.equal(previous, (INITIAL.get(petId) as number) + 55)
        expected.set(petId, previous)
      }
      await assertStock(expected, 'after 100 concurrent writes')
      assert.equal(await ledgerRows([...PATCHED, ...SHARED]), 100, 'one ledger row per write')
      // Each instance has just read its listing afresh (and none has a write of its own pending): a write that one of
      // them acknowledges is in the very next GET of every other one.
      const petId = PATCHED[0] as number
      for (const writer of [instances[0], instances[7]] as Instance[]) {
        const quantity = 9000 + writer.index
        const patched = await send(writer.base, admin.key, 'PATCH', `/v1/inventory/${petId}`, { quantity })
        assert.ok(answered(patched) && patched.status === 200, shown(patched))
        const seen = await Promise.all(instances.map(async (instance) => (await through(instance, [petId])).get(petId)))
        assert.deepEqual(seen, instances.map(() => quantity), `a PATCH acknowledged by instance ${writer.index}, read on every instance`)
      }
    })

    await t.test('3. SIGKILL of three instances during continuous writes loses no acknowledged write', async (st) => {
      interface Write { key: string, petId: number, delta: number, instance: Instance, outcome?: Outcome }
      const victims = [2, 5, 8].map((i) => instances[i] as Instance)
      let rotation = [...instances]
      let stopped = false
      let turn = 0
      const writes: Write[] = []
      const worker = async (): Promise<void> => {
        while (!stopped) {
          const instance = rotation[turn++ % rotation.length] as Instance
          const write: Write = {
            key: `s3-${randomUUID()}`, petId: UNDER_KILL[Math.floor(Math.random() * UNDER_KILL.length)] as number, delta: 1 + Math.floor(Math.random() * 9), instance
          }
          writes.push(write)
          write.outcome = await adjust(instance.base, admin.key, write.petId, write.delta, write.key)
          // As a load balancer would: an instance that fails a request is taken out of the rotation.
          if (!answered(write.outcome) && instance.killed) rotation = rotation.filter((i) => i !== instance)
        }
      }
      const started = performance.now()
      const load = Promise.all(range(0, 24).map(worker))
      for (const victim of victims) {
        await sleep(700)
        victim.killed = true
        victim.server.child.kill('SIGKILL')
      }
      await sleep(1200)
      stopped = true
      await load
      await Promise.all(victims.map((victim) => within(EXIT_TIMEOUT_MS, victim.server.exited, `instance ${victim.index} to die`)))
      st.diagnostic(`${writes.length} adjustments in ${Math.round(performance.now() - started)} ms, 3 instances killed`)

      const acknowledged = writes.filter((w) => answered(w.outcome as Outcome) && (w.outcome as Answer).status === 200)
      const lost = writes.filter((w) => !answered(w.outcome as Outcome))
      const other = writes.filter((w) => answered(w.outcome as Outcome) && (w.outcome as Answer).status !== 200)
      assert.deepEqual(other.map((w) => `instance ${w.instance.index}: ${shown(w.outcome as Outcome)}`), [], 'every answer is 200 (no 5xx)')
      assert.deepEqual(lost.filter((w) => !w.instance.killed).map((w) => `instance ${w.instance.index}: ${shown(w.outcome as Outcome)}`), [],
        'only the killed instances leave requests unanswered')
      for (const victim of victims) assert.ok(lost.some((w) => w.instance === victim), `a write to instance ${victim.index} lost its answer`)
      assert.ok(acknowledged.length > 100, `enough load: ${acknowledged.length} acknowledged`)

      // Every acknowledged write is in the store: sent again with its key to a survivor, its first answer is replayed.
      const alive = survivors()
      const replays = await mapLimit(acknowledged, 16, (w, i) => adjust((alive[i % alive.length] as Instance).base, admin.key, w.petId, w.delta, w.key))
      for (const [i, replay] of replays.entries()) {
        const w = acknowledged[i] as Write
        assert.ok(answered(replay) && replay.status === 200 && replay.headers.get('idempotent-replayed') === 'true',
          `acknowledged write ${w.key} (instance ${w.instance.index}) sent again: ${shown(replay)}`)
        assert.equal(replay.body, (w.outcome as Answer).body, `acknowledged write ${w.key}: the replay is its first answer`)
      }
      // A write whose answer was lost may or may not have landed; sent again with its key it lands exactly once.
      let replayed = 0
      await mapLimit(lost, 8, async (w, i) => {
        for (let attempt = 0; ; attempt++) {
          const again = await adjust((alive[i % alive.length] as Instance).base, admin.key, w.petId, w.delta, w.key)
          if (answered(again) && again.status === 200) {
            if (again.headers.get('idempotent-replayed') === 'true') replayed++
            return
          }
          // The dead instance's transaction may not have been rolled back yet: the key is still in flight.
          assert.ok(attempt < 50 && answered(again) && again.status === 409 && again.body.includes('idempotency_key_in_flight'),
            `unacknowledged write ${w.key} sent again: ${shown(again)}`)
          await sleep(200)
        }
      })
      st.diagnostic(`${acknowledged.length} acknowledged (all replayed), ${lost.length} unanswered: ${replayed} had landed, ${lost.length - replayed} applied on the retry`)

      const expected = new Map(UNDER_KILL.map((id) => [id, INITIAL.get(id) as number]))
      for (const w of writes) expected.set(w.petId, (expected.get(w.petId) as number) + w.delta)
      await assertStock(expected, 'after the kills and the retries')
      assert.equal(await ledgerRows(UNDER_KILL), writes.length, 'one ledger row per write: none lost, none doubled')
      const { rows } = await direct.query<{ n: number }>("SELECT count(*)::int AS n FROM idempotency_keys WHERE idempotency_key LIKE 's3-%'")
      assert.equal(rows[0]?.n, writes.length, 'one idempotency record per write')
    })

    await t.test(`4. a revocation reaches every surviving instance within AUTH_CACHE_TTL_MS (${AUTH_CACHE_TTL_MS} ms)`, async (st) => {
      const alive = survivors()
      // Each instance is asked every 50 ms from before the revocation until it refuses the key, so each holds a lookup
      // of the key as fresh as it can be when the revocation commits. (Not longer: a refused key's requests count
      // against the client address, 60 a minute, like any request without a valid key.)
      let revokedAt = Infinity
      const bound = (): number => revokedAt + AUTH_CACHE_TTL_MS + REVOCATION_MARGIN_MS
      const seen = new Map<Instance, Outcome[]>(alive.map((i) => [i, []]))
      const pollers = alive.map(async (instance) => {
        const outcomes = seen.get(instance) as Outcome[]
        for (;;) {
          const outcome = await send(instance.base, doomed.key, 'GET', `/v1/inventory/${FRESH}`)
          outcomes.push(outcome)
          if (!answered(outcome) || outcome.status !== 200 || outcome.sentAt > bound() + 1000) return
          await sleep(50)
        }
      })
      await sleep(AUTH_CACHE_TTL_MS + 200)
      const revokeStarted = performance.now()
      const revoked = await cli.run(['keys', 'revoke', doomed.id])
      revokedAt = performance.now() // the revocation committed before the command exited
      await Promise.all(pollers)
      assert.equal(revoked.code, 0, revoked.stderr)
      // Once refused, refused for good: asked again after the bound, every instance refuses it.
      await sleep(Math.max(0, bound() - performance.now()))
      const after = await Promise.all(alive.map((instance) => send(instance.base, doomed.key, 'GET', `/v1/inventory/${FRESH}`)))

      const lateness: number[] = []
      for (const [instance, outcomes] of seen) {
        const accepted = outcomes.slice(0, -1)
        const refusal = outcomes.at(-1) as Outcome
        assert.ok(accepted.every((o) => answered(o) && o.status === 200), `instance ${instance.index} accepted the key until it refused it`)
        assert.ok(accepted.some((o) => (o as Answer).doneAt < revokeStarted), `instance ${instance.index} accepted the key before the revocation`)
        assert.ok(answered(refusal) && refusal.status === 401, `instance ${instance.index} refuses the key: ${shown(refusal)}`)
        assert.match(refusal.body, /"code":"unauthorized"/)
        const lastAccepted = accepted.at(-1) as Answer
        const late = Math.max(0, lastAccepted.sentAt - revokedAt)
        lateness.push(late)
        assert.ok(late <= AUTH_CACHE_TTL_MS + REVOCATION_MARGIN_MS,
          `instance ${instance.index} still accepted a request sent ${Math.round(late)} ms after the revocation (bound ${AUTH_CACHE_TTL_MS} + ${REVOCATION_MARGIN_MS} ms)`)
        const again = after[alive.indexOf(instance)] as Outcome
        assert.ok(answered(again) && again.status === 401, `instance ${instance.index} after the bound: ${shown(again)}`)
      }
      st.diagnostic(`revoke command: ${Math.round(revokedAt - revokeStarted)} ms; each instance's last acceptance, sent after the command exited: ${lateness.map(Math.round).join(', ')} ms`)
    })

    await t.test('5. a Redis Cluster node killed and restarted during requests across the instances: no 5xx, then back on Redis', async (st) => {
      const alive = survivors()
      const readers = [admin.key, stream.key, free.key] // free: mostly 429 by now, which is fine
      const outcomes: Array<{ instance: Instance, write: boolean, outcome: Outcome }> = []
      const limiters = new Map<string, number>()
      const deltas = new Map(UNDER_OUTAGE.map((id) => [id, 0]))
      let stopped = false
      let turn = 0
      const worker = async (w: number): Promise<void> => {
        for (let n = 0; !stopped; n++) {
          const instance = alive[turn++ % alive.length] as Instance
          if (n % 4 === 3) {
            const petId = UNDER_OUTAGE[(w + n) % UNDER_OUTAGE.length] as number
            const outcome = await adjust(instance.base, stream.key, petId, 1, `s5-${randomUUID()}`)
            if (answered(outcome) && outcome.status === 200) deltas.set(petId, (deltas.get(petId) as number) + 1)
            outcomes.push({ instance, write: true, outcome })
          } else {
            outcomes.push({ instance, write: false, outcome: await send(instance.base, readers[(w + n) % readers.length] as string, 'GET', '/v1/inventory') })
          }
        }
      }
      const readiness = async (): Promise<void> => {
        while (!stopped) {
          for (const instance of alive) {
            const res = await fetch(`${instance.base}/readyz`, { signal: AbortSignal.timeout(5000) }).then(async (r) => r.status === 200 ? (await r.json() as { rateLimiter: string }).rateLimiter : `status ${r.status}`, (e: Error) => e.message)
            limiters.set(res, (limiters.get(res) ?? 0) + 1)
          }
          await sleep(200)
        }
      }
      const started = performance.now()
      const load = Promise.all([...range(0, 12).map(worker), readiness()])
      await sleep(1000)
      const victim = cluster.nodes[1]
      assert.ok(victim !== undefined)
      await victim.kill()
      const killedAt = performance.now()
      // Until the instances notice (a failed command, or CLUSTERDOWN once the others mark the node failed).
      while ([...limiters.keys()].every((limiter) => limiter === 'redis') && performance.now() - killedAt < 15_000) await sleep(100)
      await sleep(1500)
      await victim.restart()
      await cluster.healthy()
      const healthyAt = performance.now()
      await sleep(1000)
      stopped = true
      await load
      st.diagnostic(`${outcomes.length} requests in ${Math.round(performance.now() - started)} ms; node down for ${Math.round(healthyAt - killedAt)} ms ` +
        `(until the cluster was healthy again); /readyz said ${JSON.stringify(Object.fromEntries(limiters))}`)

      // Shown, not asserted: how long requests waited while the node was away (every one was answered within the
      // 15 s a request may take here, or it would have failed below).
      const during = outcomes.filter(({ outcome }) => answered(outcome) && outcome.sentAt > killedAt && outcome.sentAt < healthyAt)
      const slowest = (write: boolean): number => Math.max(0, ...during.filter((o) => o.write === write).map(({ outcome }) => Math.round((outcome as Answer).doneAt - outcome.sentAt)))
      st.diagnostic(`while the node was away: ${during.length} requests, the slowest read ${slowest(false)} ms, the slowest write ${slowest(true)} ms`)
      const bad = outcomes.filter(({ write, outcome }) => !answered(outcome) || !(write ? [200] : [200, 429]).includes(outcome.status))
      assert.deepEqual(bad.map(({ instance, write, outcome }) => `${write ? 'write' : 'GET'} on instance ${instance.index}: ${shown(outcome)}`).slice(0, 20), [],
        `every read answers 200 or 429 and every write 200, with no 5xx and no failed request (${bad.length} did not; the first 20 shown)`)
      assert.ok(limiters.has('in-process-fallback'), 'the instances noticed the outage and counted in process meanwhile (/readyz)')

      // Back on Redis, every instance by itself (a request lets it probe).
      const deadline = performance.now() + 15_000
      for (const instance of alive) {
        let limiter = ''
        while (limiter !== 'redis' && performance.now() < deadline) {
          await send(instance.base, admin.key, 'GET', `/v1/inventory/${FRESH}`)
          limiter = (await (await fetch(`${instance.base}/readyz`, { signal: AbortSignal.timeout(5000) })).json() as { rateLimiter: string }).rateLimiter
          if (limiter !== 'redis') await sleep(200)
        }
        assert.equal(limiter, 'redis', `instance ${instance.index} decides in Redis again`)
      }
      st.diagnostic(`every instance on Redis again ${Math.round(performance.now() - healthyAt)} ms after the cluster was healthy`)

      // Every write during the outage landed.
      await assertStock(new Map(UNDER_OUTAGE.map((id) => [id, (INITIAL.get(id) as number) + (deltas.get(id) as number)])), 'after the Redis outage')
      // A write acknowledged by one instance is seen by the next GET on every instance.
      const patched = await send((alive[0] as Instance).base, admin.key, 'PATCH', `/v1/inventory/${FRESH}`, { quantity: 4242 })
      assert.ok(answered(patched) && patched.status === 200, shown(patched))
      for (const instance of alive) assert.equal((await through(instance, [FRESH])).get(FRESH), 4242, `instance ${instance.index} sees the write`)
      // And limits are exact across the instances again: 20 of 40 for a key of 20 a minute.
      await awayFromMinuteBoundary()
      const burst = await Promise.all(range(0, 40).map((i) => send((alive[i % alive.length] as Instance).base, exact.key, 'GET', '/v1/inventory')))
      assert.deepEqual(tally(burst.map((o) => answered(o) ? o.status : 0)), { 200: 20, 429: 20 })
    })
  })
}
