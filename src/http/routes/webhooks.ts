import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { Type, type Static } from 'typebox'
import { HOLD_EVENT_MEANINGS, INVENTORY_CHANGED, InventoryChangedEvent } from '../../domain/entities.js'
import { EVENT_BODIES } from '../../domain/entry-json.js'
import { feedCursor } from '../../domain/feed.js'
import { DEFAULT_DELIVERY_LIMIT, eventId, MAX_DELIVERY_LIMIT, WEBHOOK_EVENTS, type Webhooks, type WebhookView } from '../../domain/webhooks.js'
import { SAFE_TEXT_PATTERN, SAFE_TEXT_RULE } from '../../domain/text.js'
import { HOLD_EVENTS, LOW_STOCK, type LedgerEvent } from '../../model.js'
import type { WebhookDelivery } from '../../store/webhooks/types.js'
import { cursorRefused, linkNext, NEXT_LINK_FORM } from '../paging.js'
import { COMMON_ERRORS, ErrorResponse, Int64Text, INVALID_REQUEST, NOT_FOUND, RESPONSE_HEADERS } from '../schemas/common.js'

const MAX_WEBHOOK_URL_LENGTH = 2048
const MAX_DESCRIPTION_LENGTH = 200

const Url = Type.String({
  minLength: 1,
  maxLength: MAX_WEBHOOK_URL_LENGTH,
  description: 'Where deliveries are POSTed: an https URL of a public address (no user name or password); checked when saved and at every connection',
  examples: ['https://shop.example/hooks/petstore']
})
const Events = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  minItems: 1,
  maxItems: 10,
  description: `The event types to send: ${WEBHOOK_EVENTS.map((e) => '`' + e + '`').join(', ')}`,
  examples: [[INVENTORY_CHANGED]]
})
const Description = Type.String({
  minLength: 1, maxLength: MAX_DESCRIPTION_LENGTH, pattern: SAFE_TEXT_PATTERN, description: `A note for yourself (${SAFE_TEXT_RULE})`
})
const WebhookId = Type.String({ minLength: 1, maxLength: 64, description: 'The subscription\'s id (`wh_...`)' })

const Webhook = Type.Object({
  id: WebhookId,
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Type.Union([Type.String(), Type.Null()]),
  enabled: Type.Boolean({ description: 'Whether events are delivered; a 410 answer or a long run of failures disables it' }),
  disabledReason: Type.Union([Type.String(), Type.Null()], { description: 'Why it was disabled; null while enabled' }),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  previousSecretExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'After a secret rotation: until when the replaced secret still signs (each delivery then carries both signatures)'
  })
}, { additionalProperties: false, description: 'A webhook subscription' })

const WebhookWithSecret = Type.Object({
  ...Webhook.properties,
  secret: Type.String({ description: 'The signing secret (Standard Webhooks: `whsec_` + base64). Shown only in this answer: store it now' })
}, { additionalProperties: false, description: 'A webhook subscription with its new signing secret' })

const Attempt = Type.Object({
  attempt: Type.Integer({ minimum: 1 }),
  at: Type.String({ format: 'date-time' }),
  status: Type.Union([Type.Integer(), Type.Null()], { description: 'The endpoint\'s HTTP status; null when no answer came' }),
  error: Type.Union([Type.String(), Type.Null()], {
    description: 'Why the attempt failed; null when it succeeded. A refused address names the URL\'s host, never what it resolved to'
  }),
  response: Type.Union([Type.String(), Type.Null()], {
    description: 'The first 256 bytes of the answer\'s body (cut between characters), with signatures, webhook secrets and API keys ' +
      'redacted; null without a body, and for an endpoint that is not at a public address (its status and duration only)'
  }),
  durationMs: Type.Integer({ minimum: 0 })
}, { additionalProperties: false })

const Delivery = Type.Object({
  id: Type.Unsafe<bigint>({ type: 'integer', format: 'int64', description: 'The delivery\'s id' }),
  eventId: Type.String({ description: 'The event\'s `webhook-id`: the same for every attempt, and never another change\'s' }),
  changeId: Type.Unsafe<bigint>({ type: 'integer', format: 'int64' }),
  cursor: Type.String({ description: 'The change\'s place in the feed' }),
  state: Type.Enum(['pending', 'delivered', 'failed'], { type: 'string', description: 'pending: to be attempted (again); failed: retries ran out' }),
  attempts: Type.Array(Attempt, { description: 'Every attempt, oldest first' }),
  nextAttemptAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  giveUpAt: Type.String({ format: 'date-time', description: 'Retries stop after this' }),
  createdAt: Type.String({ format: 'date-time' })
}, { additionalProperties: false, description: 'One event of the subscription and its attempts' })

