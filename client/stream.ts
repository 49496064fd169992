/**
 * The live change stream (Server-Sent Events): every change as soon as it is committed, on one long-lived connection
 * opened again from the last change received (`Last-Event-ID`) whenever it drops, goes silent or is ended by the
 * service. Failed connects are retried like calls.
 */
import { eventStreamReader, type StreamEvent } from './event-stream.js'
import { PetstoreError } from './errors.js'
import { parseBody } from './int64-values.js'
import type { Transport } from './transport.js'
import type { InventoryChange, StreamOptions } from './types.js'

/** The change stream's reconnection delay until the service names one (the SSE `retry` field). */
const STREAM_RETRY_MS = 1000
/** The change stream's event type. */
const CHANGE_EVENT = 'inventory.changed'

export function changeStream (transport: Transport): (options?: StreamOptions) => AsyncGenerator<InventoryChange, void, undefined> {
  const { backoff, delayAfter, errorOf, failureOf, maxAttempts, maxDelayMs, mayWaitOut, pause, random, timeoutMs } = transport

  /**
   * Opens the change stream after `lastId` on `connection`: the answer when it is a 200 of type text/event-stream; any
   * other answer is thrown as its PetstoreError (a ban is remembered, as for calls). `timeoutMs` bounds the wait for the
   * answer's headers only: the stream itself is meant to stay open.
   */
  async function openStream (lastId: string | null, connection: AbortController, attempt: number): Promise<Response> {
    transport.refuseWhileBanned('streamInventoryChanges')
    const headers = transport.headers('text/event-stream')
    if (lastId !== null) headers['last-event-id'] = lastId
    const timer = timeoutMs === undefined
      ? undefined
      : setTimeout(() => { connection.abort(Object.assign(new Error('timeout'), { name: 'TimeoutError' })) }, timeoutMs)
    let response: Response
    try {
      response = await transport.request(transport.url('/inventory/changes/stream'), { method: 'GET', headers, signal: connection.signal })
    } finally {
      clearTimeout(timer)
    }
    if (response.status === 200 && /^text\/event-stream\b/i.test(response.headers.get('content-type') ?? '')) return response
    const error = response.ok
      ? new PetstoreError({ status: response.status, code: 'unexpected_response', message: 'The change stream answer is not text/event-stream', requestId: response.headers.get('x-request-id'), attempts: attempt })
      : await errorOf(response, attempt, 'streamInventoryChanges')
    transport.rememberBan(error)
    throw error
  }

  return async function * streamChanges ({ after, signal, idleTimeoutMs = 60_000 }: StreamOptions = {}): AsyncGenerator<InventoryChange, void, undefined> {
    // The id of the last change handed out: where a new connection resumes.
    let lastId = after ?? null
    let retryMs = STREAM_RETRY_MS
    // Connects that failed in a row; an answered connect starts the count again.
    let failed = 0
    // A function, not a property read: the signal aborts while this waits.
    const aborted = (): boolean => signal?.aborted === true
    while (!aborted()) {
      const connection = new AbortController()
      const stop = (): void => { connection.abort() }
      signal?.addEventListener('abort', stop, { once: true })
      let idle: ReturnType<typeof setTimeout> | undefined
      try {
        let response: Response
        try {
          response = await openStream(lastId, connection, failed + 1)
        } catch (error) {
          if (aborted()) return
          failed++
          const failure = error instanceof PetstoreError ? error : failureOf(error, failed)
          // A stream of this client's that just dropped may still count on the service for a moment.
          const delay = failure.code === 'too_many_streams' ? backoff(failed) : delayAfter(failure, failed)
          if (delay === null || failed >= maxAttempts) throw failure
          await mayWaitOut('streamInventoryChanges', failure, delay, failed)
          await pause(delay, signal)
          continue
        }
        failed = 0
        const received: Array<{ id: string, change: InventoryChange }> = []
        let malformed: unknown
        const parser = eventStreamReader({
          onEvent: (event: StreamEvent) => {
            if (event.event !== CHANGE_EVENT || malformed !== undefined) return
            try {
              const change = parseBody(event.data, 'streamInventoryChanges', 200) as InventoryChange
              received.push({ id: event.id ?? change.cursor, change })
            } catch (error) {
              malformed = error
            }
          },
          onRetry: (ms: number) => { retryMs = Math.min(ms, maxDelayMs) }
        })
        const decoder = new TextDecoder()
        const armIdle = (): void => {
          clearTimeout(idle)
          idle = setTimeout(stop, idleTimeoutMs)
        }
        armIdle()
        try {
          for await (const chunk of response.body ?? []) {
            armIdle()
            parser.feed(decoder.decode(chunk, { stream: true }))
            if (malformed !== undefined) {
              throw new PetstoreError({ status: 200, code: 'unexpected_response', message: 'A change stream event is not the documented JSON', requestId: response.headers.get('x-request-id'), attempts: 1, cause: malformed })
            }
            for (const { id, change } of received.splice(0)) {
              lastId = id
              yield change
            }
          }
        } catch (error) {
          if (error instanceof PetstoreError) throw error
          // The connection dropped or went silent: opened again below, from the last change handed out.
        }
        if (aborted()) return
        // Jittered: the clients of an instance that stops do not all come back at the same moment.
        await pause(random() * retryMs, signal)
      } finally {
        clearTimeout(idle)
        signal?.removeEventListener('abort', stop)
        connection.abort()
      }
    }
  }
}
