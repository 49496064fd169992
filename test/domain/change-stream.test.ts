/**
 * The rules of the change stream, without HTTP: one head query per poll however many follow, a follower that replays
 * and then hears of each new change once, cursors checked before anything starts, and registrations bounded per quota
 * (in the store) and per instance, renewed while open and lapsing when not.
 */
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitFor } from '../helpers/wait.js'
import { describe, test, type TestContext } from 'node:test'
import { FeedWatch, followChanges, REGISTRATION_PERIODS, StreamRegistry, streamStart } from '../../src/domain/change-stream.js'
import { InvalidCursorError } from '../../src/domain/cursor.js'
import { CursorExpiredError, feedCursor, type EntryView } from '../../src/domain/feed.js'
import { importData } from '../../src/domain/import.js'
import type { FeedChange, FeedHistory, FeedPlace, FeedPosition, StockReads, StoreEpoch } from '../../src/store/stock/types.js'
import type { Store } from '../../src/store/store.js'
import { pet, tempStore } from '../helpers/app.js'

/** The only epoch of headStore's history. */
const EPOCH = '0123456789abcdef'

/** A store whose head the test moves, counting the reads; its history has one epoch, from the start. */
function headStore (initial: Omit<FeedPlace, 'epoch'> | null = null) {
  const state: { head: FeedPlace | null, reads: number, fail: boolean } = { head: initial === null ? null : { ...initial, epoch: EPOCH }, reads: 0, fail: false }
  const store = {
    stock: {
      feedHead: async () => {
        state.reads++
        if (state.fail) throw new Error('store down')
        return state.head
      },
      feedHistory: async (): Promise<FeedHistory> => ({
        epochs: [{ epoch: EPOCH, after: { order: 0n, id: 0n }, startedAt: new Date(0), reason: 'created' }],
        head: state.head === null ? null : { order: state.head.order, id: state.head.id }
      })
    }
  }
  return { store, state }
}

/** Resolves once `check` holds, polling every few ms; fails after a deadline generous enough for a loaded machine. */
async function until (check: () => boolean): Promise<void> {
  await waitFor('condition', check, { intervalMs: 5 })
}

describe('FeedWatch', () => {
  test('when several listen, then one head read per poll tells them all, only when the head moved, and nothing is read once they leave', async () => {
    const { store, state } = headStore({ order: 1n, id: 1n })
    const watch = new FeedWatch({ store, pollMs: 20 })
    const heard = [0, 0, 0]
    const leave = heard.map((_, i) => watch.subscribe(() => { heard[i]!++ }))
    // The first read always tells: a listener may have read the feed just before it.
    await until(() => heard.every((n) => n === 1))
    // It keeps polling: wait for three more reads (a loaded machine runs the 20 ms timer late, never early), then
    // compare the reads with the polls the time taken allowed.
    const reads = state.reads
    const since = performance.now()
    await until(() => state.reads >= reads + 3)
    const polls = Math.ceil((performance.now() - since) / 20) + 1
    assert.deepEqual(heard, [1, 1, 1], 'an unchanged head tells no one')
    assert.ok(state.reads - reads <= polls, `one read per poll for all listeners: ${state.reads - reads} reads in at most ${polls} polls`)
    state.head = { order: 2n, id: 5n, epoch: EPOCH }
    await until(() => heard.every((n) => n === 2))
    for (const off of leave) off()
    await sleep(40)
    const after = state.reads
    await sleep(100)
    assert.equal(state.reads, after, 'no listener, no polling')
    watch.close()
  })

  test('when a change is committed on this instance, then a nudge tells the listeners at once', async () => {
    const { store } = headStore()
    const watch = new FeedWatch({ store, pollMs: 60_000 })
    let heard = 0
    const off = watch.subscribe(() => { heard++ })
    watch.nudge()
    assert.equal(heard, 1)
    off()
    watch.nudge()
    assert.equal(heard, 1, 'nobody left to tell')
    watch.close()
  })

  test('when the head cannot be read, then the error is reported and polling goes on', async () => {
    const { store, state } = headStore({ order: 1n, id: 1n })
    state.fail = true
    const errors: unknown[] = []
    const watch = new FeedWatch({ store, pollMs: 10, onError: (error) => { errors.push(error) } })
    let heard = 0
    const off = watch.subscribe(() => { heard++ })
    await until(() => errors.length >= 2)
    state.fail = false
    await until(() => heard === 1)
    off()
    watch.close()
  })
})

