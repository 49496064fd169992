/**
 * Webhook subscriptions: who may have them, what they are sent, and how a delivery is signed (Standard Webhooks v1).
 * A subscription belongs to a quota (every key of it manages it; a rotated key keeps it); its events are the changes
 * of the feed committed after it was made, each delivered at least once by the dispatcher (./webhook-dispatch.ts).
 */
import { createHmac, randomBytes } from 'node:crypto'
import { AppError } from '../errors.js'
import type { WebhookDelivery, WebhookRecord, WebhookStore, WebhookWrites } from '../store/webhooks/types.js'
import { decodeCursor, encodeCursor, InvalidCursorError } from './cursor.js'
import { CHANGE_TYPES } from '../model.js'

/**
 * The event types a subscription may ask for: every type of the feed. A subscription is sent the entries of its types
 * only (the store's fan-out skips the others).
 */
export const WEBHOOK_EVENTS = CHANGE_TYPES
/** A rotated secret keeps signing this long, so that receivers can switch without losing a delivery. */
export const SECRET_OVERLAP_MS = 24 * 3_600_000
/** The deliveries log's cursors. */
const DELIVERY_CURSOR_PREFIX = 'd1:'
export const DEFAULT_DELIVERY_LIMIT = 20
export const MAX_DELIVERY_LIMIT = 100

/**
 * Checks a subscription's URL against the address rules: the URL as it will be used (the parser's normal form, which is
 * what was checked and what is stored), or why it is refused.
 */
export type UrlCheck = (url: string) => Promise<{ url: string } | { refusal: string }>

export interface WebhookInput {
  url: string
  events: string[]
  description?: string | null
}

export interface WebhookChanges {
  url?: string
  events?: string[]
  description?: string | null
  enabled?: boolean
}

/** What the API shows of a subscription: never its secrets, except `secret` right after it was made. */
export interface WebhookView {
  id: string
  url: string
  events: string[]
  description: string | null
  enabled: boolean
  disabledReason: string | null
  createdAt: Date
  updatedAt: Date
  /** Until when the secret a rotation replaced still signs; null when none does. */
  previousSecretExpiresAt: Date | null
}

export function webhookView (webhook: WebhookRecord, at: Date): WebhookView {
  const overlap = webhook.previousSecretUntil !== null && webhook.previousSecretUntil > at ? webhook.previousSecretUntil : null
  return {
    id: webhook.id,
    url: webhook.url,
    events: webhook.events,
    description: webhook.description,
    enabled: webhook.enabled,
    disabledReason: webhook.disabledReason,
    createdAt: webhook.createdAt,
    updatedAt: webhook.updatedAt,
    previousSecretExpiresAt: overlap
  }
}

/** A new secret in the Standard Webhooks form: `whsec_` and the base64 of 32 random bytes. */
export function newWebhookSecret (): string {
  return `whsec_${randomBytes(32).toString('base64')}`
}

function newWebhookId (): string {
  return `wh_${randomBytes(16).toString('base64url')}`
}

/** What newWebhookId makes: the only text a message about a subscription quotes back (a path may hold anything). */
const WEBHOOK_ID = /^wh_[A-Za-z0-9_-]{22}$/

/** A subscription's id as a message names it: quoted when it is one this service could have made, else not at all. */
function named (id: string): string {
  return WEBHOOK_ID.test(id) ? JSON.stringify(id) : 'with this id'
}


/**
 * The id of an event (a change): the same for every attempt and every subscription, so receivers can deduplicate, and
 * never the id of another change for as long as the deployment lives: `evt_<epoch>_<change id>`, the change's store
 * epoch making it unique across restores, failovers and moves (change ids start again where a restored store left
 * off). A change from before the store had epochs keeps the id it was sent with then, `evt_<change id>`.
 */
export function eventId (change: { id: bigint, epoch: string | null }): string {
  return change.epoch === null ? `evt_${change.id}` : `evt_${change.epoch}_${change.id}`
}

/**
 * The Standard Webhooks signature of a delivery: `v1,` and the base64 HMAC-SHA256, keyed with the secret's bytes, of
 * `id.timestamp.body`; one per secret that signs now, separated by spaces.
 */
