/**
 * The webhooks contract (src/store/webhooks/types.ts): subscriptions, their deliveries and attempts, the same on every
 * store. Each test makes its own data on a fresh, migrated store; a second store on the same database stands for
 * another instance (./harness.ts).
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { importData } from '../../src/domain/import.js'
import { CHANGE_TYPES, MAX_QUANTITY } from '../../src/model.js'
import type { FeedChange, FeedPosition } from '../../src/store/stock/types.js'
import type { NewApiKey } from '../../src/store/keys/types.js'
import type { Store } from '../../src/store/store.js'
import type { AttemptOutcome, ClaimedDelivery, ClaimRequest, FailureRun, NewWebhook, WebhookDelivery, WebhookRecord } from '../../src/store/webhooks/types.js'
import { holdEventSql, lowStockSql } from '../helpers/ledger-events.js'
import type { Open } from './harness.js'

export const T0 = Date.parse('2026-11-22T12:00:00.000Z')
/** A time `seconds` after T0. */
export const at = (seconds: number): Date => new Date(T0 + seconds * 1000)
export const GIVE_UP = at(86_400)
export const MAX_PER_QUOTA = 10
export const INT64_MAX = 2n ** 63n - 1n

/** A subscription id as the API makes them: `wh_` + 26 characters. */
export const whId = (name: string): string => `wh_${name.padEnd(26, '0').slice(0, 26)}`

export function newWebhook (name: string, quotaId: string, overrides: Partial<NewWebhook> = {}): NewWebhook {
  return {
    id: whId(name),
    quotaId,
    url: `https://hooks.example.com/${name}`,
    events: ['inventory.changed'],
    description: null,
    secret: `whsec_${Buffer.from(`secret of ${name}`).toString('base64')}`,
    createdAt: at(0),
    ...overrides
  }
}

export async function subscribe (store: Store, name: string, quotaId: string, overrides: Partial<NewWebhook> = {}): Promise<WebhookRecord> {
  const created = await store.webhooks.createWebhook(newWebhook(name, quotaId, overrides), MAX_PER_QUOTA)
  assert.notEqual(created, 'limit')
  return created as WebhookRecord
}

export async function addKey (store: Store, id: string, overrides: Partial<NewApiKey> = {}): Promise<void> {
  await store.keys.createApiKey({ id, keyHash: `hash-of-${id}`, name: null, plan: 'free', perMinute: null, perDay: null, createdAt: at(-3600), ...overrides })
}

/** Imports pets with a stock entry each: one `import` change per pet. */
export async function addPets (store: Store, ids: readonly number[], quantity = 10): Promise<void> {
  await importData(store, { pets: ids.map((id) => ({ id: BigInt(id), name: `pet ${id}`, status: 'available' as const, quantity })), orders: [] }, { at: at(-60) })
}

/** One stock change through the API, by `keyId` (null: none) with request `requestId`. */
export async function setStock (store: Store, petId: number, quantity: number, keyId: string | null = null, requestId: string | null = null): Promise<void> {
  const result = await store.stock.setQuantity({ petId: BigInt(petId), quantity, expectedRevisions: null, reason: 'adjustment', note: null, keyId, requestId, at: at(-1) })
  assert.equal(result.status, 'updated')
}

export const enqueue = async (store: Store, when: Date = at(1), limit = 1000): Promise<number> => (await store.webhooks.enqueueWebhookDeliveries(when, GIVE_UP, limit)).created

/** One attempt recorded alone. */
export async function record (store: Store, outcome: AttemptOutcome): Promise<FailureRun> {
  return (await store.webhooks.recordWebhookAttempts([outcome]))[0] as FailureRun
}

export function claim (store: Store, overrides: Partial<ClaimRequest> = {}): Promise<ClaimedDelivery[]> {
  return store.webhooks.claimWebhookDeliveries({ owner: 'instance-a', at: at(10), leaseUntil: at(70), limit: 100, perSubscription: 1000, exclude: [], ...overrides })
}

/** What an attempt of a delivery came to: by default, a 500 that is retried at at(100). */
export function outcome (deliveryId: bigint, webhookId: string, overrides: Partial<AttemptOutcome> = {}): AttemptOutcome {
  return {
    deliveryId, webhookId, owner: 'instance-a', at: at(11), status: 500, error: 'status 500', response: 'oops', durationMs: 12,
    state: 'pending', nextAttemptAt: at(100), ...overrides
  }
}

export const delivered = (deliveryId: bigint, webhookId: string, overrides: Partial<AttemptOutcome> = {}): AttemptOutcome =>
  outcome(deliveryId, webhookId, { status: 200, error: null, response: 'ok', state: 'delivered', nextAttemptAt: null, ...overrides })

/** Every delivery of a subscription, oldest first. */
export async function deliveriesOf (store: Store, webhookId: string): Promise<WebhookDelivery[]> {
  return (await store.webhooks.listWebhookDeliveries(webhookId, null, 100_000)).reverse()
}

/** The feed's changes after `after`, all of them. */
export const feedAfter = (store: Store, after: FeedPosition | null): Promise<FeedChange[]> => store.stock.listChanges(after, 100_000)

/** What of a change a delivery records: its id and place. */
export const places = (changes: ReadonlyArray<{ id: bigint, position: FeedPosition }>): Array<[bigint, FeedPosition]> => changes.map((c) => [c.id, c.position])
export const deliveryPlaces = (deliveries: readonly WebhookDelivery[]): Array<[bigint, FeedPosition]> => deliveries.map((d) => [d.changeId, d.position])

export const ids = (claimed: readonly ClaimedDelivery[]): bigint[] => claimed.map((c) => c.deliveryId)

