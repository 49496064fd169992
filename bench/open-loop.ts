/**
 * The open-loop load generator of the latency scenario: requests at a fixed rate, on a schedule that does not wait
 * for the server, each timed from the moment the schedule meant to send it (coordinated omission corrected, as
 * wrk2 does). Run as a process of its own, pinned to the load core:
 *
 *   BENCH_HEADERS='{"authorization":"Bearer ..."}' node --import tsx bench/open-loop.ts '<OpenLoopSpec as JSON>'
 *
 * prints one OpenLoopResult as JSON. The headers come from the environment, not the command line, which ps shows.
 *
 * Request i is due at start + i / rate. A timer wakes the generator at the next due time (Node's timers have a
 * resolution of 1 ms: the requests due within one wake-up go together), and every answer read is also a moment to
 * send what has fallen due since; each wake-up dispatches every request due by then, however many are still
 * unanswered.
 *
 * It is built to cost as little as it can, so that at the rates measured it is never what the latencies show
 * (ADR 0041): every request is a Buffer encoded before the run (GET: one per server; PATCH: a fixed set of pets and
 * quantities, picked in turn), written whole to a raw `net` socket. Each server has its own pool of keep-alive
 * HTTP/1.1 connections, one request at a time on each (no pipelining): a request finding every connection busy opens
 * another, up to `maxConnections`; beyond that it waits in the pool's queue for a connection, and that wait counts in
 * its latency, as it would for a client. Answers are read by a minimal parser: the status line, then the body framed
 * by Content-Length or chunked encoding (or the end of the connection), with nothing allocated per answer unless its
 * head spans two reads. Latencies go into HDR histograms (hdr-histogram-js, microseconds, 3 significant digits).
 *
 * What is the generator's and not the server's shows as lag: from a request's due time to its dispatch, the time
 * this process needed to get round to it. The result says whether the generator kept its schedule (`behind`);
 * when it did not, the latencies are the generator's, not the server's.
 */
import { readFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { build, type Histogram } from 'hdr-histogram-js'
import { pathToFileURL } from 'node:url'

export interface OpenLoopSpec {
  /** http://host:port of each server; requests alternate between them, the rate is their total. */
  origins: string[]
  /** Requests per second, in total. */
  rate: number
  /** Seconds on schedule before the measured window, not recorded (the JIT, connections, caches). */
  warmup: number
  /** Seconds of the measured window. */
  duration: number
  /** Connections per origin at most. */
  maxConnections: number
  /** A request without its full answer this long after it was written fails (counted in `timeouts`, its latency recorded). */
  timeoutMs: number
  /**
   * Without: GET /v1/inventory. With: PATCH /v1/inventory/{petId} with {"quantity": q}, from a set of PATCH_SET
   * requests encoded before the run, each for a pet drawn at random from 1..patchPets, taken in turn.
   */
  patchPets?: number
}

/** Milliseconds. */
export interface Percentiles { p50: number, p90: number, p99: number, p999: number, max: number, mean: number }

export interface OpenLoopResult {
  /** Requests per second asked for. */
  rate: number
  /** Requests due in the measured window (rate x duration). */
  scheduled: number
  /** Requests of the window dispatched per second: first to last dispatch. */
  sentRate: number
  /** Answers to the window's requests per second: from the window's start to the last answer. */
  answeredRate: number
  /** Answers (any status) and failures of the window's requests. */
  answered: number
  non2xx: number
  /** Failed requests: refused, reset, timed out. */
  errors: number
  timeouts: number
  /**
   * Requests of the window still unanswered when the generator gave up waiting (timeoutMs plus a second after the last
   * dispatch); each is recorded with its age then, a lower bound of its latency.
   */
  unfinished: number
  statusCodes: Record<string, number>
  /** From each request's due time to the end of its answer: the figure. */
  latency: Percentiles
  /** From each request's dispatch to the end of its answer (what a closed-loop tool would show, for comparison). */
  serviceTime: Percentiles
  /** From each request's due time to its dispatch: the generator's own delay. */
  lag: Percentiles
  /** Requests in flight at once (all origins), at most. */
  maxInFlight: number
  /** Connections opened (all origins), warm-up included, and closed again. */
  connectionsOpened: number
  connectionsClosed: number
  /** Requests of the window that found every connection of their origin busy with the cap reached, so they queued. */
  queuedForConnection: number
  /** This process's CPU over the whole run, % of one core. */
  loadCpuPct: number
  /**
   * Milliseconds per second its main thread spent runnable but waiting for a CPU (Linux's run-queue delay), over the
   * whole run; null where the kernel does not say. Near 0 on a quiet machine; large when other processes share the core.
   */
  runQueueMsPerS: number | null
  /** Whether the generator fell behind its schedule, and why: then the latencies are the generator's. */
  behind: boolean
  behindReasons: string[]
}

/** The generator is behind when it dispatched the window's requests at less than this share of the rate, ... */
export const MIN_SENT_SHARE = 0.99
/** ... or when the 99th percentile of its own lag reaches this (ms): twice its timer's resolution. */
export const MAX_LAG_P99_MS = 2

/** Distinct PATCH requests encoded before the run, per origin. */
const PATCH_SET = 4096
/**
 * An idle connection unused this long is closed rather than reused, before the server closes it: a second less than
 * the server's `Keep-Alive: timeout=N` hint (at least half of it), or 4 s without one (undici's defaults).
 */
const IDLE_CLOSE_MS = 4000
const IDLE_CLOSE_MARGIN_MS = 1000

/** Values above this (µs) are recorded as this: an hour, well past any timeout. */
const HIGHEST_US = 3_600_000_000

function histogram (): Histogram {
  return build({ lowestDiscernibleValue: 1, highestTrackableValue: HIGHEST_US, numberOfSignificantValueDigits: 3, autoResize: false })
}

function record (h: Histogram, ms: number): void {
  h.recordValue(Math.min(HIGHEST_US, Math.max(0, Math.round(ms * 1000))))
}

/** Seconds this process's main thread has waited for a CPU so far (/proc/self/schedstat), or null. */
function runQueueSeconds (): number | null {
  try {
    const wait = Number(readFileSync('/proc/self/schedstat', 'utf8').trim().split(' ')[1])
    return Number.isFinite(wait) ? wait / 1e9 : null
  } catch {
    return null
  }
}

function percentiles (h: Histogram): Percentiles {
  const at = (p: number): number => h.totalCount === 0 ? 0 : h.getValueAtPercentile(p) / 1000
  return { p50: at(50), p90: at(90), p99: at(99), p999: at(99.9), max: h.maxValue / 1000, mean: h.totalCount === 0 ? 0 : h.mean / 1000 }
}

/** The bytes of each request an origin is sent: one for GET, PATCH_SET for PATCH. */
export function encodeRequests (origin: string, headers: Record<string, string>, patchPets?: number): Buffer[] {
  const host = new URL(origin).host
  const fields = Object.entries(headers)
    .filter(([name]) => !['host', 'content-length', 'content-type', 'connection', 'transfer-encoding'].includes(name.toLowerCase()))
    .map(([name, value]) => `${name}: ${value}\r\n`).join('')
  if (patchPets === undefined) return [Buffer.from(`GET /v1/inventory HTTP/1.1\r\nhost: ${host}\r\n${fields}\r\n`, 'latin1')]
  return Array.from({ length: PATCH_SET }, (_, k) => {
    const body = `{"quantity":${k % 1000}}`
    const pet = 1 + Math.floor(Math.random() * patchPets)
    return Buffer.from(`PATCH /v1/inventory/${pet} HTTP/1.1\r\nhost: ${host}\r\n${fields}` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`, 'latin1')
  })
}

// The response parser's states.
const HEAD = 0
const LENGTH = 1
const CHUNK_SIZE = 2
const CHUNK_EXT = 3
const CHUNK_DATA = 4
const CHUNK_DATA_END = 5
const TRAILERS = 6
const UNTIL_CLOSE = 7

/** Where every connection's reads land, parsed before the next read. */
const READ_BUFFER = Buffer.alloc(256 * 1024)
const HEAD_END = Buffer.from('\r\n\r\n')
const CONTENT_LENGTH = Buffer.from('content-length')
const TRANSFER_ENCODING = Buffer.from('transfer-encoding')
const CONNECTION = Buffer.from('connection')
const KEEP_ALIVE = Buffer.from('keep-alive')
const TIMEOUT_EQ = Buffer.from('timeout=')
const CHUNKED = Buffer.from('chunked')
const CLOSE = Buffer.from('close')

/** Whether `buf` at `at` holds `name` (lower case, letters and '-'), case-insensitively, then ':'. */
function isField (buf: Buffer, at: number, end: number, name: Buffer): boolean {
  if (at + name.length >= end || buf[at + name.length] !== 0x3a) return false
  for (let k = 0; k < name.length; k++) if (((buf[at + k] as number) | 0x20) !== name[k]) return false
  return true
}

/** Whether the field value in buf[from, to) ends with `word` (lower case letters), case-insensitively. */
function endsWith (buf: Buffer, from: number, to: number, word: Buffer): boolean {
  while (to > from && (buf[to - 1] === 0x20 || buf[to - 1] === 0x09)) to--
  if (to - from < word.length) return false
  for (let k = 0; k < word.length; k++) if (((buf[to - word.length + k] as number) | 0x20) !== word[k]) return false
  return true
}

/** The value of a hex digit, or -1. */
function hex (c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30
  const l = c | 0x20
  return l >= 0x61 && l <= 0x66 ? l - 0x61 + 10 : -1
}

interface Origin {
  requests: Buffer[]
  conns: Conn[]
  /** Idle connections, the most recently used last. */
  idle: Conn[]
  /** Indices of the requests waiting for a connection, from `head`. */
  queue: number[]
  head: number
  /** Requests given to this origin and not yet finished (queued included). */
  inFlight: number
}

interface Conn {
  origin: Origin
  socket: Socket
  connected: boolean
  /** The request on it, or -1. */
  req: number
  written: number
  idleSince: number
  state: number
  /** The start of a head that spans reads (rare). */
  partial: Buffer | null
  status: number
  remaining: number
  lineLength: number
  /** How long it may stay idle and still be reused (ms). */
  idleMs: number
  /** The answer said `Connection: close`, or bytes nobody asked for followed it: the connection is not reused. */
  closing: boolean
}

export async function openLoop (spec: OpenLoopSpec, headers: Record<string, string>): Promise<OpenLoopResult> {
  const origins: Origin[] = spec.origins.map((origin) => ({
    requests: encodeRequests(origin, headers, spec.patchPets), conns: [], idle: [], queue: [], head: 0, inFlight: 0
  }))
  const addresses = spec.origins.map((origin) => {
    const url = new URL(origin)
    return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port === '' ? 80 : url.port) }
  })
  let connectionsOpened = 0
  let connectionsClosed = 0

  const warmupCount = Math.round(spec.warmup * spec.rate)
  const scheduled = Math.round(spec.duration * spec.rate)
  const total = warmupCount + scheduled
  const interval = 1000 / spec.rate
  /** Each request's dispatch time (performance.now()), by index. */
  const sentAt = new Float64Array(total)

  const latency = histogram()
  const serviceTime = histogram()
  const lag = histogram()
  const statusCodes: Record<string, number> = {}
  let answered = 0
  let non2xx = 0
  let errors = 0
  let timeouts = 0
  let inFlight = 0
  let maxInFlight = 0
  let queuedForConnection = 0
  let firstSent = Infinity
  let lastSent = -Infinity
  let lastAnswer = -Infinity
  let settle: (() => void) | null = null
  /** Set once the generator gives up waiting: what the teardown then fails is not counted. */
  let closing = false
  let next = 0
  let patchTurn = 0

  const cpuBefore = process.cpuUsage()
  const waitBefore = runQueueSeconds()
  const wallBefore = performance.now()
  // A short delay before the first due time: the requests are encoded, nothing else is pending.
  const start = performance.now() + 20
  const windowStart = start + warmupCount * interval

  /** A request is over: answered with `status`, or failed (status 0, `timedOut` when by the timeout). */
  const finish = (o: Origin, i: number, status: number, timedOut: boolean, end: number): void => {
    inFlight--
    o.inFlight--
    if (i >= warmupCount) {
      // A failure is recorded too: a timeout is a slow answer, and leaving it out would flatter the tail.
      record(latency, end - (start + i * interval))
      record(serviceTime, end - (sentAt[i] as number))
      answered++
      lastAnswer = end
      if (status === 0) {
        errors++
        if (timedOut) timeouts++
      } else {
        statusCodes[status] = (statusCodes[status] ?? 0) + 1
        if (status < 200 || status > 299) non2xx++
      }
    }
    if (inFlight === 0 && settle !== null) settle()
  }

  const write = (c: Conn, i: number): void => {
    c.req = i
    c.written = performance.now()
    const requests = c.origin.requests
    c.socket.write(requests.length === 1 ? requests[0] as Buffer : requests[patchTurn++ & (PATCH_SET - 1)] as Buffer)
  }

  /** A connection without a request: the next queued one, or back to the idle ones. */
  const release = (c: Conn): void => {
    const o = c.origin
    if (o.head < o.queue.length) {
      write(c, o.queue[o.head++] as number)
      if (o.head === o.queue.length) { o.queue.length = 0; o.head = 0 }
      return
    }
    c.idleSince = performance.now()
    o.idle.push(c)
  }

  const drop = (c: Conn, error: boolean): void => {
    const o = c.origin
    const at = o.conns.indexOf(c)
    if (at < 0) return
    o.conns.splice(at, 1)
    const idleAt = o.idle.indexOf(c)
    if (idleAt >= 0) o.idle.splice(idleAt, 1)
    connectionsClosed++
    if (closing) return
    const i = c.req
    c.req = -1
    if (i >= 0) {
      // A body framed by the connection's end is complete when it ends cleanly.
      if (c.state === UNTIL_CLOSE && !error) finish(o, i, c.status, false, performance.now())
      else finish(o, i, 0, false, performance.now())
    }
    // Queued requests lost their connection: open another, which takes the next one.
    if (o.head < o.queue.length && o.conns.length < spec.maxConnections) {
      const q = o.queue[o.head++] as number
      if (o.head === o.queue.length) { o.queue.length = 0; o.head = 0 }
      open(o, q)
    }
  }

  /** The answer is complete at `pos`: bytes after it were not asked for, so the connection is out of step. */
  const done = (c: Conn, pos: number, limit: number): true => {
    if (pos < limit) c.closing = true
    return true
  }

  /** Reads an answer's bytes, data[0, length); true when the request on `c` is complete. */
  const parse = (c: Conn, data: Buffer, length: number): boolean => {
    let buf = data
    let limit = length
    let pos = 0
    while (pos < limit) {
      switch (c.state) {
        case HEAD: {
          if (c.partial !== null) {
            buf = Buffer.concat([c.partial, buf.subarray(pos, limit)])
            limit = buf.length
            pos = 0
            c.partial = null
          }
          // The first match from pos; one past limit is stale bytes of the reused buffer: no end in this read.
          const end = buf.indexOf(HEAD_END, pos)
          if (end < 0 || end + HEAD_END.length > limit) {
            // Copied: the read buffer is reused.
            c.partial = Buffer.from(buf.subarray(pos, limit))
            return false
          }
          // "HTTP/1.1 200 ...": the status is at 9..11.
          c.status = ((buf[pos + 9] as number) - 48) * 100 + ((buf[pos + 10] as number) - 48) * 10 + ((buf[pos + 11] as number) - 48)
          c.closing = false
          let length = -1
          let chunked = false
          let line = buf.indexOf(0x0a, pos) + 1
          while (line > 0 && line < end) {
            let eol = buf.indexOf(0x0a, line)
            if (eol < 0 || eol > end + 2) eol = end + 2
            const valueEnd = buf[eol - 1] === 0x0d ? eol - 1 : eol
            if (isField(buf, line, valueEnd, CONTENT_LENGTH)) {
              length = 0
              for (let k = line + CONTENT_LENGTH.length + 1; k < valueEnd; k++) {
                const d = (buf[k] as number) - 48
                if (d >= 0 && d <= 9) length = length * 10 + d
              }
            } else if (isField(buf, line, valueEnd, TRANSFER_ENCODING)) {
              chunked = endsWith(buf, line + TRANSFER_ENCODING.length + 1, valueEnd, CHUNKED)
            } else if (isField(buf, line, valueEnd, CONNECTION)) {
              c.closing = endsWith(buf, line + CONNECTION.length + 1, valueEnd, CLOSE)
            } else if (isField(buf, line, valueEnd, KEEP_ALIVE)) {
              const at = buf.indexOf(TIMEOUT_EQ, line + KEEP_ALIVE.length + 1)
              if (at >= 0 && at < valueEnd) {
                let seconds = 0
                for (let k = at + TIMEOUT_EQ.length; k < valueEnd && (buf[k] as number) >= 0x30 && (buf[k] as number) <= 0x39; k++) seconds = seconds * 10 + (buf[k] as number) - 0x30
                c.idleMs = Math.max(seconds * 1000 - IDLE_CLOSE_MARGIN_MS, seconds * 500)
              }
            }
            line = eol + 1
          }
          pos = end + 4
          if (c.status < 200 || c.status === 204 || c.status === 304) {
            // 1xx (none is asked for) is skipped; 204 and 304 have no body.
            if (c.status >= 200) return done(c, pos, limit)
            c.state = HEAD
          } else if (chunked) {
            c.state = CHUNK_SIZE
            c.remaining = 0
          } else if (length >= 0) {
            if (length === 0) return done(c, pos, limit)
            c.state = LENGTH
            c.remaining = length
          } else {
            c.state = UNTIL_CLOSE
          }
          break
        }
        case LENGTH: {
          const n = Math.min(c.remaining, limit - pos)
          c.remaining -= n
          pos += n
          if (c.remaining === 0) { c.state = HEAD; return done(c, pos, limit) }
          break
        }
        case CHUNK_SIZE: {
          const b = buf[pos++] as number
          const v = hex(b)
          if (v >= 0) c.remaining = c.remaining * 16 + v
          else if (b === 0x0a) {
            c.lineLength = 0
            c.state = c.remaining === 0 ? TRAILERS : CHUNK_DATA
          } else if (b !== 0x0d) c.state = CHUNK_EXT
          break
        }
        case CHUNK_EXT:
          if (buf[pos++] === 0x0a) {
            c.lineLength = 0
            c.state = c.remaining === 0 ? TRAILERS : CHUNK_DATA
          }
          break
        case CHUNK_DATA: {
          const n = Math.min(c.remaining, limit - pos)
          c.remaining -= n
          pos += n
          if (c.remaining === 0) c.state = CHUNK_DATA_END
          break
        }
        case CHUNK_DATA_END:
          if (buf[pos++] === 0x0a) { c.state = CHUNK_SIZE; c.remaining = 0 }
          break
        case TRAILERS: {
          const b = buf[pos++] as number
          if (b === 0x0a) {
            if (c.lineLength === 0) { c.state = HEAD; return done(c, pos, limit) }
            c.lineLength = 0
          } else if (b !== 0x0d) c.lineLength++
          break
        }
        default:
          // UNTIL_CLOSE: the body ends with the connection.
          pos = limit
      }
    }
    return false
  }

  const onRead = (c: Conn, n: number): void => {
    if (closing) return
    if (c.req < 0) {
      // An answer nobody asked for: this connection is out of step.
      c.socket.destroy()
      return
    }
    if (!parse(c, READ_BUFFER, n)) return
    const i = c.req
    c.req = -1
    const end = performance.now()
    finish(c.origin, i, c.status, false, end)
    // A connection the server is closing takes no more requests; its end opens another for the queue.
    if (c.closing) c.socket.destroy()
    else release(c)
    // Each answer is also a chance to send what fell due meanwhile, sooner than the next timer.
    if (next < total && start + next * interval <= end) dispatchDue(end)
  }

  /** A new connection of `o`, for request `i`: written once connected, failed if the connection is. */
  const open = (o: Origin, i: number): void => {
    const address = addresses[origins.indexOf(o)] as { host: string, port: number }
    // Reads land in one buffer shared by every connection (onread): no Buffer and no 'data' event per read.
    const socket = connect({ port: address.port, host: address.host, noDelay: true, onread: { buffer: READ_BUFFER, callback: (n) => { onRead(c, n); return true } } })
    const c: Conn = {
      origin: o, socket, connected: false, req: i, written: Infinity, idleSince: 0, state: HEAD, partial: null, status: 0, remaining: 0, lineLength: 0, closing: false, idleMs: IDLE_CLOSE_MS
    }
    o.conns.push(c)
    connectionsOpened++
    socket.on('connect', () => {
      c.connected = true
      if (closing) return
      if (c.req >= 0) write(c, c.req)
      else release(c)
    })
    let failed = false
    socket.on('error', () => { failed = true })
    socket.on('close', () => drop(c, failed))
  }

  /** Request `i`, now: on an idle connection, a new one, or into the queue. */
  const send = (i: number, now: number): void => {
    const p = i % origins.length
    const o = origins[p] as Origin
    sentAt[i] = now
    if (i >= warmupCount) {
      record(lag, now - (start + i * interval))
      if (now < firstSent) firstSent = now
      lastSent = now
      if (o.inFlight >= spec.maxConnections) queuedForConnection++
    }
    inFlight++
    o.inFlight++
    if (inFlight > maxInFlight) maxInFlight = inFlight
    for (let c = o.idle.pop(); c !== undefined; c = o.idle.pop()) {
      if (now - c.idleSince < c.idleMs) {
        write(c, i)
        return
      }
      // The server may be closing it just now: a fresh one instead.
      c.req = -1
      c.socket.destroy()
    }
    if (o.conns.length < spec.maxConnections) open(o, i)
    else o.queue.push(i)
  }

  /** Sends every request due by `now`. */
  const dispatchDue = (now: number): void => {
    while (next < total && start + next * interval <= now) {
      send(next++, now)
      // Dispatching takes time too: requests that fell due meanwhile go in this wake-up.
      if ((next & 15) === 0) now = performance.now()
    }
  }

  // Requests unanswered this long after they were written fail, checked a few times a second.
  const timeoutChecker = setInterval(() => {
    const now = performance.now()
    for (const o of origins) {
      for (const c of o.conns) {
        if (c.req >= 0 && now - c.written > spec.timeoutMs) {
          const i = c.req
          c.req = -1
          finish(o, i, 0, true, now)
          c.socket.destroy()
        }
      }
    }
  }, Math.min(250, spec.timeoutMs / 4))

  await new Promise<void>((resolve) => {
    const tick = (): void => {
      dispatchDue(performance.now())
      if (next >= total) {
        resolve()
        return
      }
      setTimeout(tick, Math.max(0, start + next * interval - performance.now()))
    }
    setTimeout(tick, Math.max(0, start - performance.now()))
  })

  // Every request is dispatched: wait for the answers, at most timeoutMs (plus a second) after the last.
  if (inFlight > 0) {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, spec.timeoutMs + 1000)
      settle = () => { clearTimeout(timer); resolve() }
    })
  }
  closing = true
  clearInterval(timeoutChecker)
  const gaveUp = performance.now()
  let unfinished = 0
  const unanswered = (i: number): void => {
    if (i < warmupCount) return
    unfinished++
    record(latency, gaveUp - (start + i * interval))
    record(serviceTime, gaveUp - (sentAt[i] as number))
  }
  for (const o of origins) {
    for (const c of o.conns) if (c.req >= 0) unanswered(c.req)
    for (let q = o.head; q < o.queue.length; q++) unanswered(o.queue[q] as number)
  }
  const cpu = process.cpuUsage(cpuBefore)
  const waitAfter = runQueueSeconds()
  const wall = (performance.now() - wallBefore) / 1000
  await Promise.all(origins.flatMap((o) => o.conns.map((c) => new Promise<void>((resolve) => {
    c.socket.once('close', () => resolve())
    c.socket.destroy()
  }))))

  const sentRate = scheduled <= 1 ? 0 : (scheduled - 1) / ((lastSent - firstSent) / 1000)
  const answeredRate = answered === 0 ? 0 : answered / ((lastAnswer - windowStart) / 1000)
  const lagPercentiles = percentiles(lag)
  const behindReasons: string[] = []
  if (sentRate < spec.rate * MIN_SENT_SHARE) behindReasons.push(`dispatched ${Math.round(sentRate)} of ${spec.rate} requests/s`)
  if (lagPercentiles.p99 >= MAX_LAG_P99_MS) behindReasons.push(`its own lag p99 ${lagPercentiles.p99.toFixed(2)} ms >= ${MAX_LAG_P99_MS} ms`)
  return {
    rate: spec.rate,
    scheduled,
    sentRate,
    answeredRate,
    answered,
    non2xx,
    errors,
    timeouts,
    unfinished,
    statusCodes,
    latency: percentiles(latency),
    serviceTime: percentiles(serviceTime),
    lag: lagPercentiles,
    maxInFlight,
    connectionsOpened,
    connectionsClosed,
    queuedForConnection,
    loadCpuPct: (cpu.user + cpu.system) / 1e4 / wall,
    runQueueMsPerS: waitBefore === null || waitAfter === null ? null : (waitAfter - waitBefore) * 1000 / wall,
    behind: behindReasons.length > 0,
    behindReasons
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const text = process.argv[2]
  if (text === undefined) {
    console.error('usage: BENCH_HEADERS=JSON node --import tsx bench/open-loop.ts SPEC')
    process.exit(2)
  }
  const headers = JSON.parse(process.env.BENCH_HEADERS ?? '{}') as Record<string, string>
  process.stdout.write(JSON.stringify(await openLoop(JSON.parse(text) as OpenLoopSpec, headers)) + '\n')
}