const Params = Type.Object({ webhookId: WebhookId })
const DeliveryParams = Type.Object({ webhookId: WebhookId, deliveryId: Int64Text('The delivery') })
const LIMIT_REACHED = ErrorResponse(['webhook_limit_reached'], 'The quota has the most subscriptions it may have (10 by default).')
/** Where the events and their delivery are described: the document's top-level `webhooks` (inventoryChangedEvent, ...). */
const DOCS = ' The events sent, their headers and retries: the webhooks of this document (`inventory.changed`, and the events of ' +
  'availability: `hold.placed`, `hold.confirmed`, `hold.released`, `hold.expired`, `inventory.low_stock`). Beta: an addition to the specification.'

const iso = (at: Date | null): string | null => at === null ? null : at.toISOString()

function showWebhook (webhook: WebhookView): Static<typeof Webhook> {
  return { ...webhook, createdAt: webhook.createdAt.toISOString(), updatedAt: webhook.updatedAt.toISOString(), previousSecretExpiresAt: iso(webhook.previousSecretExpiresAt) }
}

function showDelivery (delivery: WebhookDelivery): Static<typeof Delivery> {
  return {
    id: delivery.id,
    eventId: eventId({ id: delivery.changeId, epoch: delivery.epoch }),
    changeId: delivery.changeId,
    cursor: feedCursor({ ...delivery.position, epoch: delivery.epoch }),
    state: delivery.state,
    attempts: delivery.attempts.map((attempt) => ({ ...attempt, at: attempt.at.toISOString() })),
    nextAttemptAt: iso(delivery.nextAttemptAt),
    giveUpAt: delivery.giveUpAt.toISOString(),
    createdAt: delivery.createdAt.toISOString()
  }
}

/** The headers of every delivery (Standard Webhooks v1), as each webhook of the document lists them. */
const DELIVERY_HEADERS = [
  { name: 'webhook-id', in: 'header', required: true, schema: { type: 'string', examples: ['evt_7f3a9c21e4b8d605_1042'] } },
  { name: 'webhook-timestamp', in: 'header', required: true, schema: { type: 'string', examples: ['1795600000'] } },
  { name: 'webhook-signature', in: 'header', required: true, schema: { type: 'string' } }
]
const DELIVERY_RESPONSES = {
  '2XX': { description: 'Received: the event is not sent again (unless you ask for a redelivery)' },
  410: { description: 'Gone: the subscription is disabled' },
  default: { description: 'Anything else (or no answer within 10 s): retried later' }
}
/** How every event is delivered, as the first webhook of the document says it in full. */
const DELIVERY_TEXT = 'Headers (Standard Webhooks v1): `webhook-id` (the same for every attempt: ' +
  'deduplicate by it; `evt_<epoch>_<changeId>`, never the id of another change, also across restores and failovers ' +
  'of the store; changes made before the store had epochs keep `evt_<changeId>`), `webhook-timestamp` (Unix seconds of the attempt: refuse old ones), `webhook-signature` ' +
  '(`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` with the secret; several, space-separated, during a rotation). ' +
  'Answer 2xx within 10 s; anything else is retried with exponential backoff for 24 hours; 410 disables the subscription. ' +
  'Events may arrive out of order: order them by `data.cursor`, or per pet by `data.changeId`.'

/** What each event beside stock changes is, for its webhook's description. */
const EVENT_TEXT: Record<LedgerEvent, { operationId: string, summary: string, description: string }> = {
  ...Object.fromEntries(HOLD_EVENTS.map((type) => {
    const name = type.split('.')[1] as string
    return [type, {
      operationId: `hold${name.charAt(0).toUpperCase()}${name.slice(1)}Event`,
      summary: `A hold ${name}, pushed`,
      description: `One per pet of the hold: ${HOLD_EVENT_MEANINGS[type]}. \`data\` says what is on hand, held and available ` +
        'of the pet right after it, so that a follower can mirror what can be sold.'
    }]
  })) as Record<typeof HOLD_EVENTS[number], { operationId: string, summary: string, description: string }>,
  [LOW_STOCK]: {
    operationId: 'inventoryLowStockEvent',
    summary: 'A pet ran low, pushed',
    description: 'A stock change left the pet\'s on-hand quantity at or below its reorder point, which it was above before: ' +
      'sent once per crossing (again only after the quantity has risen above the point).'
  }
}

/**
 * The events as OpenAPI 3.1 describes what the service sends (the document's top-level `webhooks`): one entry per type a
 * subscription may ask for, with its body's schema.
 */
