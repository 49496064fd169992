/**
 * Upgrading to store epochs breaks nothing already sent. The previous release (the last commit before migration 11,
 * built from git: test/helpers/release.ts) makes changes, hands out their `f1:` cursors and attempts a webhook
 * delivery, which fails; then this release migrates the store and serves it. The old cursors keep working on the feed
 * and the stream, the old changes keep their cursors, the pending delivery is retried with the webhook-id of its
 * earlier attempt, and only changes made after the upgrade get the new forms.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, test, type TestContext } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { PostgresStore } from '../../src/store/postgres-store.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { Store } from '../../src/store/store.js'
import { auth, newKey, tempDir } from '../helpers/app.js'
import { ownDatabase, requirePostgres } from '../helpers/postgres.js'
import { releaseFromGit } from '../helpers/release.js'
import { waitFor } from '../helpers/wait.js'
import { receiver } from '../helpers/webhooks.js'

/** 4726137: the last commit before migration 11 (store epochs). */
const PREVIOUS_RELEASE = '47261374450492b30e945fe0067ac1196d929bd3'

/** What this test calls of the previous release (its src/), built while the test runs, out of the compiler's sight. */
interface PreviousStore {
  migrate (): Promise<number>
  setQuantity (change: object): Promise<{ status: string }>
  createApiKey (key: object): Promise<void>
  createWebhook (webhook: object, maxPerQuota: number): Promise<unknown>
  listChanges (after: null, limit: number): Promise<Array<{ id: bigint, position: { order: bigint, id: bigint } }>>
  listWebhookDeliveries (webhookId: string, beforeId: null, limit: number): Promise<Array<{ attempts: unknown[], state: string }>>
  close (): Promise<void>
}
interface PreviousDispatcher { start (): void, stop (): Promise<void> }
interface PreviousRelease {
  SqliteStore: new (path: string) => PreviousStore
  PostgresStore: new (url: string, options: { schema: string }) => PreviousStore
  importData: (store: PreviousStore, data: { pets: object[], orders: object[] }) => Promise<unknown>
  feedCursor: (position: { order: bigint, id: bigint }) => string
  WebhookDispatcher: new (options: object) => PreviousDispatcher
}

async function loadRelease (dir: string | undefined): Promise<PreviousRelease | undefined> {
  if (dir === undefined) return undefined
  const load = (path: string) => import(pathToFileURL(join(dir, path)).href)
  const [{ SqliteStore }, { PostgresStore }, { importData }, { feedCursor }, { WebhookDispatcher }] = await Promise.all([
    load('src/store/sqlite/index.ts'), load('src/store/postgres/index.ts'), load('src/domain/import.ts'), load('src/domain/feed.ts'), load('src/domain/webhook-dispatch.ts')])
  return { SqliteStore, PostgresStore, importData, feedCursor, WebhookDispatcher }
}

const WHAT = 'upgrading a store of the previous release to store epochs'
const previous = await loadRelease(releaseFromGit(PREVIOUS_RELEASE, WHAT))