describe('streamStart', () => {
  test('when a cursor is given, then it is checked; without one, the stream starts at the head now (or the start of an empty feed)', async () => {
    const { store } = headStore({ order: 3n, id: 7n })
    assert.equal((await streamStart(store, null)).after, feedCursor({ order: 3n, id: 7n, epoch: EPOCH }))
    assert.equal((await streamStart(headStore(null).store, null)).after, null)
    const given = feedCursor({ order: 1n, id: 2n, epoch: EPOCH })
    assert.equal((await streamStart(store, given)).after, given)
    for (const bad of ['nonsense', Buffer.from('o1:5').toString('base64url'), Buffer.from('f1:-1.0').toString('base64url'), Buffer.from('f1:1.2.3').toString('base64url')]) {
      await assert.rejects(streamStart(store, bad), InvalidCursorError, bad)
    }
  })
})

describe('followChanges', () => {
  test('when following from a cursor, then what came after it comes in pages, then each new change once, and abort ends the wait', async (t) => {
    const store = await tempStore(t)
    await importData(store, { pets: [1, 2, 3, 4, 5].map((id) => pet(id, { quantity: id })), orders: [] })
    const first = (await store.stock.listChanges(null, 1))[0]
    assert.ok(first !== undefined)
    const watch = new FeedWatch({ store, pollMs: 10 })
    t.after(() => { watch.close() })
    const stop = new AbortController()
    const follow = followChanges(store, watch, { after: feedCursor({ ...first.position, epoch: first.epoch }), keyId: null, pageSize: 2, signal: stop.signal })
    const pages: EntryView[][] = []
    const reading = (async () => {
      for await (const page of follow) pages.push(page)
    })()
    await until(() => pages.flat().length === 4)
    assert.deepEqual(pages.map((page) => page.map((c) => c.quantity)), [[2, 3], [4, 5]], 'pages of at most pageSize, none empty')
    await importData(store, { pets: [pet(1, { quantity: 10 })], orders: [] })
    await until(() => pages.flat().length === 5)
    await importData(store, { pets: [pet(2, { quantity: 20 }), pet(3, { quantity: 30 })], orders: [] })
    await until(() => pages.flat().length === 7)
    await sleep(50)
    assert.deepEqual(pages.flat().map((c) => c.quantity), [2, 3, 4, 5, 10, 20, 30], 'every change once, in order')
    assert.equal(watch.listeners, 1)
    stop.abort()
    await reading
    assert.equal(watch.listeners, 0, 'it stops listening when it ends')
  })

  test('when the consumer does not ask for more, then the feed is not read', async (t) => {
    const store = await tempStore(t)
    await importData(store, { pets: Array.from({ length: 10 }, (_, i) => pet(i + 1)), orders: [] })
    let reads = 0
    const counted = {
      stock: {
        listChanges: async (...args: Parameters<StockReads['listChanges']>) => { reads++; return await store.stock.listChanges(...args) },
        feedHistory: async () => await store.stock.feedHistory()
      }
    }
    const watch = new FeedWatch({ store, pollMs: 10 })
    t.after(() => { watch.close() })
    const stop = new AbortController()
    const follow = followChanges(counted, watch, { after: null, keyId: null, pageSize: 2, signal: stop.signal })
    assert.equal((await follow.next()).value?.length, 2)
    await sleep(50)
    assert.equal(reads, 1, 'one page read, one page handed out')
    stop.abort()
    await follow.return()
  })
})

