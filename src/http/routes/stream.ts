/**
 * GET /v1/inventory/changes/stream: the change feed as Server-Sent Events
 * (docs/adr/0018-change-stream-polled-from-the-feed.md). The rules (where a stream starts, who may open one, when to look for changes) are the domain's
 * (src/domain/change-stream.ts); this file writes them as text/event-stream and ends streams when the instance stops.
 *
 * The body is a Readable that Fastify pipes to the socket, so the answer goes through the usual hooks: the gate's
 * rate-limit fields are sent with the 200, and the access line and request metrics are written when the stream ends.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Readable } from 'node:stream'
import { Type } from 'typebox'
import type { Standing } from '../../access/admission.js'
import type { StreamConfig } from '../../config.js'
import { FeedWatch, followChanges, StreamRegistry, streamStart, type StreamStart } from '../../domain/change-stream.js'
import { FeedEntry, INVENTORY_CHANGED } from '../../domain/entities.js'
import { entryJson } from '../../domain/entry-json.js'
import { changeTypes, CursorExpiredError, DEFAULT_FEED_LIMIT, type EntryView } from '../../domain/feed.js'
import { AppError } from '../../errors.js'
import type { Lifecycle } from '../../lifecycle.js'
import type { Metrics } from '../../metrics/index.js'
import type { StockReads } from '../../store/stock/types.js'
import type { StreamStore } from '../../store/streams/types.js'
import { CURSOR_EXPIRED, cursorRefused, feedCursorRefused } from '../paging.js'
import type { ChangeType } from '../../model.js'
import { TYPES_PARAMETER } from './changes.js'
import { COMMON_ERRORS, ErrorResponse, INVALID_REQUEST, RESPONSE_HEADERS } from '../schemas/common.js'

/** The event type of a change, as webhooks name it too. */
const CHANGE_EVENT = INVENTORY_CHANGED
/** The reconnection delay a client is told (the SSE `retry` field), in ms. */
export const RECONNECT_MS = 1000
/** What a 503 for a full instance asks a client to wait: another instance, or this one a little later, has room. */
const INSTANCE_FULL_RETRY_AFTER_SECONDS = 5
/**
 * When the instance stops, what is queued for a client gets this long to go out; a client that reads nothing meanwhile
 * loses the connection rather than hold up the stop (it resumes from its Last-Event-ID either way).
 */
const SHUTDOWN_GRACE_MS = 1000
/** A failing store is reported at most this often by the feed watch (it polls every few hundred ms). */
const WATCH_ERROR_LOG_INTERVAL_MS = 60_000
/** setTimeout's largest delay (24 days). */
const MAX_TIMER_MS = 2_147_483_647
/**
 * A stream asks whether its key still works at most this often: when AUTH_CACHE_TTL_MS is below it (0 caches nothing),
 * an idle stream still does not ask the store more than ten times a second. What it writes is checked before each batch.
 */
const MIN_KEY_RECHECK_MS = 100
/** After the store could not be asked about a stream's key, it is asked again this much later. */
const KEY_RECHECK_RETRY_MS = 1000

export interface StreamRouteOptions {
  store: { readonly stock: Pick<StockReads, 'feedHead' | 'feedHistory' | 'listChanges'>, readonly streams: StreamStore }
  config: StreamConfig
  lifecycle: Lifecycle
  metrics: Metrics
  clock: () => number
  /** Where this instance's commits are announced: the streams then look at once instead of at the next poll. */
  commits: Set<() => void>
  /**
   * For an admitted stream: asks whether its key would still be admitted (src/http/plugins/access.ts, keyStanding), each
   * time the returned function is called. A stream ends once it would not.
   */
  standing: (request: FastifyRequest) => () => Standing | Promise<Standing>
}

