/**
 * A webhook receiver on 127.0.0.1 that verifies every delivery the way receivers do, with the `standardwebhooks`
 * package (not the service's own code), and records what it got.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { TestContext } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { feedPlace } from '../../src/domain/feed.js'
import { eventId } from '../../src/domain/webhooks.js'

export interface Received {
  id: string
  timestamp: string
  signature: string
  body: string
  /** The parsed, verified event. */
  event: { type: string, timestamp: string, data: { changeId: number, petId: number, quantity: number, previousQuantity: number | null, cursor: string, reason: string, requestId: string | null, status: string | null } }
}

export interface Receiver {
  url: string
  /** Verified deliveries, in arrival order (duplicates included). */
  received: Received[]
  /** Deliveries whose signature did not verify with any secret given. */
  rejected: number
  /** Requests seen, verified or not. */
  requests: number
  /** The secrets a delivery may be signed with (set after the subscription is made). */
  secrets: string[]
  /** How to answer the next request (default 204). */
  answer: (request: IncomingMessage, received: Received | null) => number | Promise<number>
  /** Resolves once `predicate` holds, checked on every delivery; fails after `ms`. */
  until: (predicate: () => boolean, ms?: number) => Promise<void>
  server: Server
}

export async function receiver (t: TestContext): Promise<Receiver> {
  const waiters = new Set<() => void>()
  const state: Receiver = {
    url: '',
    received: [],
    rejected: 0,
    requests: 0,
    secrets: [],
    answer: () => 204,
    until: async (predicate, ms = 10_000) => {
      if (predicate()) return
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => { waiters.delete(check); reject(new Error(`receiver: condition not met within ${ms} ms (${state.received.length} received)`)) }, ms)
        const check = (): void => {
          if (!predicate()) return
          clearTimeout(timer)
          waiters.delete(check)
          resolve()
        }
        waiters.add(check)
      })
    },
    server: createServer((request: IncomingMessage, response: ServerResponse) => {
      const chunks: Buffer[] = []
      request.on('data', (chunk: Buffer) => chunks.push(chunk))
      request.on('end', () => {
        state.requests++
        const body = Buffer.concat(chunks).toString('utf8')
        const headers = {
          'webhook-id': String(request.headers['webhook-id']),
          'webhook-timestamp': String(request.headers['webhook-timestamp']),
          'webhook-signature': String(request.headers['webhook-signature'])
        }
        let verified: Received | null = null
        for (const secret of state.secrets) {
          try {
            const event = new Webhook(secret).verify(body, headers) as Received['event']
            verified = { id: headers['webhook-id'], timestamp: headers['webhook-timestamp'], signature: headers['webhook-signature'], body, event }
            break
          } catch { /* not signed with this secret: try the next */ }
        }
        Promise.resolve(state.answer(request, verified)).then((status) => {
          if (verified !== null && status >= 200 && status < 300) state.received.push(verified)
          if (verified === null) state.rejected++
          response.writeHead(status).end()
          for (const waiter of [...waiters]) waiter()
        }, () => response.destroy())
      })
    })
  }
  await new Promise<void>((resolve) => state.server.listen(0, '127.0.0.1', resolve))
  state.url = `http://127.0.0.1:${(state.server.address() as AddressInfo).port}/hook`
  t.after(() => new Promise<void>((resolve) => { state.server.closeAllConnections(); state.server.close(() => resolve()) }))
  return state
}

/** Distinct event ids received. */
export const distinctIds = (r: Receiver): Set<string> => new Set(r.received.map((x) => x.id))

/** The webhook-id of a change as the feed shows it: its id and the epoch its cursor carries. */
export const eventIdOf = (change: { changeId: number | bigint, cursor: string }): string =>
  eventId({ id: BigInt(change.changeId), epoch: feedPlace(change.cursor).epoch })