export function webhookContract (name: string, open: Open): void {
  describe(`${name}: webhooks`, () => {
    describe('createWebhook', () => {
      test('when a subscription is created, then it is stored enabled, without a failure run or previous secret, and read back the same', async (t) => {
        const { store } = await open(t)
        const webhook = newWebhook('created', 'key_a', { events: ['inventory.changed', 'inventory.low_stock'], description: 'to the warehouse' })
        const created = await store.webhooks.createWebhook(webhook, MAX_PER_QUOTA)
        const expected: WebhookRecord = {
          id: webhook.id, quotaId: 'key_a', url: webhook.url, events: ['inventory.changed', 'inventory.low_stock'], description: 'to the warehouse', enabled: true,
          disabledReason: null, secret: webhook.secret, previousSecret: null, previousSecretUntil: null, failures: 0, failingSince: null,
          createdAt: webhook.createdAt, updatedAt: webhook.createdAt
        }
        assert.deepEqual(created, expected)
        assert.deepEqual(await store.webhooks.getWebhook(webhook.id), expected)
      })

      test('when changes were made before a subscription was created, then they never get deliveries, and the changes after it do', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        await addPets(store, [1, 2])
        await setStock(store, 1, 5)
        await enqueue(store)
        const head = await store.stock.feedHead()
        const webhook = await subscribe(store, 'late', 'key_a')
        assert.equal(await enqueue(store), 0, 'nothing before the subscription')
        await setStock(store, 2, 7)
        await setStock(store, 1, 8)
        assert.equal(await enqueue(store), 2)
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, webhook.id)), places(await feedAfter(store, head)))
        assert.deepEqual((await deliveriesOf(store, webhook.id)).map((d) => [d.state, d.nextAttemptAt, d.giveUpAt, d.createdAt, d.attempts]),
          [['pending', at(1), GIVE_UP, at(1), []], ['pending', at(1), GIVE_UP, at(1), []]])
      })

      test('when a subscription is created on an empty feed, then every change gets a delivery, the first one too', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'empty', 'key_a')
        await addPets(store, [1])
        await setStock(store, 1, 3)
        assert.equal(await enqueue(store), 2)
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, webhook.id)), places(await feedAfter(store, null)))
      })

      test('when the quota has maxPerQuota subscriptions, then createWebhook returns limit and creates nothing; other quotas and a freed place pass', async (t) => {
        const { store } = await open(t)
        assert.notEqual(await store.webhooks.createWebhook(newWebhook('one', 'key_a'), 2), 'limit')
        assert.notEqual(await store.webhooks.createWebhook(newWebhook('two', 'key_a'), 2), 'limit')
        assert.equal(await store.webhooks.createWebhook(newWebhook('three', 'key_a'), 2), 'limit')
        assert.equal(await store.webhooks.getWebhook(whId('three')), null)
        assert.deepEqual((await store.webhooks.listWebhooks('key_a')).map((w) => w.id), [whId('one'), whId('two')])
        assert.notEqual(await store.webhooks.createWebhook(newWebhook('other', 'key_b'), 2), 'limit', 'another quota\'s are not counted')
        assert.equal(await store.webhooks.deleteWebhook(whId('one')), true)
        assert.notEqual(await store.webhooks.createWebhook(newWebhook('three', 'key_a'), 2), 'limit', 'a deleted one frees its place')
      })

      test('when two instances create the last allowed subscriptions of a quota at once, then only one passes', async (t) => {
        const { store, peer } = await open(t)
        const other = await peer()
        for (let round = 0; round < 3; round++) {
          const quota = `key_race${round}`
          await store.webhooks.createWebhook(newWebhook(`race${round}a`, quota), 3)
          await store.webhooks.createWebhook(newWebhook(`race${round}b`, quota), 3)
          const results = await Promise.all([store, other, store, other].map((s, i) => s.webhooks.createWebhook(newWebhook(`race${round}c${i}`, quota), 3)))
          assert.equal(results.filter((r) => r !== 'limit').length, 1, `round ${round}: one of four passes`)
          assert.equal((await store.webhooks.listWebhooks(quota)).length, 3)
        }
      })
    })

    describe('listWebhooks, getWebhook, updateWebhook', () => {
      test('when listed by quota, then only that quota\'s subscriptions come, oldest first; null lists every one; an unknown id reads null', async (t) => {
        const { store } = await open(t)
        await subscribe(store, 'b2', 'key_b', { createdAt: at(2) })
        await subscribe(store, 'a3', 'key_a', { createdAt: at(3) })
        await subscribe(store, 'a1', 'key_a', { createdAt: at(1) })
        assert.deepEqual((await store.webhooks.listWebhooks('key_a')).map((w) => w.id), [whId('a1'), whId('a3')])
        assert.deepEqual((await store.webhooks.listWebhooks(null)).map((w) => w.id), [whId('a1'), whId('b2'), whId('a3')])
        assert.deepEqual(await store.webhooks.listWebhooks('key_none'), [])
        assert.equal(await store.webhooks.getWebhook(whId('missing')), null)
      })

      test('when some fields are updated, then those change, the absent ones stay, and updatedAt is the time given', async (t) => {
        const { store } = await open(t)
        const webhook = await subscribe(store, 'upd', 'key_a', { description: 'first' })
        const urlOnly = await store.webhooks.updateWebhook(webhook.id, { url: 'https://hooks.example.com/moved' }, at(5))
        assert.deepEqual(urlOnly, { ...webhook, url: 'https://hooks.example.com/moved', updatedAt: at(5) })
        const eventsAndDescription = await store.webhooks.updateWebhook(webhook.id, { events: ['stock.low'], description: 'second' }, at(6))
        assert.deepEqual(eventsAndDescription, { ...webhook, url: 'https://hooks.example.com/moved', events: ['stock.low'], description: 'second', updatedAt: at(6) })
        const cleared = await store.webhooks.updateWebhook(webhook.id, { description: null }, at(7))
        assert.deepEqual(cleared, { ...webhook, url: 'https://hooks.example.com/moved', events: ['stock.low'], description: null, updatedAt: at(7) })
        const nothing = await store.webhooks.updateWebhook(webhook.id, {}, at(8))
        assert.deepEqual(nothing, { ...cleared, updatedAt: at(8) })
        assert.deepEqual(await store.webhooks.getWebhook(webhook.id), nothing)
      })

      test('when disabled with a reason, then the reason is recorded and kept by other updates; when enabled, then the reason and the failure run are cleared', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'toggle', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [delivery] = await claim(store)
        assert.ok(delivery !== undefined)
        await record(store, outcome(delivery.deliveryId, webhook.id, { at: at(11) }))
        await record(store, outcome(delivery.deliveryId, webhook.id, { at: at(12) }))
        const disabled = await store.webhooks.updateWebhook(webhook.id, { enabled: false, disabledReason: 'too many failures' }, at(20))
        assert.deepEqual([disabled?.enabled, disabled?.disabledReason, disabled?.failures, disabled?.failingSince], [false, 'too many failures', 2, at(11)])
        const renamed = await store.webhooks.updateWebhook(webhook.id, { description: 'still off' }, at(21))
        assert.deepEqual([renamed?.enabled, renamed?.disabledReason, renamed?.description], [false, 'too many failures', 'still off'])
        const reasoned = await store.webhooks.updateWebhook(webhook.id, { enabled: false, disabledReason: 'by its owner' }, at(22))
        assert.equal(reasoned?.disabledReason, 'by its owner', 'disabling again records the new reason')
        const enabled = await store.webhooks.updateWebhook(webhook.id, { enabled: true }, at(30))
        assert.deepEqual(enabled, { ...webhook, description: 'still off', updatedAt: at(30) })
      })

      test('when the subscription does not exist, then update and rotate return null and delete returns false', async (t) => {
        const { store } = await open(t)
        assert.equal(await store.webhooks.updateWebhook(whId('missing'), { url: 'https://x.example.com' }, at(1)), null)
        assert.equal(await store.webhooks.rotateWebhookSecret(whId('missing'), 'whsec_new', at(100), at(1)), null)
        assert.equal(await store.webhooks.deleteWebhook(whId('missing')), false)
        assert.deepEqual(await store.webhooks.listWebhooks(null), [])
      })
    })

    describe('deleteWebhook', () => {
      test('when a subscription is deleted, then its deliveries and their attempts go with it, and another subscription\'s stay', async (t) => {
        const { store, count } = await open(t)
        await addKey(store, 'key_a')
        const gone = await subscribe(store, 'gone', 'key_a')
        const kept = await subscribe(store, 'kept', 'key_a')
        await addPets(store, [1, 2])
        assert.equal(await enqueue(store), 4)
        for (const claimed of await claim(store)) await record(store, outcome(claimed.deliveryId, claimed.webhookId))
        const goneDeliveries = await deliveriesOf(store, gone.id)
        assert.equal(await count('webhook_attempts'), 4)
        assert.equal(await store.webhooks.deleteWebhook(gone.id), true)
        assert.equal(await store.webhooks.getWebhook(gone.id), null)
        assert.deepEqual(await store.webhooks.listWebhookDeliveries(gone.id, null, 100), [])
        assert.equal(await store.webhooks.getWebhookDelivery(gone.id, goneDeliveries[0]?.id ?? 0n), null)
        assert.equal(await count('webhook_deliveries'), 2)
        assert.equal(await count('webhook_attempts'), 2)
        assert.equal((await deliveriesOf(store, kept.id)).length, 2)
        assert.deepEqual((await store.webhooks.webhookBacklog()).map((b) => b.webhookId), [kept.id])
        assert.equal(await store.webhooks.deleteWebhook(gone.id), false, 'deleting twice')
      })
    })

    describe('rotateWebhookSecret', () => {
      test('when the secret is rotated, then the previous one keeps signing until the time given: claims carry both before it, only the new one after', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'rotate', 'key_a')
        const rotated = await store.webhooks.rotateWebhookSecret(webhook.id, 'whsec_bmV3', at(50), at(5))
        assert.deepEqual(rotated, { ...webhook, secret: 'whsec_bmV3', previousSecret: webhook.secret, previousSecretUntil: at(50), updatedAt: at(5) })
        assert.deepEqual(await store.webhooks.getWebhook(webhook.id), rotated)
        await addPets(store, [1, 2])
        await enqueue(store)
        const [first] = await claim(store, { at: at(10), limit: 1 })
        assert.deepEqual(first?.secrets, ['whsec_bmV3', webhook.secret])
        const [second] = await claim(store, { at: at(50), limit: 1 })
        assert.deepEqual(second?.secrets, ['whsec_bmV3'], 'at previousUntil the previous secret no longer signs')
        await store.webhooks.rotateWebhookSecret(webhook.id, 'whsec_dGhpcmQ=', at(200), at(60))
        const again = await store.webhooks.getWebhook(webhook.id)
        assert.deepEqual([again?.secret, again?.previousSecret, again?.previousSecretUntil], ['whsec_dGhpcmQ=', 'whsec_bmV3', at(200)])
      })
    })

    describe('enqueueWebhookDeliveries', () => {
      test('when changes are enqueued, then each gets one delivery in feed order, and enqueueing again creates none', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        await addPets(store, [1, 2, 3])
        const head = await store.stock.feedHead()
        const webhook = await subscribe(store, 'order', 'key_a')
        await setStock(store, 3, 1)
        await setStock(store, 1, 2)
        await store.stock.adjustQuantity({ petId: 2n, delta: 5, expectedRevisions: null, reason: 'arrival', note: null, keyId: null, requestId: null, at: at(-1), allowed: { min: 0, max: MAX_QUANTITY } })
        await setStock(store, 3, 4)
        assert.equal(await enqueue(store), 4)
        assert.equal(await enqueue(store), 0)
        assert.equal(await enqueue(store, at(2)), 0)
        const deliveries = await deliveriesOf(store, webhook.id)
        assert.deepEqual(deliveryPlaces(deliveries), places(await feedAfter(store, head)))
        assert.deepEqual([...deliveries].sort((a, b) => Number(a.id - b.id)).map((d) => d.id), deliveries.map((d) => d.id), 'ids in feed order')
      })

      test('when a write records a low-stock event row, then its change gets a delivery and the event row none', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        await addPets(store, [1])
        const webhook = await subscribe(store, 'low', 'key_a')
        await store.alerts.setReorderPoint({ petId: 1n, reorderPoint: 5, keyId: null, requestId: null, at: at(-1) })
        await setStock(store, 1, 3)
        assert.equal(await enqueue(store), 1)
        assert.equal(await enqueue(store), 0)
        const deliveries = await deliveriesOf(store, webhook.id)
        assert.deepEqual(deliveryPlaces(deliveries), places(await feedAfter(store, null)).slice(-1))
      })

      test('when subscriptions name types, then each gets deliveries of its types only, in feed order, and passes the rest for good', async (t) => {
        const { store, run } = await open(t)
        await addKey(store, 'key_a')
        await addPets(store, [1, 2])
        const head = await store.stock.feedHead()
        const stock = await subscribe(store, 'stock', 'key_a')
        const holds = await subscribe(store, 'holds', 'key_a', { events: ['hold.placed', 'inventory.low_stock'] })
        const all = await subscribe(store, 'all', 'key_a', { events: [...CHANGE_TYPES] })
        await run(holdEventSql({ petId: 1, event: 'hold.placed', holdId: 'hold_AAAAAAAAAAAAAAAAAAAA', quantity: 10, held: 2, at: at(-1) }))
        await setStock(store, 2, 3)
        await run(lowStockSql({ petId: 2, quantity: 3, reorderPoint: 4, at: at(-1) }) + holdEventSql({ petId: 1, event: 'hold.released', holdId: 'hold_AAAAAAAAAAAAAAAAAAAA', quantity: 10, held: 0, at: at(-1) }))
        await setStock(store, 1, 9)
        const feed = await store.stock.listChanges(head, 100, CHANGE_TYPES)
        assert.deepEqual(feed.map((c) => c.event ?? c.reason), ['hold.placed', 'adjustment', 'inventory.low_stock', 'hold.released', 'adjustment'])
        assert.equal(await enqueue(store), 2 + 2 + 5)
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, stock.id)), places(feed.filter((c) => c.event === null)), 'stock changes only')
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, holds.id)), places(feed.filter((c) => c.event === 'hold.placed' || c.event === 'inventory.low_stock')))
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, all.id)), places(feed))
        const claimed = await claim(store, { limit: 100 })
        assert.deepEqual(claimed.filter((c) => c.webhookId === holds.id).map((c) => [c.change.event, c.change.holdId, c.change.held, c.change.reorderPoint]),
          [['hold.placed', 'hold_AAAAAAAAAAAAAAAAAAAA', 2, null], ['inventory.low_stock', null, null, 4]], 'a claim carries the event as the feed has it')
        // Rows of types a subscription does not take are passed: they are never delivered to it later either.
        await store.webhooks.updateWebhook(stock.id, { events: [...CHANGE_TYPES] }, at(2))
        assert.equal(await enqueue(store, at(3)), 0, 'a subscription that widens its types gets what is committed from then on')
        await run(holdEventSql({ petId: 2, event: 'hold.placed', holdId: 'hold_BBBBBBBBBBBBBBBBBBBB', quantity: 3, held: 1, at: at(4) }))
        assert.equal(await enqueue(store, at(5)), 3, 'the new event, to each of the three subscriptions that take hold.placed now')
        assert.equal((await deliveriesOf(store, holds.id)).length, 3)
        assert.equal((await deliveriesOf(store, stock.id)).length, 3)
        assert.equal((await deliveriesOf(store, all.id)).length, 6)
      })

      test('when only rows of other types were committed, then a subscription is not behind after one enqueue, and the next creates none', async (t) => {
        const { store, run } = await open(t)
        await addKey(store, 'key_a')
        await addPets(store, [1])
        const webhook = await subscribe(store, 'quiet', 'key_a')
        for (let i = 0; i < 5; i++) await run(holdEventSql({ petId: 1, event: 'hold.placed', holdId: `hold_${String(i).repeat(20)}`, quantity: 10, held: i + 1, at: at(-1) }))
        assert.equal(await enqueue(store, at(1), 2), 0)
        assert.equal(await enqueue(store, at(2), 2), 0)
        await setStock(store, 1, 4)
        assert.equal(await enqueue(store, at(3), 2), 1, 'a stock change after them is delivered at once')
        assert.deepEqual((await deliveriesOf(store, webhook.id)).map((d) => d.changeId), (await feedAfter(store, null)).slice(-1).map((c) => c.id))
      })

      test('when a batch and an import are enqueued, then each of their changes gets one delivery', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'batch', 'key_a')
        await addPets(store, [1, 2, 3])
        await store.stock.applyBatch({
          changes: [1n, 2n, 3n].map((petId) => ({ petId, delta: 1, expectedRevisions: null, reason: 'arrival' as const, note: null })),
          allowed: { min: 0, max: MAX_QUANTITY }, batchId: 'b-1', keyId: 'key_a', requestId: 'req-b', at: at(-1)
        })
        assert.equal(await enqueue(store), 6)
        const feed = await feedAfter(store, null)
        assert.deepEqual(feed.map((c) => [c.reason, c.batchId]), [['import', null], ['import', null], ['import', null], ['arrival', 'b-1'], ['arrival', 'b-1'], ['arrival', 'b-1']])
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, webhook.id)), places(feed))
      })

      test('when more changes wait than the limit, then each subscription gets at most limit per call, in feed order, and the next call continues', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        await addPets(store, [1])
        const head = await store.stock.feedHead()
        const first = await subscribe(store, 'limit1', 'key_a')
        const second = await subscribe(store, 'limit2', 'key_a')
        for (let q = 1; q <= 5; q++) await setStock(store, 1, q)
        assert.deepEqual([await enqueue(store, at(1), 2), await enqueue(store, at(2), 2), await enqueue(store, at(3), 2), await enqueue(store, at(4), 2)], [4, 4, 2, 0])
        const feed = await feedAfter(store, head)
        for (const webhook of [first, second]) {
          const deliveries = await deliveriesOf(store, webhook.id)
          assert.deepEqual(deliveryPlaces(deliveries), places(feed))
          assert.deepEqual(deliveries.map((d) => d.createdAt), [at(1), at(1), at(2), at(2), at(3)])
        }
      })

      test('when a subscription is disabled, then it gets no deliveries; when enabled again, then it takes the changes since it last took its events', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const on = await subscribe(store, 'on', 'key_a')
        const off = await subscribe(store, 'off', 'key_a')
        await addPets(store, [1])
        assert.equal(await enqueue(store), 2)
        await store.webhooks.updateWebhook(off.id, { enabled: false, disabledReason: 'by its owner' }, at(2))
        await setStock(store, 1, 4)
        await setStock(store, 1, 5)
        assert.equal(await enqueue(store, at(3)), 2)
        assert.equal((await deliveriesOf(store, on.id)).length, 3)
        assert.equal((await deliveriesOf(store, off.id)).length, 1)
        await store.webhooks.updateWebhook(off.id, { enabled: true }, at(4))
        assert.equal(await enqueue(store, at(5)), 2)
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, off.id)), deliveryPlaces(await deliveriesOf(store, on.id)))
      })

      test('when the quota\'s keys are revoked or expired, then its subscriptions get no deliveries; a rotated key\'s replacement keeps them going', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_revoked')
        await store.keys.revokeApiKey('key_revoked', at(-10))
        await addKey(store, 'key_expiring', { expiresAt: at(50) })
        await addKey(store, 'key_rotated')
        const revoked = await subscribe(store, 'revoked', 'key_revoked')
        const expiring = await subscribe(store, 'expiring', 'key_expiring')
        const rotated = await subscribe(store, 'rotated', 'key_rotated')
        const orphan = await subscribe(store, 'orphan', 'key_never_made')
        await addPets(store, [1])
        assert.equal(await enqueue(store, at(10)), 2, 'the expiring key is active before its expiry, the rotated one before its rotation')
        assert.equal(await store.keys.rotateApiKey('key_rotated', { id: 'key_heir', keyHash: 'hash-of-key_heir', name: null, plan: 'free', perMinute: null,
          perDay: null, createdAt: at(20), quotaId: 'key_rotated' }, at(40)), 'rotated')
        await setStock(store, 1, 2)
        assert.equal(await enqueue(store, at(60)), 1, 'after the old key ended and the other one expired, only the rotated quota is active')
        assert.deepEqual((await deliveriesOf(store, revoked.id)).length, 0)
        assert.deepEqual((await deliveriesOf(store, orphan.id)).length, 0)
        assert.deepEqual((await deliveriesOf(store, expiring.id)).length, 1)
        assert.deepEqual((await deliveriesOf(store, rotated.id)).length, 2)
      })

      test('when two instances enqueue at the same time while writes go on, then every change gets exactly one delivery per subscription, in feed order', async (t) => {
        const { store, peer } = await open(t)
        const other = await peer()
        await addKey(store, 'key_a')
        const early = await subscribe(store, 'early', 'key_a')
        await addPets(store, [1, 2, 3, 4], 1000)
        const head = await store.stock.feedHead()
        const late = await subscribe(store, 'late', 'key_a')
        let writing = true
        let midway: WebhookRecord | null = null
        const writers = [store, other, store].map(async (s, w) => {
          for (let i = 0; i < 25; i++) {
            await s.stock.adjustQuantity({ petId: BigInt((w + i) % 4 + 1), delta: i % 2 === 0 ? 1 : -1, expectedRevisions: null, reason: 'adjustment', note: null,
              keyId: null, requestId: `w${w}-${i}`, at: at(-1), allowed: { min: 0, max: MAX_QUANTITY } })
            if (w === 0 && i === 10) midway = await subscribe(s, 'midway', 'key_a')
          }
        })
        const enqueuers = [store, other].map(async (s) => {
          while (writing) {
            await enqueue(s, at(1), 3)
            await sleep(1)
          }
        })
        await Promise.all(writers)
        writing = false
        await Promise.all(enqueuers)
        for (let rounds = 0; (await enqueue(store)) + (await enqueue(other)) > 0; rounds++) assert.ok(rounds < 100)
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, early.id)), places(await feedAfter(store, null)))
        assert.deepEqual(deliveryPlaces(await deliveriesOf(store, late.id)), places(await feedAfter(store, head)))
        assert.equal((await feedAfter(store, head)).length, 75)
        // The one created midway: every change after its first delivery, none missed or repeated.
        const fromMidway = await deliveriesOf(store, (midway as WebhookRecord | null)?.id ?? '')
        assert.ok(fromMidway.length > 0)
        const feed = await feedAfter(store, null)
        const start = feed.findIndex((c) => c.id === fromMidway[0]?.changeId)
        assert.deepEqual(deliveryPlaces(fromMidway), places(feed.slice(start)))
      })
    })

    describe('claimWebhookDeliveries', () => {
      test('when a claim is made, then it carries each change exactly as listChanges has it, with the subscription\'s address and the attempt\'s number', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'carry', 'key_a')
        await addPets(store, [1, 2])
        await importData(store, { pets: [{ id: INT64_MAX, name: 'big', status: 'pending', quantity: 4 }], orders: [] }, { at: at(-50.123) })
        await setStock(store, 2, 7, 'key_a', 'req-1')
        await store.stock.applyBatch({
          changes: [{ petId: 1n, quantity: 3, expectedRevisions: null, reason: 'adjustment', note: 'a note' }, { petId: INT64_MAX, delta: -1, expectedRevisions: null, reason: 'return', note: null }],
          allowed: { min: 0, max: MAX_QUANTITY }, batchId: 'b-carry', keyId: 'key_a', requestId: 'req-2', at: at(-0.987)
        })
        // An import that changes a status: the change carries the status and the one before.
        await importData(store, { pets: [{ id: INT64_MAX, name: 'big', status: 'sold' }], orders: [] }, { at: at(-0.5) })
        await enqueue(store, at(0.25))
        const claimed = await claim(store)
        assert.equal(claimed.length, 7)
        assert.deepEqual(claimed.at(-1)?.change.petId, INT64_MAX)
        assert.deepEqual([claimed.at(-1)?.change.previousStatus, claimed.at(-1)?.change.status], ['pending', 'sold'])
        assert.deepEqual(claimed.map((c) => c.change), await feedAfter(store, null))
        assert.deepEqual(claimed.map((c) => c.deliveryId), (await deliveriesOf(store, webhook.id)).map((d) => d.id))
        for (const c of claimed) {
          assert.deepEqual([c.webhookId, c.url, c.secrets, c.attempt, c.giveUpAt], [webhook.id, webhook.url, [webhook.secret], 1, GIVE_UP])
        }
      })

      test('when deliveries are not yet due, then they are not claimed; when due, then they are, oldest due first, at most limit', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'due', 'key_a')
        await addPets(store, [1, 2, 3])
        assert.equal(await enqueue(store, at(10)), 3)
        assert.deepEqual(await claim(store, { at: at(9) }), [], 'created due at(10)')
        const [first, second, third] = await deliveriesOf(store, webhook.id)
        assert.ok(first !== undefined && second !== undefined && third !== undefined)
        // The first is retried later than the others are due.
        assert.deepEqual(ids(await claim(store, { at: at(10), limit: 1 })), [first.id])
        await record(store, outcome(first.id, webhook.id, { nextAttemptAt: at(30) }))
        assert.deepEqual(ids(await claim(store, { at: at(20), limit: 1 })), [second.id], 'the limit holds')
        assert.deepEqual(ids(await claim(store, { at: at(20) })), [third.id], 'the first is not due yet')
        const again = await claim(store, { at: at(30) })
        assert.deepEqual(ids(again), [first.id])
        assert.equal(again[0]?.attempt, 2)
      })

      test('when deliveries are leased, then nobody else claims them until the lease ends', async (t) => {
        const { store, peer } = await open(t)
        const other = await peer()
        await addKey(store, 'key_a')
        await subscribe(store, 'lease', 'key_a')
        await addPets(store, [1, 2])
        await enqueue(store)
        const leased = await claim(store, { owner: 'instance-a', at: at(10), leaseUntil: at(70) })
        assert.equal(leased.length, 2)
        assert.deepEqual(await claim(other, { owner: 'instance-b', at: at(69) }), [])
        assert.deepEqual(await claim(store, { owner: 'instance-a', at: at(69) }), [], 'nor the holder itself')
        const taken = await claim(other, { owner: 'instance-b', at: at(70), leaseUntil: at(130) })
        assert.deepEqual(ids(taken), ids(leased))
        assert.deepEqual(taken.map((c) => c.attempt), [1, 1], 'no attempt was recorded')
      })

      test('when subscriptions are excluded, then none of their deliveries is claimed', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const busy = await subscribe(store, 'busy', 'key_a')
        const idle = await subscribe(store, 'idle', 'key_a')
        const third = await subscribe(store, 'third', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        assert.deepEqual((await claim(store, { exclude: [busy.id, third.id] })).map((c) => c.webhookId), [idle.id])
        assert.deepEqual((await claim(store, { exclude: [] })).map((c) => c.webhookId).sort(), [busy.id, third.id].sort())
      })

      test('when one subscription has a long backlog, then a claim takes at most perSubscription of each, so the others get their turn', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        await addKey(store, 'key_b')
        const noisy = await subscribe(store, 'noisy', 'key_a')
        await addPets(store, [1, 2, 3, 4, 5, 6])
        await enqueue(store)
        const quiet = await subscribe(store, 'quiet', 'key_b')
        await addPets(store, [7])
        await enqueue(store, at(2))
        const claimed = await claim(store, { limit: 3, perSubscription: 2 })
        assert.deepEqual(claimed.map((c) => c.webhookId).sort(), [noisy.id, noisy.id, quiet.id].sort(), 'the quiet subscription is not crowded out')
        assert.deepEqual(claimed.map((c) => [c.webhookId, c.quotaId, c.failing]).find(([id]) => id === quiet.id), [quiet.id, 'key_b', false])
      })

      test('when a subscription is disabled or its quota inactive, then its pending deliveries are not claimed until it is enabled again', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        await addKey(store, 'key_b')
        const paused = await subscribe(store, 'paused', 'key_a')
        const revoked = await subscribe(store, 'revoked', 'key_b')
        await addPets(store, [1])
        assert.equal(await enqueue(store), 2)
        await store.webhooks.updateWebhook(paused.id, { enabled: false, disabledReason: 'paused' }, at(2))
        await store.keys.revokeApiKey('key_b', at(3))
        assert.deepEqual(await claim(store), [])
        await store.webhooks.updateWebhook(paused.id, { enabled: true }, at(4))
        assert.deepEqual((await claim(store)).map((c) => c.webhookId), [paused.id])
        assert.equal((await deliveriesOf(store, revoked.id))[0]?.state, 'pending', 'kept, not claimed')
      })

      test('when a change was made by a key of the subscription\'s quota (a rotated key\'s replacement too), then the claim marks it own; otherwise not', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_own')
        await addKey(store, 'key_other')
        await subscribe(store, 'own', 'key_own')
        await addPets(store, [1])
        await setStock(store, 1, 2, 'key_own', 'req-own')
        await setStock(store, 1, 3, 'key_other', 'req-other')
        assert.equal(await store.keys.rotateApiKey('key_own', { id: 'key_own2', keyHash: 'hash-of-key_own2', name: null, plan: 'free', perMinute: null,
          perDay: null, createdAt: at(-30), quotaId: 'key_own' }, at(3600)), 'rotated')
        await setStock(store, 1, 4, 'key_own2', 'req-heir')
        await setStock(store, 1, 5, 'key_unknown', 'req-unknown')
        await enqueue(store)
        const claimed = await claim(store)
        assert.deepEqual(claimed.map((c) => [c.change.keyId, c.own]),
          [[null, false], ['key_own', true], ['key_other', false], ['key_own2', true], ['key_unknown', false]])
      })

      test('when two instances claim at once, then they get disjoint sets whose union is every due delivery', async (t) => {
        const { store, peer } = await open(t)
        const other = await peer()
        await addKey(store, 'key_a')
        for (const name of ['c1', 'c2', 'c3']) await subscribe(store, name, 'key_a')
        await addPets(store, Array.from({ length: 13 }, (_, i) => i + 1))
        assert.equal(await enqueue(store), 39)
        const due = new Set<bigint>()
        for (const webhook of await store.webhooks.listWebhooks(null)) for (const d of await deliveriesOf(store, webhook.id)) due.add(d.id)
        const taken: bigint[][] = [[], []]
        for (let round = 0; round < 20; round++) {
          const [a, b] = await Promise.all([claim(store, { owner: 'a', limit: 7 }), claim(other, { owner: 'b', limit: 7 })])
          taken[0]?.push(...ids(a))
          taken[1]?.push(...ids(b))
          if (a.length === 0 && b.length === 0) break
        }
        const all = [...taken[0] ?? [], ...taken[1] ?? []]
        assert.equal(new Set(all).size, all.length, 'no delivery leased twice')
        assert.deepEqual(new Set(all), due, 'every due delivery leased')
        assert.ok((taken[0]?.length ?? 0) > 0 && (taken[1]?.length ?? 0) > 0, 'both took some')
      })
    })

    describe('recordWebhookAttempts', () => {
      test('when several attempts are recorded together, then each is logged and each run is returned in order', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'batch', 'key_a')
        await addPets(store, [1, 2, 3])
        await enqueue(store)
        const [a, b, c] = await claim(store) as [ClaimedDelivery, ClaimedDelivery, ClaimedDelivery]
        const runs = await store.webhooks.recordWebhookAttempts([
          outcome(a.deliveryId, webhook.id, { at: at(11) }), outcome(b.deliveryId, webhook.id, { at: at(12) }), delivered(c.deliveryId, webhook.id, { at: at(13) })])
        assert.deepEqual(runs, [{ failures: 1, failingSince: at(11) }, { failures: 2, failingSince: at(11) }, { failures: 0, failingSince: null }])
        const states = new Map((await store.webhooks.listWebhookDeliveries(webhook.id, null, 10)).map((d) => [d.id, [d.state, d.attempts.length]]))
        assert.deepEqual([states.get(a.deliveryId), states.get(b.deliveryId), states.get(c.deliveryId)], [['pending', 1], ['pending', 1], ['delivered', 1]])
        assert.deepEqual(await store.webhooks.recordWebhookAttempts([]), [])
      })
    })

    describe('recordWebhookAttempt', () => {
      test('when attempts are recorded, then they are numbered from 1 in the log, the delivery takes its new state, and the next claim carries the next number', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'log', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [first] = await claim(store, { at: at(10) })
        assert.ok(first !== undefined)
        await record(store, outcome(first.deliveryId, webhook.id, { at: at(11), status: null, error: 'no answer', response: null, durationMs: 5000, nextAttemptAt: at(40) }))
        const afterOne = await store.webhooks.getWebhookDelivery(webhook.id, first.deliveryId)
        assert.deepEqual([afterOne?.state, afterOne?.nextAttemptAt], ['pending', at(40)])
        const [second] = await claim(store, { at: at(40) })
        assert.equal(second?.attempt, 2)
        await record(store, outcome(first.deliveryId, webhook.id, { at: at(41), status: 503, error: 'status 503', response: 'busy', durationMs: 30, nextAttemptAt: at(80) }))
        const [third] = await claim(store, { at: at(80) })
        assert.equal(third?.attempt, 3)
        await record(store, delivered(first.deliveryId, webhook.id, { at: at(81), response: '{"ok":true}', durationMs: 7 }))
        const done = await store.webhooks.getWebhookDelivery(webhook.id, first.deliveryId)
        assert.deepEqual([done?.state, done?.nextAttemptAt], ['delivered', null])
        assert.deepEqual(done?.attempts, [
          { attempt: 1, at: at(11), status: null, error: 'no answer', response: null, durationMs: 5000 },
          { attempt: 2, at: at(41), status: 503, error: 'status 503', response: 'busy', durationMs: 30 },
          { attempt: 3, at: at(81), status: 200, error: null, response: '{"ok":true}', durationMs: 7 }
        ])
        assert.deepEqual(await claim(store, { at: at(1000) }), [], 'a delivered one is not claimed again')
      })

      test('when an attempt is given up, then the delivery fails for good and is not claimed again', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'giveup', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [c] = await claim(store)
        assert.ok(c !== undefined)
        await record(store, outcome(c.deliveryId, webhook.id, { state: 'failed', nextAttemptAt: null }))
        assert.equal((await store.webhooks.getWebhookDelivery(webhook.id, c.deliveryId))?.state, 'failed')
        assert.deepEqual(await claim(store, { at: at(1000) }), [])
      })

      test('when an attempt is recorded, then its owner\'s lease ends: the delivery can be claimed at once when due', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'release', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [c] = await claim(store, { owner: 'instance-a', at: at(10), leaseUntil: at(70) })
        assert.ok(c !== undefined)
        await record(store, outcome(c.deliveryId, webhook.id, { owner: 'instance-a', at: at(11), nextAttemptAt: at(12) }))
        assert.deepEqual(ids(await claim(store, { owner: 'instance-b', at: at(12) })), [c.deliveryId], 'long before the lease would have ended')
      })

      test('when another owner\'s late failed attempt is recorded after a delivery was delivered, then it stays delivered and the attempt is logged', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'late', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [slow] = await claim(store, { owner: 'instance-a', at: at(10), leaseUntil: at(70) })
        const [fast] = await claim(store, { owner: 'instance-b', at: at(70), leaseUntil: at(130) })
        assert.ok(slow !== undefined && fast !== undefined)
        assert.equal(fast.deliveryId, slow.deliveryId)
        await record(store, delivered(fast.deliveryId, webhook.id, { owner: 'instance-b', at: at(71) }))
        for (const state of ['pending', 'failed'] as const) {
          await record(store, outcome(slow.deliveryId, webhook.id, { owner: 'instance-a', at: at(72), state, nextAttemptAt: state === 'pending' ? at(100) : null }))
        }
        const delivery = await store.webhooks.getWebhookDelivery(webhook.id, slow.deliveryId)
        assert.deepEqual([delivery?.state, delivery?.nextAttemptAt], ['delivered', null])
        assert.deepEqual(delivery?.attempts.map((a) => [a.attempt, a.status]), [[1, 200], [2, 500], [3, 500]])
        assert.deepEqual(await claim(store, { at: at(1000) }), [])
      })

      test('when another instance took a delivery over after the lease ended, then a late attempt of the first is logged but moves nothing', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'takeover', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [slow] = await claim(store, { owner: 'instance-a', at: at(10), leaseUntil: at(70) })
        const [taker] = await claim(store, { owner: 'instance-b', at: at(70), leaseUntil: at(130) })
        assert.ok(slow !== undefined && taker !== undefined)
        await record(store, outcome(slow.deliveryId, webhook.id, { owner: 'instance-a', at: at(71), state: 'failed', nextAttemptAt: null }))
        const during = await store.webhooks.getWebhookDelivery(webhook.id, slow.deliveryId)
        assert.deepEqual([during?.state, during?.nextAttemptAt, during?.attempts.map((a) => a.attempt)], ['pending', at(1), [1]])
        assert.deepEqual(await claim(store, { owner: 'instance-c', at: at(100) }), [], 'instance-b\'s lease holds')
        await record(store, outcome(taker.deliveryId, webhook.id, { owner: 'instance-b', at: at(72), nextAttemptAt: at(200) }))
        const after = await store.webhooks.getWebhookDelivery(webhook.id, slow.deliveryId)
        assert.deepEqual([after?.state, after?.nextAttemptAt, after?.attempts.map((a) => a.attempt)], ['pending', at(200), [1, 2]], 'the holder\'s outcome applies')
      })

      test('when a delivery was retried by hand while its attempt was under way, then the attempt is logged and the delivery stays due as the retry made it', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'byhand', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [c] = await claim(store, { owner: 'instance-a', at: at(10), leaseUntil: at(70) })
        assert.ok(c !== undefined)
        await store.webhooks.retryWebhookDelivery(webhook.id, c.deliveryId, at(20), at(900))
        await record(store, outcome(c.deliveryId, webhook.id, { owner: 'instance-a', at: at(21), state: 'failed', nextAttemptAt: null }))
        const delivery = await store.webhooks.getWebhookDelivery(webhook.id, c.deliveryId)
        assert.deepEqual([delivery?.state, delivery?.nextAttemptAt, delivery?.giveUpAt, delivery?.attempts.length], ['pending', at(20), at(900), 1])
        assert.deepEqual(ids(await claim(store, { owner: 'instance-b', at: at(22) })), [c.deliveryId])
      })

      test('when a subscription was deleted while its delivery was attempted, then recording that attempt touches no other subscription\'s delivery', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const gone = await subscribe(store, 'gone', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [inFlight] = await claim(store)
        assert.ok(inFlight !== undefined)
        assert.equal(await store.webhooks.deleteWebhook(gone.id), true)
        // Deliveries made after the delete (on SQLite a new row may take the deleted one's id).
        const kept = await subscribe(store, 'kept', 'key_a')
        await setStock(store, 1, 2)
        await enqueue(store, at(2))
        const before = await deliveriesOf(store, kept.id)
        assert.deepEqual(await record(store, delivered(inFlight.deliveryId, gone.id, { at: at(12) })), { failures: 0, failingSince: null })
        assert.deepEqual(await record(store, outcome(inFlight.deliveryId, gone.id, { at: at(13), state: 'failed', nextAttemptAt: null })),
          { failures: 0, failingSince: null })
        assert.deepEqual(await deliveriesOf(store, kept.id), before, 'the other subscription\'s deliveries are as they were')
        assert.deepEqual((await claim(store, { at: at(20) })).map((c) => c.webhookId), [kept.id])
      })

      test('when attempts fail, then the subscription\'s failure run grows from the first failure\'s time; a success ends it; each call returns the run', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'run', 'key_a')
        const other = await subscribe(store, 'other', 'key_a')
        await addPets(store, [1, 2])
        await enqueue(store)
        const [d1, d2] = await deliveriesOf(store, webhook.id)
        assert.ok(d1 !== undefined && d2 !== undefined)
        assert.deepEqual(await record(store, outcome(d1.id, webhook.id, { at: at(11) })), { failures: 1, failingSince: at(11) })
        assert.deepEqual(await record(store, outcome(d2.id, webhook.id, { at: at(12) })), { failures: 2, failingSince: at(11) })
        assert.deepEqual(await record(store, outcome(d1.id, webhook.id, { at: at(13), state: 'failed', nextAttemptAt: null })), { failures: 3, failingSince: at(11) })
        const failing = await store.webhooks.getWebhook(webhook.id)
        assert.deepEqual([failing?.failures, failing?.failingSince], [3, at(11)])
        assert.deepEqual([(await store.webhooks.getWebhook(other.id))?.failures, (await store.webhooks.getWebhook(other.id))?.failingSince], [0, null], 'another subscription\'s run is its own')
        assert.deepEqual(await record(store, delivered(d2.id, webhook.id, { at: at(14) })), { failures: 0, failingSince: null })
        const healed = await store.webhooks.getWebhook(webhook.id)
        assert.deepEqual([healed?.failures, healed?.failingSince], [0, null])
        const [d3] = await deliveriesOf(store, other.id)
        assert.ok(d3 !== undefined)
        assert.deepEqual(await record(store, outcome(d3.id, other.id, { at: at(15) })), { failures: 1, failingSince: at(15) })
      })
    })

    describe('releaseWebhookLeases', () => {
      test('when an owner releases leases, then only its own are released and can be claimed at once', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        await subscribe(store, 'rel', 'key_a')
        await addPets(store, [1, 2, 3])
        await enqueue(store)
        const mine = await claim(store, { owner: 'instance-a', limit: 2 })
        const theirs = await claim(store, { owner: 'instance-b', limit: 1 })
        assert.equal(mine.length, 2)
        assert.equal(theirs.length, 1)
        await store.webhooks.releaseWebhookLeases('instance-a', [...ids(mine), ...ids(theirs)])
        assert.deepEqual(ids(await claim(store, { owner: 'instance-c', at: at(11) })), ids(mine), 'instance-b\'s lease holds')
        await store.webhooks.releaseWebhookLeases('instance-a', [])
      })
    })

    describe('listWebhookDeliveries, getWebhookDelivery', () => {
      test('when deliveries are listed, then they come newest first, page by beforeId, each with its attempts oldest first; only the subscription\'s own', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'pages', 'key_a')
        const other = await subscribe(store, 'others', 'key_a')
        await addPets(store, [1, 2, 3, 4, 5])
        await enqueue(store)
        const all = await store.webhooks.listWebhookDeliveries(webhook.id, null, 100)
        assert.equal(all.length, 5)
        assert.deepEqual(all.map((d) => d.id), all.map((d) => d.id).sort((a, b) => Number(b - a)), 'newest first')
        assert.deepEqual(all.map((d) => d.webhookId), Array(5).fill(webhook.id))
        const pages: bigint[][] = []
        for (let before: bigint | null = null; ;) {
          const page = await store.webhooks.listWebhookDeliveries(webhook.id, before, 2)
          if (page.length === 0) break
          pages.push(page.map((d) => d.id))
          before = page.at(-1)?.id ?? null
        }
        assert.deepEqual(pages, [all.slice(0, 2), all.slice(2, 4), all.slice(4)].map((p) => p.map((d) => d.id)))
        const target = all[2] as WebhookDelivery
        for (const [i, second] of [11, 12, 13].entries()) {
          await record(store, outcome(target.id, webhook.id, { at: at(second), status: 500 + i, nextAttemptAt: at(20) }))
        }
        const listed = (await store.webhooks.listWebhookDeliveries(webhook.id, null, 100))[2]
        assert.deepEqual(listed?.attempts.map((a) => [a.attempt, a.at, a.status]), [[1, at(11), 500], [2, at(12), 501], [3, at(13), 502]])
        assert.deepEqual(await store.webhooks.getWebhookDelivery(webhook.id, target.id), listed)
        assert.equal(await store.webhooks.getWebhookDelivery(other.id, target.id), null, 'another subscription\'s delivery')
        assert.equal(await store.webhooks.getWebhookDelivery(webhook.id, 999_999n), null)
        assert.deepEqual(await store.webhooks.listWebhookDeliveries(webhook.id, all.at(-1)?.id ?? 0n, 10), [])
        assert.deepEqual((await store.webhooks.listWebhookDeliveries(webhook.id, INT64_MAX, 10)).map((d) => d.id), all.map((d) => d.id), 'before the largest id: all')
      })
    })

    describe('retryWebhookDelivery', () => {
      test('when a delivered or failed delivery is retried, then it is pending and due again at the time given, until the new give-up time; not another subscription\'s', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'retry', 'key_a')
        const other = await subscribe(store, 'notmine', 'key_a')
        await addPets(store, [1, 2])
        await enqueue(store)
        const [d1, d2] = await deliveriesOf(store, webhook.id)
        assert.ok(d1 !== undefined && d2 !== undefined)
        await claim(store, { exclude: [other.id] })
        await record(store, delivered(d1.id, webhook.id))
        await record(store, outcome(d2.id, webhook.id, { state: 'failed', nextAttemptAt: null }))
        assert.equal(await store.webhooks.retryWebhookDelivery(other.id, d1.id, at(500), at(900)), null)
        assert.equal((await store.webhooks.getWebhookDelivery(webhook.id, d1.id))?.state, 'delivered', 'unchanged by a retry through another subscription')
        assert.equal(await store.webhooks.retryWebhookDelivery(webhook.id, 999_999n, at(500), at(900)), null)
        const again = await store.webhooks.retryWebhookDelivery(webhook.id, d1.id, at(500), at(900))
        assert.deepEqual(again, { ...d1, state: 'pending', nextAttemptAt: at(500), giveUpAt: at(900), attempts: (await store.webhooks.getWebhookDelivery(webhook.id, d1.id))?.attempts })
        assert.equal(again?.attempts.length, 1, 'the log stays')
        const failedAgain = await store.webhooks.retryWebhookDelivery(webhook.id, d2.id, at(510), at(900))
        assert.deepEqual([failedAgain?.state, failedAgain?.nextAttemptAt, failedAgain?.giveUpAt], ['pending', at(510), at(900)])
        assert.deepEqual(await claim(store, { at: at(499), exclude: [other.id] }), [])
        const claimed = await claim(store, { at: at(510), exclude: [other.id] })
        assert.deepEqual(claimed.map((c) => [c.deliveryId, c.attempt, c.giveUpAt]), [[d1.id, 2, at(900)], [d2.id, 2, at(900)]])
      })

      test('when a leased delivery is retried, then the lease ends: it is claimed at once', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'retrylease', 'key_a')
        await addPets(store, [1])
        await enqueue(store)
        const [c] = await claim(store, { owner: 'instance-a', leaseUntil: at(1000) })
        assert.ok(c !== undefined)
        await store.webhooks.retryWebhookDelivery(webhook.id, c.deliveryId, at(20), at(900))
        assert.deepEqual(ids(await claim(store, { owner: 'instance-b', at: at(20) })), [c.deliveryId])
      })
    })

    describe('webhookBacklog', () => {
      test('when deliveries wait, then the backlog counts each subscription\'s pending ones with the oldest\'s creation; every subscription is listed', async (t) => {
        const { store } = await open(t)
        await addKey(store, 'key_a')
        const busy = await subscribe(store, 'busy', 'key_a')
        const quiet = await subscribe(store, 'quiet', 'key_a', { createdAt: at(1) })
        await store.webhooks.updateWebhook(quiet.id, { enabled: false, disabledReason: 'quiet' }, at(1))
        assert.deepEqual(await store.webhooks.webhookBacklog(), [busy.id, quiet.id].sort().map((webhookId) => ({ webhookId, pending: 0, oldest: null })))
        await addPets(store, [1, 2])
        await enqueue(store, at(1))
        await setStock(store, 1, 5)
        await setStock(store, 2, 5)
        await enqueue(store, at(5))
        const backlog = async () => [...await store.webhooks.webhookBacklog()].sort((a, b) => a.webhookId < b.webhookId ? -1 : 1)
        assert.deepEqual(await backlog(), [{ webhookId: busy.id, pending: 4, oldest: at(1) }, { webhookId: quiet.id, pending: 0, oldest: null }].sort((a, b) => a.webhookId < b.webhookId ? -1 : 1))
        const [d1, d2, d3] = await deliveriesOf(store, busy.id)
        assert.ok(d1 !== undefined && d2 !== undefined && d3 !== undefined)
        assert.equal((await claim(store, { at: at(10) })).length, 4)
        await record(store, delivered(d1.id, busy.id))
        await record(store, outcome(d2.id, busy.id, { state: 'failed', nextAttemptAt: null }))
        await record(store, outcome(d3.id, busy.id, { state: 'pending', nextAttemptAt: at(100) }))
        assert.deepEqual((await backlog()).find((b) => b.webhookId === busy.id), { webhookId: busy.id, pending: 2, oldest: at(5) })
      })
    })

    describe('purgeWebhookDeliveries', () => {
      test('when purging, then only delivered or failed deliveries created before the time go, at most limit a call, with their attempts', async (t) => {
        const { store, count } = await open(t)
        await addKey(store, 'key_a')
        const webhook = await subscribe(store, 'purge', 'key_a')
        await addPets(store, [1, 2, 3])
        await enqueue(store, at(1))
        await setStock(store, 1, 9)
        await enqueue(store, at(100))
        const [done, failed, waiting, recent] = await deliveriesOf(store, webhook.id)
        assert.ok(done !== undefined && failed !== undefined && waiting !== undefined && recent !== undefined)
        assert.equal((await claim(store, { at: at(100) })).length, 4)
        await record(store, delivered(done.id, webhook.id))
        await record(store, outcome(failed.id, webhook.id, { state: 'failed', nextAttemptAt: null }))
        await record(store, outcome(waiting.id, webhook.id))
        await record(store, delivered(recent.id, webhook.id, { at: at(101) }))
        assert.equal(await count('webhook_attempts'), 4)
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(50), 1), 1)
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(50), 10), 1)
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(50), 10), 0)
        assert.deepEqual((await deliveriesOf(store, webhook.id)).map((d) => d.id), [waiting.id, recent.id])
        assert.equal(await count('webhook_attempts'), 2, 'the purged ones\' attempts went with them')
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(100), 10), 0, 'created at the time: not before it')
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(101), 10), 1)
      })

      test('when a subscription is disabled or its quota has no active key, then its pending deliveries created before the time go too; enabled again, it gets what is left and what was committed meanwhile', async (t) => {
        const { store, count } = await open(t)
        await addKey(store, 'key_a')
        await addKey(store, 'key_expiring', { expiresAt: at(30) })
        await addKey(store, 'key_revoked')
        const parked = await subscribe(store, 'parked', 'key_a')
        const live = await subscribe(store, 'live', 'key_a')
        const expired = await subscribe(store, 'expired', 'key_expiring')
        const revoked = await subscribe(store, 'revoked', 'key_revoked')
        await addPets(store, [1, 2])
        assert.equal(await enqueue(store, at(1)), 8)
        const [failing] = await deliveriesOf(store, live.id)
        assert.ok(failing !== undefined)
        assert.equal((await claim(store, { at: at(1), perSubscription: 1 })).length, 4)
        await record(store, outcome(failing.id, live.id, { at: at(2), nextAttemptAt: at(3600) }))
        await store.webhooks.updateWebhook(parked.id, { enabled: false, disabledReason: '410 Gone' }, at(2))
        await store.keys.revokeApiKey('key_revoked', at(2))
        await setStock(store, 1, 9)
        assert.equal(await enqueue(store, at(100)), 1, 'only the live subscription takes the change committed meanwhile')

        // The expiring key was still active at at(20): its quota's backlog stays until a time after the expiry.
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(20), 1), 1, 'at most limit')
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(20), 10), 3)
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(20), 10), 0)
        assert.deepEqual([(await deliveriesOf(store, parked.id)).length, (await deliveriesOf(store, revoked.id)).length], [0, 0])
        assert.equal((await deliveriesOf(store, expired.id)).length, 2)
        assert.equal(await store.webhooks.purgeWebhookDeliveries(at(40), 10), 2)
        assert.deepEqual((await deliveriesOf(store, live.id)).map((d) => d.state), ['pending', 'pending', 'pending'], 'an enabled subscription\'s pending deliveries stay, failing or not')
        assert.equal(await count('webhook_attempts'), 1, 'the live one\'s attempt stays')

        // Enabled again: the change committed while it was disabled is delivered (the older ones were purged).
        await store.webhooks.updateWebhook(parked.id, { enabled: true }, at(110))
        assert.equal(await enqueue(store, at(110)), 1)
        const claimed = await claim(store, { at: at(110), exclude: [live.id] })
        assert.deepEqual(claimed.map((c) => [c.webhookId, c.change.petId, c.change.quantity]), [[parked.id, 1n, 9]])
      })
    })
  })
}
