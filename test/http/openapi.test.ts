import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { testApp } from '../helpers/app.js'

interface Operation {
  operationId: string
  deprecated?: boolean
  'x-stability'?: string
  description?: string
  parameters?: Array<{ name: string, in: string, description?: string, schema: { type: string, format?: string } }>
  responses: Record<string, { description: string, content?: Record<string, { schema: { properties?: Record<string, { enum?: string[] }> } }> }>
}

async function document (t: Parameters<typeof testApp>[0], env: Record<string, string> = {}) {
  const { request } = await testApp(t, env)
  const res = await request({ method: 'GET', url: '/v1/openapi.json' })
  assert.equal(res.statusCode, 200)
  return res.json() as { openapi: string, info: { version: string }, servers: Array<{ url: string }>, paths: Record<string, Record<string, Operation>>, components: { securitySchemes: Record<string, unknown> }, security: unknown[] }
}

function codesOf (operation: Operation, status: string): string[] | undefined {
  return operation.responses[status]?.content?.['application/json']?.schema.properties?.code?.enum
}

describe('GET /v1/openapi.json', () => {
  test('when fetched without a key, then it is an OpenAPI 3.1 document for API version 1.0.0', async (t) => {
    const doc = await document(t)
    assert.equal(doc.openapi, '3.1.0')
    assert.equal(doc.info.version, '1.0.0')
  })

  test('when servers are configured, then they name production and staging with the /v1 prefix', async (t) => {
    const doc = await document(t, { PRODUCTION_URL: 'https://api.example.test', STAGING_URL: 'https://staging.example.test/' })
    assert.deepEqual(doc.servers.map((s) => s.url), ['https://api.example.test/v1', 'https://staging.example.test/v1'])
  })

  test('when read, then it lists the four operations of the spec, the entry lookup, adjustments, batches, the change feed, the key\'s rate limit, and nothing internal', async (t) => {
    const doc = await document(t)
    assert.deepEqual(Object.keys(doc.paths).sort(),
      ['/holds', '/holds/{holdId}', '/holds/{holdId}/confirm', '/holds/{holdId}/extend', '/holds/{holdId}/release',
        '/inventory', '/inventory/batch', '/inventory/changes', '/inventory/changes/stream', '/inventory/{petId}', '/inventory/{petId}/adjustments', '/inventory/{petId}/reorder-point', '/pets/{petId}', '/rate_limit',
        '/store/orders', '/store/orders/{orderId}', '/store/orders/{orderId}/approve', '/store/orders/{orderId}/cancel', '/store/orders/{orderId}/deliver',
        '/webhooks', '/webhooks/{webhookId}', '/webhooks/{webhookId}/deliveries', '/webhooks/{webhookId}/deliveries/{deliveryId}/retry',
        '/webhooks/{webhookId}/secret'])
    const webhookOperations = [['/webhooks', 'post', 'createWebhook'], ['/webhooks', 'get', 'listWebhooks'], ['/webhooks/{webhookId}', 'get', 'getWebhook'],
      ['/webhooks/{webhookId}', 'patch', 'updateWebhook'], ['/webhooks/{webhookId}', 'delete', 'deleteWebhook'], ['/webhooks/{webhookId}/secret', 'post', 'rotateWebhookSecret'],
      ['/webhooks/{webhookId}/deliveries', 'get', 'listWebhookDeliveries'], ['/webhooks/{webhookId}/deliveries/{deliveryId}/retry', 'post', 'retryWebhookDelivery']] as const
    const holdOperations = [['/holds', 'post', 'placeHold'], ['/holds', 'get', 'listHolds'], ['/holds/{holdId}', 'get', 'getHold'],
      ['/holds/{holdId}/extend', 'post', 'extendHold'], ['/holds/{holdId}/confirm', 'post', 'confirmHold'], ['/holds/{holdId}/release', 'post', 'releaseHold']] as const
    for (const [path, method, operationId] of [...webhookOperations, ...holdOperations]) {
      const operation = (doc.paths[path] as Record<string, { operationId?: string, 'x-stability'?: string } | undefined> | undefined)?.[method]
      assert.deepEqual([operation?.operationId, operation?.['x-stability']], [operationId, 'beta'], `${method} ${path}`)
    }
    assert.equal(doc.paths['/inventory/changes']?.get?.operationId, 'listInventoryChanges')
    assert.equal(doc.paths['/inventory/changes']?.get?.['x-stability'], 'beta')
    assert.equal(doc.paths['/inventory/batch']?.post?.operationId, 'batchUpdateInventory')
    assert.equal(doc.paths['/inventory/batch']?.post?.['x-stability'], 'beta')
    assert.equal(doc.paths['/inventory/{petId}/adjustments']?.post?.operationId, 'adjustInventory')
    assert.equal(doc.paths['/inventory/{petId}/adjustments']?.post?.['x-stability'], 'beta')
    assert.equal(doc.paths['/inventory']?.get?.operationId, 'listInventory')
    assert.equal(doc.paths['/inventory/{petId}']?.patch?.operationId, 'updateInventory')
    assert.equal(doc.paths['/inventory/{petId}']?.get?.operationId, 'getInventoryItem')
    assert.equal(doc.paths['/pets/{petId}']?.get?.operationId, 'getPetById')
    assert.equal(doc.paths['/store/orders']?.get?.operationId, 'listOrders')
  })

  test('when read, then the event the service sends is described under the top-level webhooks object, its body the feed\'s change', async (t) => {
    const doc = await document(t) as unknown as { webhooks?: Record<string, { post?: { requestBody?: { content?: Record<string, { schema?: { properties?: Record<string, unknown> } }> }, parameters?: Array<{ name: string }> } }> }
    const event = doc.webhooks?.['inventory.changed']?.post
    assert.ok(event !== undefined, 'webhooks.inventory.changed.post')
    assert.deepEqual(event.parameters?.map((p) => p.name), ['webhook-id', 'webhook-timestamp', 'webhook-signature'])
    const schema = event.requestBody?.content?.['application/json']?.schema
    assert.deepEqual(Object.keys(schema?.properties ?? {}), ['type', 'timestamp', 'data'])
    const data = schema?.properties?.data as { properties?: Record<string, unknown> }
    assert.ok('cursor' in (data.properties ?? {}) && 'changeId' in (data.properties ?? {}))
  })

  test('when read, then the webhooks object lists every event type a subscription may name, each with its body\'s schema', async (t) => {
    type Body = { properties?: { type?: { const?: string }, data?: { properties?: Record<string, unknown> } } }
    const doc = await document(t) as unknown as { webhooks?: Record<string, { post?: { operationId?: string, parameters?: Array<{ name: string }>, requestBody?: { content?: Record<string, { schema?: Body }> } } }> }
    const types = ['inventory.changed', 'hold.placed', 'hold.confirmed', 'hold.released', 'hold.expired', 'inventory.low_stock']
    assert.deepEqual(Object.keys(doc.webhooks ?? {}), types)
    const holdData = ['changeId', 'petId', 'holdId', 'reference', 'quantity', 'held', 'available', 'at', 'cursor']
    for (const type of types) {
      const post = doc.webhooks?.[type]?.post
      assert.deepEqual(post?.parameters?.map((p) => p.name), ['webhook-id', 'webhook-timestamp', 'webhook-signature'], type)
      const body = post?.requestBody?.content?.['application/json']?.schema
      assert.equal(body?.properties?.type?.const, type, `${type}: the body names its type`)
      const data = Object.keys(body?.properties?.data?.properties ?? {})
      if (type.startsWith('hold.')) assert.deepEqual(data, holdData, type)
      if (type === 'inventory.low_stock') assert.deepEqual(data, ['changeId', 'petId', 'quantity', 'reorderPoint', 'at', 'cursor'])
    }
    assert.equal(new Set(types.map((type) => doc.webhooks?.[type]?.post?.operationId)).size, types.length, 'operationIds are unique')
    const events = (doc as unknown as { paths: Record<string, { post?: { requestBody?: { content?: Record<string, { schema?: { properties?: { events?: { description?: string } } } }> } } }> })
      .paths['/webhooks']?.post?.requestBody?.content?.['application/json']?.schema?.properties?.events?.description ?? ''
    for (const type of types) assert.ok(events.includes(`\`${type}\``), `createWebhook's events name ${type}`)
  })

  test('when read, then the change stream is a beta operation answering text/event-stream, each event\'s data the feed\'s change', async (t) => {
    const doc = await document(t)
    const operation = doc.paths['/inventory/changes/stream']?.get
    assert.deepEqual([operation?.operationId, operation?.['x-stability']], ['streamInventoryChanges', 'beta'])
    assert.deepEqual(doc.paths['/inventory/changes/stream'] === undefined ? [] : Object.keys(doc.paths['/inventory/changes/stream']), ['get'], 'no HEAD')
    assert.deepEqual(operation?.parameters?.map((p) => `${p.in} ${p.name}`).sort(), ['header last-event-id', 'query after', 'query types'])
    const ok = operation?.responses['200']
    assert.deepEqual(Object.keys(ok?.content ?? {}), ['text/event-stream'])
    type Members = { anyOf?: Array<{ properties?: Record<string, unknown> }> }
    const data = (ok?.content?.['text/event-stream']?.schema as Members | undefined)?.anyOf ?? []
    const change = doc.paths['/inventory/changes']?.get?.responses['200']?.content?.['application/json']?.schema as { items?: Members } | undefined
    const fields = (members: Members['anyOf']) => (members ?? []).map((member) => Object.keys(member.properties ?? {}))
    assert.deepEqual(fields(data), fields(change?.items?.anyOf), 'each event\'s data is an entry of the feed')
    assert.ok(fields(data).length === 4 && fields(data)[0]?.includes('cursor') === true && fields(data)[0]?.includes('type') === false,
      'the first member: a stock change as the feed always showed it, without `type`')
    assert.ok('X-RateLimit-Remaining' in ((ok as { headers?: Record<string, unknown> } | undefined)?.headers ?? {}))
  })

  test('when read, then updateInventory is experimental and getPetById is deprecated', async (t) => {
    const doc = await document(t)
    assert.equal(doc.paths['/inventory/{petId}']?.patch?.['x-stability'], 'experimental')
    assert.equal(doc.paths['/pets/{petId}']?.get?.deprecated, true)
    assert.equal(doc.paths['/inventory']?.get?.deprecated, undefined)
  })

  test('when read, then every operation requires the http bearer scheme, naming its scope', async (t) => {
    const doc = await document(t)
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: 'http',
      scheme: 'bearer',
      description: 'An API key (psk_live_... or psk_test_...). Each operation names the scope it needs: inventory:read (any key), inventory:sell (keys of scope storefront or write: holds and orders) or inventory:write (keys of scope write: stock and webhooks).'
    })
    assert.deepEqual(doc.security, [{ bearerAuth: [] }])
    for (const operations of Object.values(doc.paths as Record<string, Record<string, { security?: unknown }>>)) {
      for (const operation of Object.values(operations)) assert.equal((operation.security as unknown[] | undefined)?.length, 1)
    }
  })

  test('when read, then path ids are documented as int64 integers', async (t) => {
    const doc = await document(t)
    for (const operation of [doc.paths['/inventory/{petId}']?.patch, doc.paths['/pets/{petId}']?.get]) {
      const petId = operation?.parameters?.find((p) => p.name === 'petId')
      assert.equal(petId?.in, 'path')
      assert.equal(petId?.schema.type, 'integer')
      assert.equal(petId?.schema.format, 'int64')
    }
  })

  test('when read, then every stock write takes an Idempotency-Key, states the retention, and documents Idempotent-Replayed', async (t) => {
    const doc = await document(t)
    for (const operation of [doc.paths['/inventory/{petId}']?.patch, doc.paths['/inventory/{petId}/adjustments']?.post, doc.paths['/inventory/batch']?.post]) {
      const key = operation?.parameters?.find((p) => p.name === 'idempotency-key')
      assert.equal(key?.in, 'header')
      assert.match(String(key?.description), /1 to 255 printable ASCII/)
      assert.match(String(operation?.description), /within 24 hours is answered what the first request was/)
      const replayed = (operation?.responses['200'] as { headers?: Record<string, unknown> } | undefined)?.headers?.['Idempotent-Replayed']
      assert.ok(replayed, 'the 200 answer documents Idempotent-Replayed')
    }
  })

  test('when read, then every response each operation can give is listed with its error codes', async (t) => {
    const doc = await document(t)
    const LIMITED = ['rate_limited', 'key_banned']
    const expected: Record<string, Record<string, string[] | null>> = {
      '/inventory get': { 200: null, 304: null, 401: ['unauthorized'], 414: ['uri_too_long'], 429: LIMITED, 500: ['internal_error'], 503: ['service_unavailable'] },
      '/inventory/{petId} get': { 200: null, 304: null, 400: ['invalid_request'], 401: ['unauthorized'], 404: ['not_found'], 414: ['uri_too_long'], 429: LIMITED, 500: ['internal_error'], 503: ['service_unavailable'] },
      '/inventory/{petId} patch': {
        200: null, 400: ['invalid_request'], 401: ['unauthorized'], 403: ['insufficient_scope'], 404: ['not_found'], 409: ['idempotency_key_in_flight'], 412: ['precondition_failed'],
        413: ['payload_too_large'], 415: ['unsupported_media_type'], 414: ['uri_too_long'], 422: ['idempotency_key_reused'], 429: LIMITED,
        500: ['internal_error'], 503: ['service_unavailable']
      },
      '/inventory/{petId}/adjustments post': {
        200: null, 400: ['invalid_request'], 401: ['unauthorized'], 403: ['insufficient_scope'], 404: ['not_found'], 409: ['stock_out_of_range', 'idempotency_key_in_flight'],
        412: ['precondition_failed'], 413: ['payload_too_large'], 415: ['unsupported_media_type'], 414: ['uri_too_long'], 422: ['idempotency_key_reused'],
        429: LIMITED, 500: ['internal_error'], 503: ['service_unavailable']
      },
      '/inventory/batch post': {
        200: null, 400: ['invalid_request'], 401: ['unauthorized'], 403: ['insufficient_scope'], 409: ['batch_refused', 'idempotency_key_in_flight'], 413: ['payload_too_large'], 414: ['uri_too_long'],
        415: ['unsupported_media_type'], 422: ['idempotency_key_reused'], 429: LIMITED, 500: ['internal_error'], 503: ['service_unavailable']
      },
      '/inventory/changes get': {
        200: null, 400: ['invalid_request'], 401: ['unauthorized'], 410: ['cursor_expired'], 414: ['uri_too_long'], 429: LIMITED, 500: ['internal_error'], 503: ['service_unavailable']
      },
      '/inventory/changes/stream get': {
        200: null, 400: ['invalid_request'], 401: ['unauthorized'], 410: ['cursor_expired'], 414: ['uri_too_long'], 429: [...LIMITED, 'too_many_streams'], 500: ['internal_error'],
        503: ['service_unavailable']
      },
      '/pets/{petId} get': { 200: null, 400: ['invalid_request'], 401: ['unauthorized'], 404: ['not_found'], 410: ['gone'], 414: ['uri_too_long'], 429: LIMITED, 500: ['internal_error'], 503: ['service_unavailable'] },
      '/store/orders get': { 200: null, 400: ['invalid_request'], 401: ['unauthorized'], 414: ['uri_too_long'], 429: LIMITED, 500: ['internal_error'], 503: ['service_unavailable'] },
      '/rate_limit get': { 200: null, 401: ['unauthorized'], 414: ['uri_too_long'], 429: ['rate_limited'], 500: ['internal_error'], 503: ['service_unavailable'] }
    }
    for (const [key, responses] of Object.entries(expected)) {
      const [path, method] = key.split(' ') as [string, string]
      const operation = doc.paths[path]?.[method]
      assert.ok(operation, key)
      assert.deepEqual(Object.keys(operation.responses).sort(), Object.keys(responses).sort(), key)
      for (const [status, codes] of Object.entries(responses)) {
        if (codes !== null) assert.deepEqual(codesOf(operation, status), codes, `${key} ${status}`)
      }
    }
  })
})