export const WEBHOOKS_DOCUMENT = {
  [INVENTORY_CHANGED]: {
    post: {
      operationId: 'inventoryChangedEvent',
      summary: 'A stock change, pushed',
      description: 'Sent to every enabled subscription of `inventory.changed` for each change of the feed committed after it ' +
        `was made (API writes, batches and imports), at least once. ${DELIVERY_TEXT}`,
      tags: ['webhooks'],
      parameters: DELIVERY_HEADERS,
      requestBody: { required: true, content: { 'application/json': { schema: InventoryChangedEvent } } },
      responses: DELIVERY_RESPONSES
    }
  },
  ...Object.fromEntries((Object.keys(EVENT_TEXT) as LedgerEvent[]).map((type) => [type, {
    post: {
      ...EVENT_TEXT[type],
      description: `Sent to every enabled subscription of \`${type}\`, at least once, for each committed after it was made. ` +
        `${EVENT_TEXT[type].description} Delivered as \`inventory.changed\` is: ${DELIVERY_TEXT}`,
      tags: ['webhooks'],
      parameters: DELIVERY_HEADERS,
      requestBody: { required: true, content: { 'application/json': { schema: EVENT_BODIES[type] } } },
      responses: DELIVERY_RESPONSES
    }
  }]))
}

export const webhookRoutes: FastifyPluginAsyncTypebox<{ webhooks: Webhooks }> = async (app, { webhooks }) => {
  // The gate authenticated every request of this scope: a key is always there.
  const quota = (request: FastifyRequest): string => request.apiKey?.quotaId ?? ''

  app.post('/webhooks', {
    config: { scope: 'write' },
    schema: {
      operationId: 'createWebhook',
      summary: 'Subscribe an endpoint to stock changes and availability events',
      description: 'Creates a subscription of the calling key\'s quota (every key of the quota manages it; a rotated key ' +
        'keeps it). Its events are the changes committed from now on. The answer holds the signing `secret`, shown only ' +
        'here. Unknown event types are refused naming them; a URL that is not https, carries a user name or password, or ' +
        'resolves to a loopback, private, link-local or otherwise non-public address is refused; the refusal names the ' +
        'host, never what it resolved to.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      body: Type.Object({ url: Url, events: Events, description: Type.Optional(Description) }, { additionalProperties: false }),
      response: {
        201: { ...WebhookWithSecret, headers: { ...RESPONSE_HEADERS, Location: Type.String({ description: 'The new subscription, relative to the request URL: `webhooks/{webhookId}`' }) } },
        400: INVALID_REQUEST,
        409: LIMIT_REACHED,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const { webhook, secret } = await webhooks.create(quota(request), request.body)
    // Relative to the request URL (/v1/webhooks, or whatever path a proxy in front served it under), like the
    // rel="next" links (src/http/paging.ts): `webhooks/ID` resolves to the subscription beside the collection.
    reply.code(201).header('Location', `webhooks/${webhook.id}`)
    return { ...showWebhook(webhook), secret }
  })

  app.get('/webhooks', {
    config: { scope: 'write' },
    schema: {
      operationId: 'listWebhooks',
      summary: 'List the quota\'s webhook subscriptions',
      description: 'Every subscription of the calling key\'s quota (at most 10), oldest first, without secrets.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      response: { 200: Type.Array(Webhook, { headers: RESPONSE_HEADERS }), ...COMMON_ERRORS }
    }
  }, async (request) => (await webhooks.list(quota(request))).map(showWebhook))

  app.get('/webhooks/:webhookId', {
    config: { scope: 'write' },
    schema: {
      operationId: 'getWebhook',
      summary: 'Get one webhook subscription',
      description: 'A subscription of the calling key\'s quota; another quota\'s is not found.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      params: Params,
      response: { 200: { ...Webhook, headers: RESPONSE_HEADERS }, 404: NOT_FOUND, ...COMMON_ERRORS }
    }
  }, async (request) => showWebhook(await webhooks.get(quota(request), request.params.webhookId)))

  app.patch('/webhooks/:webhookId', {
    config: { scope: 'write' },
    schema: {
      operationId: 'updateWebhook',
      summary: 'Change a webhook subscription',
      description: 'Changes the fields sent; the others stay. `enabled: true` re-enables a disabled subscription: the events ' +
        'committed while it was disabled are then delivered too, and those undelivered when it was disabled unless they are ' +
        'more than 30 days old (a disabled subscription\'s undelivered events are purged after 30 days); its failure run ' +
        'starts over. `description: null` removes the description.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      params: Params,
      body: Type.Object({
        url: Type.Optional(Url),
        events: Type.Optional(Events),
        description: Type.Optional(Type.Union([Description, Type.Null()])),
        enabled: Type.Optional(Type.Boolean())
      }, { additionalProperties: false, minProperties: 1 }),
      response: { 200: { ...Webhook, headers: RESPONSE_HEADERS }, 400: INVALID_REQUEST, 404: NOT_FOUND, ...COMMON_ERRORS }
    }
  }, async (request) => showWebhook(await webhooks.update(quota(request), request.params.webhookId, request.body)))

  app.delete('/webhooks/:webhookId', {
    config: { scope: 'write' },
    schema: {
      operationId: 'deleteWebhook',
      summary: 'Delete a webhook subscription',
      description: 'Deletes the subscription, its pending deliveries and its deliveries log.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      params: Params,
      response: { 204: Type.Null({ description: 'Deleted', headers: RESPONSE_HEADERS }), 404: NOT_FOUND, ...COMMON_ERRORS }
    }
  }, async (request, reply) => {
    await webhooks.delete(quota(request), request.params.webhookId)
    return await reply.code(204).send(null)
  })

  app.post('/webhooks/:webhookId/secret', {
    config: { scope: 'write' },
    schema: {
      operationId: 'rotateWebhookSecret',
      summary: 'Rotate a subscription\'s signing secret',
      description: 'Makes a new secret, shown only in this answer. For 24 hours the replaced secret keeps signing too: every ' +
        'delivery carries both signatures in `webhook-signature`, so a receiver can switch to the new secret without losing one. ' +
        'Rotating again within the 24 hours ends the oldest secret at once (at most two sign): the way to drop a leaked secret now.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      params: Params,
      response: { 200: { ...WebhookWithSecret, headers: RESPONSE_HEADERS }, 404: NOT_FOUND, ...COMMON_ERRORS }
    }
  }, async (request) => {
    const { webhook, secret } = await webhooks.rotateSecret(quota(request), request.params.webhookId)
    return { ...showWebhook(webhook), secret }
  })

  app.get('/webhooks/:webhookId/deliveries', {
    config: { scope: 'write' },
    schema: {
      operationId: 'listWebhookDeliveries',
      summary: 'The deliveries log of a subscription',
      description: 'Its events, newest first, each with every attempt (time, HTTP status or error, duration) and the next ' +
        'one. While more remain the answer carries `Link: <...>; rel="next"`. Delivered and failed deliveries are kept 30 days, ' +
        'and so are the undelivered ones of a disabled subscription. Of an answer the log keeps its status, its duration and, ' +
        'from a public address, the first 256 bytes of its body, redacted.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      params: Params,
      querystring: Type.Object({
        after: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'The cursor of a rel="next" link' })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_DELIVERY_LIMIT, default: DEFAULT_DELIVERY_LIMIT, description: 'Page size' }))
      }, { additionalProperties: false }),
      response: {
        200: Type.Array(Delivery, { headers: { ...RESPONSE_HEADERS, Link: Type.String({ description: 'rel="next" while older deliveries remain.' + NEXT_LINK_FORM }) } }),
        400: INVALID_REQUEST,
        404: NOT_FOUND,
        ...COMMON_ERRORS
      }
    }
  }, async (request, reply) => {
    const { after, limit = DEFAULT_DELIVERY_LIMIT } = request.query
    const { webhookId } = request.params
    const page = await webhooks.deliveries(quota(request), webhookId, { cursor: after ?? null, limit }).catch(cursorRefused)
    if (page.next !== null) linkNext(reply, { limit: String(limit), after: page.next })
    return page.deliveries.map(showDelivery)
  })

  app.post('/webhooks/:webhookId/deliveries/:deliveryId/retry', {
    config: { scope: 'write' },
    schema: {
      operationId: 'retryWebhookDelivery',
      summary: 'Attempt a delivery again now',
      description: 'Makes the delivery due now and retried for another 24 hours: a failed one is tried again, a delivered one ' +
        'sent again (with the same `webhook-id`). Answers 202; the attempt follows within a second while the subscription is enabled.' + DOCS,
      tags: ['webhooks'],
      'x-stability': 'beta',
      params: DeliveryParams,
      response: { 202: { ...Delivery, headers: RESPONSE_HEADERS }, 404: NOT_FOUND, ...COMMON_ERRORS }
    }
  }, async (request, reply) => {
    const delivery = await webhooks.retry(quota(request), request.params.webhookId, BigInt(request.params.deliveryId))
    reply.code(202)
    return showDelivery(delivery)
  })
}
