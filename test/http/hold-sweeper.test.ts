/**
 * The holds' sweeper (src/http/hold-sweeper.ts): it records expired holds and purges old ended ones, and a store that
 * fails or may only be read never stops it or the app: it logs (or, read-only, keeps quiet) and tries again.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import { importData } from '../../src/domain/import.js'
import { newHoldId } from '../../src/domain/selling.js'
import { StoreReadOnlyError, StoreUnavailableError } from '../../src/errors.js'
import { sweepHolds, sweepHoldsEvery } from '../../src/http/hold-sweeper.js'
import type { Hold } from '../../src/model.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'

const START = Date.parse('2026-11-27T12:00:00.000Z')
const DAY = 86_400_000

async function stocked (t: TestContext): Promise<SqliteStore> {
  const store = new SqliteStore(':memory:')
  await store.schema.migrate()
  t.after(() => store.close())
  await importData(store, { pets: [1n, 2n, 3n].map((id) => ({ id, name: `pet ${id}`, status: 'available' as const, quantity: 10 })), orders: [] },
    { at: new Date(START - 60_000) })
  return store
}

/** A one-unit hold of `petId`; a placement records the lapsed holds of its pets, so holds meant to lapse unrecorded each have their own. */
async function hold (store: SqliteStore, at: number, expiresInMs: number, petId = 1n): Promise<string> {
  const id = newHoldId()
  const result = await store.selling.placeHold({
    id, lines: [{ petId, quantity: 1 }], reference: null, expiresAt: new Date(at + expiresInMs), caps: { activeHolds: 100, heldUnits: 100 },
    quotaId: 'q', keyId: null, requestId: null, at: new Date(at)
  })
  assert.equal(result.status, 'placed')
  return id
}

/** A logger that keeps its warnings. */
function logs () {
  const warnings: string[] = []
  const stream = { write: (line: string) => { const entry = JSON.parse(line) as { level: number, msg: string }; if (entry.level === 40) warnings.push(entry.msg) } }
  return { warnings, logger: { level: 'warn', stream } }
}

describe('the holds sweeper', () => {
  test('when holds have expired, then a sweep records them as expired, and purges ended holds past the retention', async (t) => {
    const store = await stocked(t)
    const old = await hold(store, START - 40 * DAY, 60_000, 1n)
    const expired = await hold(store, START - 120_000, 60_000, 2n)
    const active = await hold(store, START, 60_000, 3n)
    const first = await sweepHolds({ store, clock: () => START, retentionDays: 30, batch: 1 })
    // The first hold ended when it expired, 40 days ago: recorded, then purged in the same sweep.
    assert.deepEqual(first, { expired: 2, purged: 1 })
    assert.equal(await store.selling.getHold(old), null)
    const recorded = await store.selling.getHold(expired) as Hold
    assert.equal(recorded.state, 'expired')
    assert.equal((await store.selling.getHold(active))?.state, 'active')
    assert.deepEqual(await sweepHolds({ store, clock: () => START + 29 * DAY, retentionDays: 30 }), { expired: 1, purged: 0 })
    assert.deepEqual(await sweepHolds({ store, clock: () => START + 31 * DAY, retentionDays: 30 }), { expired: 0, purged: 2 })
    assert.equal(await store.selling.getHold(expired), null)
  })

  test('when the store is unreachable, then the sweep is logged and tried again at the next tick, and the app keeps running', async (t) => {
    const store = await stocked(t)
    const id = await hold(store, START - 120_000, 60_000)
    let failures = 2
    const flaky = {
      selling: {
        expireHolds: async (at: Date, limit: number) => {
          if (failures-- > 0) throw new StoreUnavailableError('database unreachable')
          return await store.selling.expireHolds(at, limit)
        },
        purgeHolds: async (before: Date, limit: number) => await store.selling.purgeHolds(before, limit)
      }
    }
    const { warnings, logger } = logs()
    const app = Fastify({ logger })
    sweepHoldsEvery(app, { store: flaky, clock: () => START, retentionDays: 30, intervalMs: 10 })
    await app.ready()
    t.after(() => app.close())
    for (let i = 0; i < 100 && (await store.selling.getHold(id))?.state !== 'expired'; i++) await sleep(10)
    assert.equal((await store.selling.getHold(id))?.state, 'expired')
    assert.equal(warnings.filter((w) => /could not sweep expired holds/.test(w)).length, 2)
  })

  test('when the store may only be read, then the sweeper keeps quiet and the app closes cleanly', async () => {
    let calls = 0
    const readOnly = {
      selling: {
        expireHolds: async (): Promise<Hold[]> => { calls++; throw new StoreReadOnlyError('schema is newer') },
        purgeHolds: async (): Promise<number> => { throw new StoreReadOnlyError('schema is newer') }
      }
    }
    const { warnings, logger } = logs()
    const app = Fastify({ logger })
    sweepHoldsEvery(app, { store: readOnly, clock: () => START, retentionDays: 30, intervalMs: 10 })
    await app.ready()
    await sleep(50)
    await app.close()
    assert.ok(calls >= 2, `swept ${calls} times`)
    assert.deepEqual(warnings, [])
    const after = calls
    await sleep(30)
    assert.equal(calls, after)
  })
})