/** A feed the test rewrites at will, as a failover to a replica does: its changes and its epochs. */
function historyStore (state: { changes: FeedChange[], epochs: StoreEpoch[] }) {
  const after = (a: FeedPosition, b: FeedPosition | null): boolean => b === null || a.order > b.order || (a.order === b.order && a.id > b.id)
  const store = {
    stock: {
      listChanges: async (from: FeedPosition | null, limit: number) => state.changes.filter((c) => after(c.position, from)).slice(0, limit),
      feedHistory: async (): Promise<FeedHistory> => ({ epochs: state.epochs, head: state.changes.at(-1)?.position ?? null }),
      feedHead: async (): Promise<FeedPlace | null> => {
        const last = state.changes.at(-1)
        return last === undefined ? null : { ...last.position, epoch: last.epoch }
      }
    }
  }
  return store as unknown as Store
}

const OLD = 'aaaaaaaaaaaaaaaa'
const NEW = 'bbbbbbbbbbbbbbbb'
const epoch = (id: string, afterId: bigint): StoreEpoch => ({ epoch: id, after: { order: 0n, id: afterId }, startedAt: new Date(0), reason: 'test' })
const changeAt = (id: bigint, of: string, quantity = Number(id)): FeedChange => ({
  id, petId: 1n, previousQuantity: null, quantity, reason: 'adjustment', note: null, reference: null, keyId: null, requestId: null, at: new Date(0), batchId: null,
  status: null, previousStatus: null, event: null, holdId: null, held: null, reorderPoint: null, position: { order: 0n, id }, epoch: of
})

describe('followChanges across a new epoch', () => {
  /** Follows from change 3 of five; then the feed becomes `then` and the watch is told; resolves with what came, or the error. */
  async function followThrough (t: TestContext, then: { changes: FeedChange[], epochs: StoreEpoch[] }): Promise<{ quantities: number[], error: unknown }> {
    const state = { changes: [1n, 2n, 3n, 4n, 5n].map((id) => changeAt(id, OLD)), epochs: [epoch(OLD, 0n)] }
    const store = historyStore(state)
    const watch = new FeedWatch({ store, pollMs: 10 })
    t.after(() => { watch.close() })
    const stop = new AbortController()
    t.after(() => { stop.abort() })
    const quantities: number[] = []
    let error: unknown
    const reading = (async () => {
      for await (const page of followChanges(store, watch, { after: feedCursor({ order: 0n, id: 3n, epoch: OLD }), keyId: null, pageSize: 10, signal: stop.signal })) {
        quantities.push(...page.map((c) => c.quantity))
      }
    })().catch((caught: unknown) => { error = caught })
    await until(() => quantities.length === 2)
    Object.assign(state, then)
    watch.nudge()
    await until(() => error !== undefined || quantities.length > 2)
    stop.abort()
    await reading
    return { quantities, error }
  }

  test('when a failover lost the last change the stream sent and a new epoch began before it, then the stream ends as expired', async (t) => {
    const lost = await followThrough(t, { changes: [...[1n, 2n, 3n, 4n].map((id) => changeAt(id, OLD)), changeAt(5n, NEW, 50), changeAt(6n, NEW, 60)], epochs: [epoch(OLD, 0n), epoch(NEW, 4n)] })
    assert.deepEqual(lost.quantities, [4, 5], 'never the new change 6 after the lost 5: the change that took 5\'s place would be skipped')
    assert.ok(lost.error instanceof CursorExpiredError)
  })

  test('when the new epoch\'s first change has not passed the stream\'s place yet, then the new head alone ends it', async (t) => {
    const lost = await followThrough(t, { changes: [...[1n, 2n, 3n, 4n].map((id) => changeAt(id, OLD)), changeAt(5n, NEW, 50)], epochs: [epoch(OLD, 0n), epoch(NEW, 4n)] })
    assert.ok(lost.error instanceof CursorExpiredError)
  })

  test('when the failover lost nothing the stream had, then it goes on into the new epoch', async (t) => {
    const kept = await followThrough(t, { changes: [...[1n, 2n, 3n, 4n, 5n].map((id) => changeAt(id, OLD)), changeAt(6n, NEW, 60)], epochs: [epoch(OLD, 0n), epoch(NEW, 5n)] })
    assert.deepEqual([kept.quantities, kept.error], [[4, 5, 60], undefined])
  })
})