const FAST = { AUTH_CACHE_TTL_MS: '0', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20', WEBHOOK_RETRY_BASE_MS: '50', WEBHOOK_RETRY_MAX_DELAY_MS: '200', WEBHOOK_TIMEOUT_MS: '2000' }
const POLICY = {
  concurrency: 4, perQuota: 4, perSubscription: 4, timeoutMs: 2000, retryForMs: 3_600_000, retryBaseMs: 20, retryMaxDelayMs: 50,
  disableAfterFailures: 1000, disableAfterMs: 3_600_000, pollMs: 20, retentionMs: 86_400_000
}

interface Change { changeId: number, quantity: number, cursor: string }

/**
 * The previous release writes and delivers on `old`; this release then opens the same store with `open` and serves it.
 */
async function upgrade (t: TestContext, release: PreviousRelease, old: PreviousStore, open: () => Promise<Store>): Promise<void> {
  const hook = await receiver(t)
  const secret = `whsec_${randomBytes(32).toString('base64')}`
  hook.secrets.push(secret)

  // The previous release: a catalogue, a subscription, a change after it, and a failed attempt to deliver it.
  await old.migrate()
  await release.importData(old, { pets: [{ id: 1n, name: 'Rex', status: 'available', quantity: 1 }, { id: 2n, name: 'Tom', status: 'available', quantity: 2 }], orders: [] })
  const at = new Date()
  await old.createApiKey({ id: 'key_old', keyHash: 'hash-old', name: 'old', plan: 'pro', perMinute: null, perDay: null, createdAt: at })
  await old.createWebhook({ id: 'wh_old', quotaId: 'key_old', url: hook.url, events: ['inventory.changed'], description: null, secret, createdAt: at }, 10)
  assert.equal((await old.setQuantity({ petId: 1n, quantity: 5, expectedRevisions: null, reason: 'arrival', note: null, keyId: 'key_old', requestId: null, at })).status, 'updated')
  const sent: string[] = []
  const dispatcher = new release.WebhookDispatcher({
    store: old,
    transport: { send: async (request: { headers: Record<string, string> }) => { sent.push(request.headers['webhook-id'] as string); return { status: 503, error: null, durationMs: 1 } } },
    policy: POLICY,
    owner: 'previous-release'
  })
  dispatcher.start()
  await waitFor('the previous release\'s attempt recorded', async () => ((await old.listWebhookDeliveries('wh_old', null, 10))[0]?.attempts.length ?? 0) >= 1)
  await dispatcher.stop()
  const oldCursors = (await old.listChanges(null, 100)).map((change) => release.feedCursor(change.position))
  await old.close()
  assert.deepEqual([...new Set(sent)], ['evt_3'], 'the previous release sent the change (once or more) as evt_3')
  assert.match(Buffer.from(oldCursors[0] as string, 'base64url').toString(), /^f1:/)

  // This release: migrated, serving, with a new change.
  const store = await open()
  await store.schema.migrate()
  await store.schema.confirmEpoch()
  const app = await buildApp(loadConfig(FAST), { store, logger: false })
  t.after(() => app.close())
  const base = await app.listen({ port: 0, host: '127.0.0.1' })
  const key = await newKey(store, 'enterprise')
  const patched = await app.inject({ method: 'PATCH', url: '/v1/inventory/2', headers: { ...auth(key), 'content-type': 'application/json' }, payload: { quantity: 9 } })
  assert.equal(patched.statusCode, 200, patched.body)

  // The pending delivery goes out again under its earlier webhook-id, with its earlier cursor; the new change under the new form.
  await hook.until(() => hook.received.length >= 2, 30_000)
  const retried = hook.received.find((r) => r.event.data.quantity === 5)
  assert.equal(retried?.id, 'evt_3', 'the same webhook-id as the attempt before the upgrade')
  assert.equal(retried?.event.data.cursor, oldCursors[2], 'and the same cursor')
  const fresh = hook.received.find((r) => r.event.data.quantity === 9)
  const { epochs } = await store.stock.feedHistory()
  assert.deepEqual(epochs.map((e) => e.reason), ['upgraded'])
  assert.equal(fresh?.id, `evt_${epochs[0]?.epoch}_4`)

  // The old cursors keep working on the feed, and the old changes keep their cursors.
  const res = await app.inject({ method: 'GET', url: `/v1/inventory/changes?after=${oldCursors[0]}`, headers: auth(key) })
  assert.equal(res.statusCode, 200, res.body)
  const changes = res.json<Change[]>()
  assert.deepEqual(changes.map((c) => c.quantity), [2, 5, 9])
  assert.deepEqual(changes.slice(0, 2).map((c) => c.cursor), oldCursors.slice(1))
  assert.match(Buffer.from(changes[2]?.cursor as string, 'base64url').toString(), new RegExp(`^f2:${epochs[0]?.epoch}:`))
  // ... and on the stream, as Last-Event-ID.
  const stream = await fetch(`${base}/v1/inventory/changes/stream`, { headers: { ...auth(key), 'last-event-id': oldCursors[1] as string } })
  assert.equal(stream.status, 200)
  const reader = (stream.body as ReadableStream<Uint8Array>).getReader()
  let text = ''
  while (!text.includes('"quantity":9')) text += new TextDecoder().decode((await reader.read()).value)
  await reader.cancel()
  assert.deepEqual([...text.matchAll(/^id: (.*)$/gm)].map((m) => m[1]), [oldCursors[2], changes[2]?.cursor], 'replayed from the old cursor, with the old change\'s own')
}

if (previous !== undefined) {
  describe(WHAT, () => {
    test('when a SQLite store of the previous release is upgraded, then its f1 cursors keep working and its pending delivery keeps its webhook-id', async (t) => {
      const path = join(tempDir(t), 'upgraded.db')
      await upgrade(t, previous, new previous.SqliteStore(path), async () => {
        const store = new SqliteStore(path)
        t.after(() => store.close())
        return store
      })
    })
  })

  if (await requirePostgres('upgrading a PostgreSQL store of the previous release to store epochs')) {
    describe(`${WHAT} (PostgreSQL)`, () => {
      test('when a PostgreSQL store of the previous release is upgraded, then its f1 cursors keep working and its pending delivery keeps its webhook-id', async (t) => {
        // A database of its own (advisory locks are per database, and other tests' imports take the same keys),
        // dropped after everything on it closed: after hooks run in the order they were registered.
        const { url, drop } = await ownDatabase()
        const schema = 'public'
        try {
          await upgrade(t, previous, new previous.PostgresStore(url, { schema }), async () => {
            const store = new PostgresStore(url, { schema })
            t.after(() => store.close())
            return store
          })
        } finally {
          t.after(drop)
        }
      })
    })
  }
}
