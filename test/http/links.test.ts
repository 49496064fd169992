/**
 * Every link the service sends (the rel="next" of each listing that pages, the Location of a new subscription) as a
 * client behind a reverse proxy that serves the API under a path prefix sees it: resolved against the URL the client
 * asked for, it leads to the next page under the same prefix, and following it (through the proxy, which strips the
 * prefix) answers that page.
 */
import assert from 'node:assert/strict'
import type { FastifyInstance } from 'fastify'
import { describe, test, type TestContext } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { importData } from '../../src/domain/import.js'
import { auth, newKey, order, pet, tempStore } from '../helpers/app.js'
import { waitFor } from '../helpers/wait.js'
import { receiver } from '../helpers/webhooks.js'

/** The address the proxy serves the API at: everything under /inventory-api goes to the service without it. */
const PUBLIC = 'https://gateway.example/inventory-api'

async function app (t: TestContext): Promise<{ app: FastifyInstance, key: string }> {
  const store = await tempStore(t)
  await importData(store, { pets: [pet(1, { quantity: 3 }), pet(2, { quantity: 5 }), pet(3, { quantity: 7 })], orders: [order(1), order(2), order(3)] })
  const app = await buildApp(loadConfig({ AUTH_CACHE_TTL_MS: '0', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20' }), { store, logger: false })
  t.after(() => app.close())
  return { app, key: await newKey(store, 'enterprise') }
}

/**
 * What the proxy does with a request for `url` (an address under PUBLIC): the service gets the path without the
 * prefix. Fails when the address is not under the prefix, as the proxy would answer 404 there.
 */
async function throughProxy (app: FastifyInstance, key: string, url: URL): Promise<Awaited<ReturnType<FastifyInstance['inject']>>> {
  const prefix = new URL(PUBLIC)
  assert.equal(url.origin, prefix.origin, `${url.href} leaves the proxy`)
  assert.ok(url.pathname.startsWith(`${prefix.pathname}/`), `${url.href} is not under the proxy's prefix ${prefix.pathname}`)
  return await app.inject({ method: 'GET', url: url.pathname.slice(prefix.pathname.length) + url.search, headers: auth(key) })
}

/** Asks for `path` through the proxy, then follows the rel="next" link of the answer as a client does. */
async function twoPages (app: FastifyInstance, key: string, path: string): Promise<{ link: string, next: URL, first: unknown[], second: unknown[] }> {
  const requested = new URL(`${PUBLIC}${path}`)
  const first = await throughProxy(app, key, requested)
  assert.equal(first.statusCode, 200, first.body)
  const link = String(first.headers.link)
  const target = /^<([^>]*)>; rel="next"$/.exec(link)?.[1]
  assert.ok(target !== undefined, `no rel="next" link: ${link}`)
  const next = new URL(target, requested)
  const second = await throughProxy(app, key, next)
  assert.equal(second.statusCode, 200, second.body)
  return { link, next, first: first.json(), second: second.json() }
}

describe('links behind a proxy that adds a path prefix', () => {
  for (const [what, path, field, query] of [
    ['the inventory', '/v1/inventory?limit=2', 'petId', 'cursor'],
    ['the orders', '/v1/store/orders?limit=2', 'id', 'cursor'],
    ['the change feed', '/v1/inventory/changes?limit=2', 'changeId', 'after']
  ] as const) {
    test(`when paging ${what}, then the rel="next" link resolves under the prefix to the next page`, async (t) => {
      const { app: service, key } = await app(t)
      const { link, next, first, second } = await twoPages(service, key, path)
      assert.match(link, /^<\?/, 'a query-only reference: the path stays the one the client asked for')
      assert.equal(next.pathname, new URL(`${PUBLIC}${path}`).pathname)
      assert.equal(next.searchParams.get('limit'), '2')
      assert.ok(next.searchParams.get(query))
      const ids = (page: unknown[]): unknown[] => page.map((item) => (item as Record<string, unknown>)[field])
      assert.deepEqual([ids(first), ids(second)], [[1, 2], [3]])
    })
  }

  test('when paging a webhook\'s deliveries, then the rel="next" link resolves under the prefix; the new subscription\'s Location too', async (t) => {
    const { app: service, key } = await app(t)
    const hook = await receiver(t)
    const created = await service.inject({
      method: 'POST', url: '/v1/webhooks', headers: { ...auth(key), 'content-type': 'application/json' }, payload: { url: hook.url, events: ['inventory.changed'] }
    })
    assert.equal(created.statusCode, 201, created.body)
    const { id, secret } = created.json<{ id: string, secret: string }>()
    hook.secrets.push(secret)
    // Asked as PUBLIC/v1/webhooks: the Location names the subscription under the prefix.
    const location = new URL(String(created.headers.location), `${PUBLIC}/v1/webhooks`)
    assert.equal(location.href, `${PUBLIC}/v1/webhooks/${id}`)
    assert.equal((await throughProxy(service, key, location)).json<{ id: string }>().id, id)

    for (const quantity of [10, 11, 12]) {
      const res = await service.inject({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload: { quantity } })
      assert.equal(res.statusCode, 200)
    }
    await hook.until(() => hook.received.length === 3)
    const path = `/v1/webhooks/${id}/deliveries?limit=2`
    await waitFor('three deliveries in the log', async () => (await service.inject({ method: 'GET', url: path.replace('limit=2', 'limit=10'), headers: auth(key) })).json<unknown[]>().length === 3)
    const { next, first, second } = await twoPages(service, key, path)
    assert.equal(next.pathname, `/inventory-api/v1/webhooks/${id}/deliveries`)
    assert.deepEqual([first.length, second.length], [2, 1])
  })
})