describe('StreamRegistry', () => {
  const T0 = Date.parse('2026-11-25T12:00:00Z')

  test('when a quota has its streams open on two instances, then a third is refused until one closes', async (t) => {
    const store = await tempStore(t)
    const clock = { now: T0 }
    const registries = [0, 1].map(() => new StreamRegistry({ store, maxPerQuota: 2, maxPerInstance: 10, renewMs: 1000, clock: () => clock.now }))
    t.after(() => Promise.all(registries.map((r) => r.stop())))
    const [a, b] = registries as [StreamRegistry, StreamRegistry]
    const first = await a.open('q1', 'key_q1')
    assert.equal(first.outcome, 'opened')
    assert.equal((await b.open('q1', 'key_q1')).outcome, 'opened')
    assert.deepEqual(await b.open('q1', 'key_q1'), { outcome: 'quota_full', max: 2 })
    assert.equal((await a.open('q2', 'key_q2')).outcome, 'opened', 'another quota has its own count')
    await a.close((first as { id: string }).id)
    assert.equal((await b.open('q1', 'key_q1')).outcome, 'opened', 'a closed stream frees its place at once')
    assert.deepEqual([a.size, b.size], [1, 2])
  })

  test('when the instance serves its most streams, then the next is refused without asking the store; streams being opened count', async (t) => {
    let opens = 0
    let release: () => void = () => {}
    const gate = new Promise<void>((resolve) => { release = resolve })
    const store = {
      streams: {
        openEventStream: async () => { opens++; await gate; return true },
        renewEventStreams: async () => {},
        closeEventStream: async () => {}
      }
    }
    const registry = new StreamRegistry({ store, maxPerQuota: 100, maxPerInstance: 2, renewMs: 1000, clock: () => T0 })
    t.after(() => registry.stop())
    const pending = [registry.open('q', 'key_q'), registry.open('q', 'key_q')]
    assert.deepEqual(await registry.open('q', 'key_q'), { outcome: 'instance_full', max: 2 })
    assert.equal(opens, 2)
    release()
    assert.deepEqual((await Promise.all(pending)).map((o) => o.outcome), ['opened', 'opened'])
    assert.equal(registry.size, 2)
  })

  test('when an instance stops renewing (it died), then its registrations lapse after three periods; while renewed, they stay', async (t) => {
    const store = await tempStore(t)
    const clock = { now: T0 }
    // Renewed by hand here; the timer's period is far off.
    const renewMs = 60_000
    const live = new StreamRegistry({ store, maxPerQuota: 1, maxPerInstance: 10, renewMs, clock: () => clock.now })
    const dead = new StreamRegistry({ store, maxPerQuota: 1, maxPerInstance: 10, renewMs, clock: () => clock.now })
    t.after(() => Promise.all([live.stop(), dead.stop()]))
    assert.equal((await live.open('renewed', 'key_renewed')).outcome, 'opened')
    assert.equal((await dead.open('lapsed', 'key_lapsed')).outcome, 'opened')
    clock.now = T0 + (REGISTRATION_PERIODS - 1) * renewMs
    await live.renew()
    clock.now = T0 + REGISTRATION_PERIODS * renewMs
    assert.equal((await dead.open('renewed', 'key_renewed')).outcome, 'quota_full', 'renewed: still counted')
    assert.equal((await live.open('lapsed', 'key_lapsed')).outcome, 'opened', 'not renewed: no longer counted')
  })

  test('when the store fails to renew or close, then the error is reported and nothing throws', async (t) => {
    const errors: string[] = []
    const store = {
      streams: {
        openEventStream: async () => true,
        renewEventStreams: async () => { throw new Error('down') },
        closeEventStream: async () => { throw new Error('down') }
      }
    }
    const registry = new StreamRegistry({ store, maxPerQuota: 1, maxPerInstance: 1, renewMs: 10, clock: () => T0, onError: (_e, what) => { errors.push(what) } })
    t.after(() => registry.stop())
    const opened = await registry.open('q', 'key_q')
    await until(() => errors.includes('renew'))
    await registry.close((opened as { id: string }).id)
    assert.ok(errors.includes('close'))
    assert.equal(registry.size, 0)
  })
})