export function signatures (secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((secret) => {
    const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64')
    return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`
  }).join(' ')
}

/** The headers of one attempt (Standard Webhooks v1): the event id, the attempt's time in seconds, the signatures. */
export function deliveryHeaders (secrets: readonly string[], id: string, at: Date, body: string): Record<string, string> {
  const timestamp = Math.floor(at.getTime() / 1000)
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures(secrets, id, timestamp, body) }
}

/** The answer for a subscription that does not exist, or is another quota's. */
function noSubscription (id: string): AppError {
  return new AppError('not_found', `No webhook subscription ${named(id)}.`)
}

/**
 * Refuses event types this service does not send, naming where they are (`body.events[1]`), not what they say: a
 * message never quotes a value a client sent (it may be anything, a key pasted into the wrong field included).
 */
function unknownEvents (events: readonly string[]): void {
  const unknown = events.flatMap((event, index) => (WEBHOOK_EVENTS as readonly string[]).includes(event) ? [] : [`body.events[${index}]`])
  if (unknown.length > 0) {
    throw new AppError('invalid_request', `${unknown.join(', ')} ${unknown.length > 1 ? 'are not known event types' : 'is not a known event type'}; ` +
      `known: ${WEBHOOK_EVENTS.join(', ')}.`)
  }
}

export interface WebhookRules {
  maxPerQuota: number
  /** How long a delivery is retried (a manual retry gets as long again). */
  retryForMs: number
  checkUrl: UrlCheck
  clock: () => number
}

/** What a subscription an operator disabled without giving a reason shows as its reason. */
export const OPERATOR_DISABLED_REASON = 'Disabled by the operator.'

/**
 * The operator's switch (`petstore webhooks disable` and `enable`), for a subscription of any quota: disabled, it is
 * sent nothing and shows `reason`; enabled again, its pending and new events are delivered. Null when no subscription
 * has the id.
 */
export async function switchWebhook (
  store: { readonly webhooks: Pick<WebhookWrites, 'updateWebhook'> }, id: string, state: { enabled: true } | { enabled: false, reason?: string },
  clock: () => number
): Promise<WebhookRecord | null> {
  const update = state.enabled ? { enabled: true } : { enabled: false, disabledReason: state.reason ?? OPERATOR_DISABLED_REASON }
  return await store.webhooks.updateWebhook(id, update, new Date(clock()))
}

export interface DeliveryPage {
  deliveries: WebhookDelivery[]
  /** The cursor of the next page (older deliveries); null when this is the last. */
  next: string | null
}

/** The management of a quota's subscriptions; every method is one quota's view (another quota's subscription is not found). */
export class Webhooks {
  readonly #store: { readonly webhooks: WebhookStore }
  readonly #rules: WebhookRules

  constructor (store: { readonly webhooks: WebhookStore }, rules: WebhookRules) {
    this.#store = store
    this.#rules = rules
  }

  async #checkUrl (url: string): Promise<string> {
    const checked = await this.#rules.checkUrl(url)
    if ('refusal' in checked) throw new AppError('invalid_request', checked.refusal)
    return checked.url
  }

  /** Creates a subscription; its secret is in the answer only. */
  async create (quotaId: string, input: WebhookInput): Promise<{ webhook: WebhookView, secret: string }> {
    unknownEvents(input.events)
    const url = await this.#checkUrl(input.url)
    const at = new Date(this.#rules.clock())
    const secret = newWebhookSecret()
    const created = await this.#store.webhooks.createWebhook({
      id: newWebhookId(), quotaId, url, events: [...new Set(input.events)], description: input.description ?? null, secret, createdAt: at
    }, this.#rules.maxPerQuota)
    if (created === 'limit') {
      throw new AppError('webhook_limit_reached', `A quota may have at most ${this.#rules.maxPerQuota} webhook subscriptions; delete one first.`)
    }
    return { webhook: webhookView(created, at), secret }
  }

  async list (quotaId: string): Promise<WebhookView[]> {
    const at = new Date(this.#rules.clock())
    return (await this.#store.webhooks.listWebhooks(quotaId)).map((webhook) => webhookView(webhook, at))
  }

  async #own (quotaId: string, id: string): Promise<WebhookRecord> {
    const webhook = await this.#store.webhooks.getWebhook(id)
    if (webhook === null || webhook.quotaId !== quotaId) throw noSubscription(id)
    return webhook
  }

  async get (quotaId: string, id: string): Promise<WebhookView> {
    return webhookView(await this.#own(quotaId, id), new Date(this.#rules.clock()))
  }

  async update (quotaId: string, id: string, changes: WebhookChanges): Promise<WebhookView> {
    await this.#own(quotaId, id)
    if (changes.events !== undefined) unknownEvents(changes.events)
    const url = changes.url === undefined ? undefined : await this.#checkUrl(changes.url)
    const at = new Date(this.#rules.clock())
    const updated = await this.#store.webhooks.updateWebhook(id, {
      ...changes,
      ...(url === undefined ? {} : { url }),
      ...(changes.events === undefined ? {} : { events: [...new Set(changes.events)] }),
      ...(changes.enabled === false ? { disabledReason: 'Disabled through the API.' } : {})
    }, at)
    if (updated === null) throw noSubscription(id)
    return webhookView(updated, at)
  }

  async delete (quotaId: string, id: string): Promise<void> {
    await this.#own(quotaId, id)
    await this.#store.webhooks.deleteWebhook(id)
  }

  /** A new secret, in the answer only; the current one keeps signing for SECRET_OVERLAP_MS. */
  async rotateSecret (quotaId: string, id: string): Promise<{ webhook: WebhookView, secret: string }> {
    await this.#own(quotaId, id)
    const at = new Date(this.#rules.clock())
    const secret = newWebhookSecret()
    const rotated = await this.#store.webhooks.rotateWebhookSecret(id, secret, new Date(at.getTime() + SECRET_OVERLAP_MS), at)
    if (rotated === null) throw noSubscription(id)
    return { webhook: webhookView(rotated, at), secret }
  }

  /** The deliveries log, newest first. */
  async deliveries (quotaId: string, id: string, query: { cursor: string | null, limit: number }): Promise<DeliveryPage> {
    await this.#own(quotaId, id)
    const before = query.cursor === null ? null : decodeCursor(DELIVERY_CURSOR_PREFIX, query.cursor)
    if (before !== null && before < 0n) throw new InvalidCursorError()
    const deliveries = await this.#store.webhooks.listWebhookDeliveries(id, before, query.limit + 1)
    const page = deliveries.slice(0, query.limit)
    const last = page.at(-1)
    return { deliveries: page, next: deliveries.length > query.limit && last !== undefined ? encodeCursor(DELIVERY_CURSOR_PREFIX, last.id) : null }
  }

  /** Makes a delivery due now, whatever its state: a failed one is retried, a delivered one sent again (same event id). */
  async retry (quotaId: string, id: string, deliveryId: bigint): Promise<WebhookDelivery> {
    await this.#own(quotaId, id)
    const at = new Date(this.#rules.clock())
    const delivery = await this.#store.webhooks.retryWebhookDelivery(id, deliveryId, at, new Date(at.getTime() + this.#rules.retryForMs))
    if (delivery === null) throw new AppError('not_found', `The webhook subscription ${named(id)} has no delivery ${deliveryId}.`)
    return delivery
  }
}