/**
 * The body of one stream. pipe() stops reading it while the socket's buffer is full; `write` then waits until it is
 * read again, and the stream reads no more of the feed meanwhile: a slow client holds back its own stream, and what
 * waits for it is bounded by the buffers and one page of the feed.
 */
class EventStreamBody extends Readable {
  readonly #stop = new AbortController()
  #wanted: (() => void) | null = null

  constructor () {
    super()
    this.#stop.signal.addEventListener('abort', () => { this.#release() })
  }

  /** Aborted when the stream should end: the client left, or the server ends it. */
  get signal (): AbortSignal {
    return this.#stop.signal
  }

  /** Queues text; resolves once the reader can take more (or the stream is ending). */
  async write (text: string): Promise<void> {
    if (this.#stop.signal.aborted || this.push(text)) return
    await new Promise<void>((resolve) => { this.#wanted = resolve })
  }

  /** Queues a line that may be dropped (a heartbeat): only while the reader keeps up, never waiting. */
  note (text: string): void {
    if (!this.#stop.signal.aborted && this.#wanted === null && this.readableLength < this.readableHighWaterMark) this.push(text)
  }

  stop (): void {
    this.#stop.abort()
  }

  override _read (): void {
    this.#release()
  }

  override _destroy (error: Error | null, callback: (error?: Error | null) => void): void {
    this.#stop.abort()
    callback(error)
  }

  #release (): void {
    const resolve = this.#wanted
    this.#wanted = null
    resolve?.()
  }
}

/**
 * Node reports no 'finish' for an answer the client cut short, and Fastify runs the onResponse hooks (the access line,
 * the request metrics) only on 'finish' or 'error': the route emits this on the answer instead. Its code is the one
 * Node's stream.finished() reports for a stream closed early, which Fastify takes for a client that left, not a failure.
 */
class ClientClosedStreamError extends Error {
  readonly code = 'ERR_STREAM_PREMATURE_CLOSE'

  constructor () {
    super('the client closed the change stream')
    this.name = 'ClientClosedStreamError'
  }
}

/** A stream being served, as the stop of the instance sees it. */
interface OpenStream {
  /**
   * Ends it after what is queued (a client that does not take it within SHUTDOWN_GRACE_MS loses the connection); with
   * `closeConnection`, its connection too, so that the client reconnects elsewhere.
   */
  end (closeConnection: boolean): void
  /** Settles once its registration is freed. */
  readonly done: Promise<void>
}

/** The `Last-Event-ID` header, when it names a place (an empty one names none, as for EventSource). */
function lastEventId (request: FastifyRequest): string | null {
  const header = request.headers['last-event-id']
  return typeof header === 'string' && header !== '' ? header : null
}

/** One entry as an event: its cursor, its type, and its data as the feed with the same `types` shows it (`typed`). */
function changeEvent (entry: EntryView, typed: boolean): string {
  return `id: ${entry.cursor}\nevent: ${entry.type}\ndata: ${entryJson(entry, typed)}\n\n`
}

const RETRY_AFTER = { 'Retry-After': Type.Integer({ description: 'Seconds to wait before retrying' }) }

export const streamRoutes: FastifyPluginAsyncTypebox<StreamRouteOptions> = async (app, { store, config, lifecycle, metrics, clock, commits, standing }) => {
  let lastWatchError = Number.NEGATIVE_INFINITY
  const watch = new FeedWatch({
    store,
    pollMs: config.pollMs,
    onError: (error) => {
      const now = performance.now()
      if (now - lastWatchError < WATCH_ERROR_LOG_INTERVAL_MS) return
      lastWatchError = now
      app.log.warn({ err: error }, 'change streams: could not read the feed head; trying again')
    }
  })
  const nudge = (): void => { watch.nudge() }
  commits.add(nudge)
  const registry = new StreamRegistry({
    store,
    maxPerQuota: config.maxPerQuota,
    maxPerInstance: config.maxPerInstance,
    // Renewed at each heartbeat, each registration lasts three: an instance that dies stops counting after that.
    renewMs: config.heartbeatMs,
    clock,
    onError: (error, what) => { app.log.warn({ err: error }, `change streams: could not ${what} a registration; it lapses by itself`) }
  })
  metrics.watchStreams(() => registry.size)
  const open = new Set<OpenStream>()
  let closing = false

  // SIGTERM: every stream ends now, its connection too, so that its client reconnects to an instance that stays (the
  // balancer still sends some here until it notices the drain: those are served, and ended by the close).
  const stopListening = lifecycle.onDrain(() => {
    for (const stream of open) stream.end(true)
  })
  // Before the listener closes (the close waits for every connection): streams end, so app.close() never waits on one.
  app.addHook('preClose', async () => {
    closing = true
    stopListening()
    for (const stream of open) stream.end(true)
    await Promise.all([...open].map((stream) => stream.done))
  })
  app.addHook('onClose', async () => {
    commits.delete(nudge)
    watch.close()
    await registry.stop()
  })

  /** Serves an admitted stream whose registration is `id`: replay, then live changes, until one side ends it. */
  function serve (request: FastifyRequest, reply: FastifyReply, id: string, start: StreamStart, types: readonly ChangeType[] | undefined): EventStreamBody {
    const body = new EventStreamBody()
    // Skipped for a client that is behind: it is not idle, the data itself keeps the connection alive.
    const heartbeat = setInterval(() => { body.note(': heartbeat\n\n') }, config.heartbeatMs).unref()
    // The server keeps half-open connections (src/http/server.ts), where a client that leaves would show only when a
    // later write fails. A stream's client keeps its side open (EventSource, fetch and curl all do): once it closes it,
    // the client is taken for gone and the stream ends, freeing its place now rather than a heartbeat or two later.
    const socket = request.raw.socket
    const left = (): void => { body.stop() }
    socket.once('end', left)
    let resolveDone: () => void = () => {}
    let graceTimer: NodeJS.Timeout | null = null
    const stream: OpenStream = {
      done: new Promise<void>((resolve) => { resolveDone = resolve }),
      end (closeConnection) {
        if (closeConnection) {
          // Closed without waiting for the client's own FIN (half-open connections are kept: see src/http/server.ts).
          reply.raw.once('finish', () => { socket.end(() => { socket.destroy() }) })
        }
        graceTimer ??= setTimeout(() => { if (!reply.raw.writableFinished) reply.raw.destroy() }, SHUTDOWN_GRACE_MS).unref()
        body.stop()
      }
    }

    // The key is asked about as a new request's would be (same rules, same cache): when its lookup goes stale or the
    // key expires, and before each batch is written, so that nothing is written once a request with it is refused.
    const askKey = standing(request)
    let recheck: NodeJS.Timeout | null = null
    const schedule = (ms: number): void => {
      if (body.signal.aborted) return
      recheck = setTimeout(checkKey, Math.min(MAX_TIMER_MS, Math.max(MIN_KEY_RECHECK_MS, ms))).unref()
    }
    /** Whether the stream may go on writing; ends it when its key would be refused. */
    const mayReceive = async (when: 'timer' | 'write'): Promise<boolean> => {
      let answer = askKey()
      if (answer instanceof Promise) answer = await answer
      if (answer.outcome === 'admitted') {
        if (when === 'timer') schedule(answer.recheckInMs)
        return true
      }
      if (answer.outcome === 'unavailable') {
        // Nothing is written unconfirmed; an idle stream (heartbeats only) waits for the store.
        if (when === 'timer') {
          schedule(KEY_RECHECK_RETRY_MS)
          return true
        }
        request.log.warn({ err: answer.error }, 'change stream ended: its key could not be checked')
      } else if (!body.signal.aborted) {
        // The client's reconnect is refused (401, 403 or 429) as any request with the key is.
        request.log.info({ refusal: answer.outcome }, 'change stream ended: its key is no longer admitted')
      }
      stream.end(false)
      return false
    }
    const checkKey = (): void => {
      mayReceive('timer').catch((error: unknown) => {
        request.log.warn({ err: error }, 'change stream ended: its key could not be checked')
        stream.end(false)
      })
    }

    const pump = async (): Promise<void> => {
      await body.write(`retry: ${RECONNECT_MS}\n\n`)
      const follow = followChanges(store, watch, {
        after: start.after, epochs: start.epochs, keyId: request.apiKey?.id ?? null, pageSize: DEFAULT_FEED_LIMIT, signal: body.signal,
        ...(types === undefined ? {} : { types })
      })
      for await (const changes of follow) {
        if (!await mayReceive('write')) return
        for (const change of changes) await body.write(changeEvent(change, types !== undefined))
      }
    }
    open.add(stream)
    reply.raw.once('close', () => {
      if (reply.raw.writableFinished) return
      request.log.debug('change stream: its connection closed before the answer ended')
      if (reply.raw.listenerCount('error') > 0) reply.raw.emit('error', new ClientClosedStreamError())
    })
    checkKey()
    pump().catch((error: unknown) => {
      if (error instanceof CursorExpiredError) {
        // An epoch began under the stream (a failover that lost what it had sent): its client's reconnect gets 410.
        request.log.info('change stream ended: the store began a new epoch and the place it had reached is not in its history')
        return
      }
      // The client resumes from its last event when it reconnects, on this instance or another.
      request.log.warn({ err: error }, 'change stream ended by a failure')
    }).finally(async () => {
      // Done writing: a key check under way schedules no other.
      body.stop()
      clearInterval(heartbeat)
      if (recheck !== null) clearTimeout(recheck)
      socket.removeListener('end', left)
      if (!body.destroyed) body.push(null)
      await registry.close(id)
      open.delete(stream)
      resolveDone()
    })
    return body
  }

  app.get('/inventory/changes/stream', {
    config: { scope: 'read' },
    // A HEAD would open a stream only to drop it: answered 405 instead.
    exposeHeadRoute: false,
    schema: {
      operationId: 'streamInventoryChanges',
      summary: 'Follow stock changes live, as Server-Sent Events',
      description: 'The change feed (`GET /v1/inventory/changes`) pushed as it grows, over one long-lived answer of type ' +
        '`text/event-stream` (Server-Sent Events; a browser\'s EventSource reads it). Each change is one event: ' +
        `\`id: <cursor>\`, \`event: ${CHANGE_EVENT}\`, \`data: <the change as JSON, as the feed shows it>\`. It starts after ` +
        'the `Last-Event-ID` header or, without it, after `after`; with neither, from now (changes committed after the ' +
        'connect). What came after the place given is sent first, then each change as it is committed, on any instance, ' +
        'within about a second. A comment line (`: heartbeat`) keeps an idle stream open through proxies. The connect ' +
        'counts as one request. When the stream ends (the instance stops, or the connection drops), reconnect with the ' +
        'last `id` received as `Last-Event-ID`: no change is missed or repeated. A quota may keep a few streams open at ' +
        'once (429 `too_many_streams` beyond). A place past the feed\'s last change is refused (400); one from a history the ' +
        'store no longer has after it (restored, failed over or moved since) is 410 `cursor_expired`: start again from ' +
        '`GET /v1/inventory` and its `Changes-Cursor`. With `types` (as on the feed), the stream carries those types ' +
        'instead, each event named by its type (`event: hold.placed`, ...) and its `data` the entry as the feed with the same ' +
        '`types` shows it; a reconnect must send the same `types` (EventSource keeps the URL). Beta: an addition to the specification.',
      tags: ['inventory'],
      'x-stability': 'beta',
      headers: Type.Object({
        'last-event-id': Type.Optional(Type.String({
          maxLength: 128,
          description: 'The `id` of the last event received (a change\'s cursor): the stream resumes after it. Sent by ' +
            'EventSource on a reconnect; takes precedence over `after`.'
        }))
      }),
      querystring: Type.Object({
        after: Type.Optional(Type.String({ minLength: 1, maxLength: 128, description: 'A change\'s cursor: the stream starts after it. Without it (and without Last-Event-ID), from now.' })),
        types: Type.Optional(TYPES_PARAMETER)
      }, { additionalProperties: false }),
      response: {
        200: {
          description: `A stream of Server-Sent Events: \`retry: ${RECONNECT_MS}\` first, then one \`${CHANGE_EVENT}\` event per ` +
            'change (with `types`: one event of its type per entry), in feed order, whose `id` is the entry\'s cursor and whose `data` is the entry as JSON (the schema ' +
            'below), and `: heartbeat` comments while idle. It ends when the instance stops, or when the key stops working ' +
            '(revoked, expired or banned: the reconnect is then refused as any request with the key).',
          headers: RESPONSE_HEADERS,
          content: {
            'text/event-stream': {
              schema: Type.Union(FeedEntry.anyOf, {
                description: `The \`data\` of each event: one stock change (\`${CHANGE_EVENT}\`) exactly as the change feed shows it, or ` +
                  'with `types`, one entry of its type as the feed with the same `types` shows it'
              })
            }
          }
        },
        400: INVALID_REQUEST,
        410: CURSOR_EXPIRED,
        ...COMMON_ERRORS,
        429: ErrorResponse(['rate_limited', 'key_banned', 'too_many_streams'],
          'Rate limit exceeded, the key is temporarily banned, or the quota has as many change streams open as it may (on all ' +
          'instances together; close one first).', { 'Retry-After': Type.Integer({ description: 'Seconds until the violated window admits again, or until the ban ends (not sent with `too_many_streams`)' }) }),
        503: ErrorResponse(['service_unavailable'], 'The store cannot be reached, or this instance serves as many streams as it ' +
          'may (another instance may have room).', RETRY_AFTER)
      }
    }
  }, async (request, reply) => {
    const types = request.query.types === undefined ? undefined : changeTypes(request.query.types)
    const start = await streamStart(store, lastEventId(request) ?? request.query.after ?? null).catch(feedCursorRefused).catch(cursorRefused)
    if (closing) {
      throw new AppError('service_unavailable', 'This instance is stopping; reconnect (with Last-Event-ID) to continue.', { 'Retry-After': '1' })
    }
    const key = request.apiKey as NonNullable<typeof request.apiKey>
    const opening = await registry.open(key.quotaId, key.id)
    if (opening.outcome === 'opened' && closing) {
      // The close began while the store answered: preClose has ended the streams it knew of, not this one.
      await registry.close(opening.id)
      throw new AppError('service_unavailable', 'This instance is stopping; reconnect (with Last-Event-ID) to continue.', { 'Retry-After': '1' })
    }
    if (opening.outcome === 'quota_full') {
      throw new AppError('too_many_streams', `This key's quota has ${opening.max} change streams open, the most it may have at once; close one first.`)
    }
    if (opening.outcome === 'instance_full') {
      throw new AppError('service_unavailable', 'This instance serves as many change streams as it may; retry shortly.',
        { 'Retry-After': String(INSTANCE_FULL_RETRY_AFTER_SECONDS) })
    }
    const body = serve(request, reply, opening.id, start, types)
    // Proxies that buffer answers (nginx) would hold events back.
    reply.type('text/event-stream').header('X-Accel-Buffering', 'no')
    // Returned rather than sent (`return reply.send(body)`): the handler's promise would then follow the reply's own
    // (reply.then), which rejects with the error the answer emits when its client leaves, and Fastify would answer that
    // error on a stream already under way. (The 200's schema describes the events, not the body's type.)
    return body as never
  })
}
