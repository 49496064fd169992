/**
 * Webhooks in the app: the subscriptions managed through the API (src/http/routes/webhooks.ts), and this instance's
 * dispatcher delivering them (src/domain/webhook-dispatch.ts).
 */
import type { FastifyInstance } from 'fastify'
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import type { Config } from '../config.js'
import { WebhookDispatcher, type Transport } from '../domain/webhook-dispatch.js'
import { Webhooks } from '../domain/webhooks.js'
import { StoreReadOnlyError } from '../errors.js'
import type { Metrics } from '../metrics/index.js'
import type { Store } from '../store/store.js'
import { checkDestination, DestinationError } from '../webhooks/destination.js'
import { HttpSender } from '../webhooks/sender.js'

/** The subscriptions, their URLs checked against the address rules of the configuration. */
export function webhookSubscriptions (app: FastifyInstance, store: Store, config: Config, clock: () => number): Webhooks {
  const destinationPolicy = { allowPrivateNetworks: config.webhooks.allowPrivateNetworks }
  return new Webhooks(store, {
    maxPerQuota: config.webhooks.maxPerQuota,
    retryForMs: config.webhooks.retryForMs,
    clock,
    checkUrl: async (url) => {
      try {
        return { url: (await checkDestination(url, destinationPolicy)).href }
      } catch (error) {
        if (!(error instanceof DestinationError)) throw error
        // The subscriber's answer names the host only; the operator's log says what it resolved to.
        // (The host alone: a URL's path and query may carry the subscriber's own tokens.)
        if (error.address !== undefined) app.log.info({ host: URL.parse(url)?.hostname, address: error.address, range: error.range }, 'webhook URL refused: not a public address')
        return { refusal: error.message }
      }
    }
  })
}

export interface DeliveryOptions {
  /** The store as the caller gave it. */
  store: Store
  /** How deliveries reach their endpoints; over HTTP with the address rules of the configuration when omitted. */
  transport: Transport | undefined
  clock: () => number
  metrics: Metrics
  /** What a commit on this instance wakes: the dispatcher adds itself. */
  commits: Set<() => void>
}

/**
 * Starts this instance's webhook dispatcher once the app is ready and stops it when the app closes (attempts in
 * flight get a moment, then their leases go back). It works on the store as given (not timed per call: its polling
 * would swamp the request series); on a store this release may only read, its steps fail quietly and it delivers nothing.
 */
export function deliverWebhooks (app: FastifyInstance, config: Config, { store, transport, clock, metrics, commits }: DeliveryOptions): void {
  const policy = config.webhooks
  const dispatcher = new WebhookDispatcher({
    store,
    transport: transport ?? new HttpSender({
      timeoutMs: policy.timeoutMs,
      policy: { allowPrivateNetworks: policy.allowPrivateNetworks },
      // The subscriber's deliveries log names the host only; the operator may want to know where it pointed.
      refused: ({ host, address, range }) => { app.log.info({ host, address, range }, 'webhook delivery refused: the host resolved to an address that is not public') }
    }),
    policy: { ...policy, perQuota: policy.concurrencyPerQuota, perSubscription: policy.concurrencyPerSubscription },
    owner: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
    clock,
    events: {
      attempted: (outcome) => { metrics.recordWebhookAttempt(outcome) },
      disabled: (webhookId, reason) => { app.log.warn({ webhookId, reason }, 'webhook subscription disabled') },
      failed: (error) => {
        if (!(error instanceof StoreReadOnlyError)) app.log.warn({ err: error }, 'webhook delivery step failed; trying again')
      }
    }
  })
  metrics.watchWebhooks(store, clock)
  app.addHook('onReady', async () => { dispatcher.start() })
  app.addHook('onClose', async () => { await dispatcher.stop() })
  commits.add(() => { dispatcher.committed() })
}
