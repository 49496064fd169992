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
 * resolution of 1 ms: the requests due within one wake-up go together) and it dispatches every request due by then,
 * however many are still unanswered. Each origin has an undici Pool of keep-alive HTTP/1.1 connections, one request
 * at a time on each (no pipelining): a request finding every connection busy opens another, up to
 * `maxConnections`; beyond that it waits in the pool's queue for a connection, and that wait counts in its latency,
 * as it would for a client. Latencies go into HDR histograms (hdr-histogram-js, microseconds, 3 significant
 * digits).
 *
 * What is the generator's and not the server's shows as lag: from a request's due time to its dispatch, the time
 * this process needed to get round to it. The result says whether the generator kept its schedule (`behind`);
 * when it did not, the latencies are the generator's, not the server's.
 */
import { readFileSync } from 'node:fs'
import { build, type Histogram } from 'hdr-histogram-js'
import { pathToFileURL } from 'node:url'
import { Pool, type Dispatcher } from 'undici'

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
  /** A request without its full answer after this long fails (counted in `timeouts`, its latency recorded). */
  timeoutMs: number
  /** Without: GET /v1/inventory. With: PATCH /v1/inventory/{petId}, petId drawn at random from 1..patchPets. */
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
const MIN_SENT_SHARE = 0.99
/** ... or when the 99th percentile of its own lag exceeds this (ms): its timer resolution is 1 ms. */
const MAX_LAG_P99_MS = 2

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

export async function openLoop (spec: OpenLoopSpec, headers: Record<string, string>): Promise<OpenLoopResult> {
  const pools = spec.origins.map((origin) => new Pool(origin, {
    connections: spec.maxConnections,
    pipelining: 1,
    headersTimeout: spec.timeoutMs,
    bodyTimeout: spec.timeoutMs,
    // Idle connections stay open between bursts (undici otherwise closes them after 4 s, or at the server's hint).
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 60_000
  }))
  let connectionsOpened = 0
  let connectionsClosed = 0
  for (const pool of pools) {
    pool.on('connect', () => { connectionsOpened++ })
    pool.on('disconnect', () => { connectionsClosed++ })
  }
  const inFlightPerPool = pools.map(() => 0)

  const warmupCount = Math.round(spec.warmup * spec.rate)
  const scheduled = Math.round(spec.duration * spec.rate)
  const total = warmupCount + scheduled
  const interval = 1000 / spec.rate
  const getHeaders = { ...headers }
  const patchHeaders = { ...headers, 'content-type': 'application/json' }

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
  /** The window's requests not yet answered: index -> dispatch time. */
  const open = new Map<number, number>()
  /** Set once the generator gives up waiting: what the pools' teardown then fails is not counted. */
  let closing = false

  const cpuBefore = process.cpuUsage()
  const waitBefore = runQueueSeconds()
  const wallBefore = performance.now()
  // A short delay before the first due time: the pools are created, nothing else is pending.
  const start = performance.now() + 20
  const windowStart = start + warmupCount * interval

  const send = (i: number): void => {
    const due = start + i * interval
    const recorded = i >= warmupCount
    const p = i % pools.length
    const pool = pools[p] as Pool
    const sentAt = performance.now()
    if (recorded) {
      record(lag, sentAt - due)
      if (sentAt < firstSent) firstSent = sentAt
      lastSent = sentAt
      if ((inFlightPerPool[p] as number) >= spec.maxConnections) queuedForConnection++
      open.set(i, sentAt)
    }
    inFlight++
    inFlightPerPool[p] = (inFlightPerPool[p] as number) + 1
    if (inFlight > maxInFlight) maxInFlight = inFlight
    let status = 0
    const done = (error: Error | null): void => {
      if (closing) return
      const end = performance.now()
      inFlight--
      inFlightPerPool[p] = (inFlightPerPool[p] as number) - 1
      if (recorded) {
        // A failure is recorded too: a timeout is a slow answer, and leaving it out would flatter the tail.
        record(latency, end - due)
        record(serviceTime, end - sentAt)
        open.delete(i)
        answered++
        lastAnswer = end
        if (error !== null) {
          errors++
          if (/timeout/i.test(error.name) || /timeout/i.test(error.message)) timeouts++
        } else {
          statusCodes[status] = (statusCodes[status] ?? 0) + 1
          if (status < 200 || status > 299) non2xx++
        }
      }
      if (inFlight === 0 && settle !== null) settle()
    }
    const handler: Dispatcher.DispatchHandler = {
      // undici takes a handler with onRequestStart as one of the current API (onResponseStart, ...).
      onRequestStart: () => {},
      onResponseStart: (_controller, statusCode) => { status = statusCode },
      onResponseData: () => {},
      onResponseEnd: () => done(null),
      onResponseError: (_controller, error) => done(error)
    }
    const options: Dispatcher.DispatchOptions = spec.patchPets === undefined
      ? { origin: spec.origins[p], path: '/v1/inventory', method: 'GET', headers: getHeaders }
      : {
          origin: spec.origins[p],
          path: `/v1/inventory/${1 + Math.floor(Math.random() * spec.patchPets)}`,
          method: 'PATCH',
          headers: patchHeaders,
          body: `{"quantity":${i % 1000}}`
        }
    pool.dispatch(options, handler)
  }

  await new Promise<void>((resolve) => {
    let next = 0
    const tick = (): void => {
      let now = performance.now()
      while (next < total && start + next * interval <= now) {
        send(next++)
        // Dispatching takes time too: requests that fell due meanwhile go in this wake-up.
        if ((next & 63) === 0) now = performance.now()
      }
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
  const gaveUp = performance.now()
  for (const [i, sentAt] of open) {
    record(latency, gaveUp - (start + i * interval))
    record(serviceTime, gaveUp - sentAt)
  }
  const unfinished = open.size
  const cpu = process.cpuUsage(cpuBefore)
  const waitAfter = runQueueSeconds()
  const wall = (performance.now() - wallBefore) / 1000
  await Promise.all(pools.map((pool) => pool.destroy()))

  const sentRate = scheduled <= 1 ? 0 : (scheduled - 1) / ((lastSent - firstSent) / 1000)
  const answeredRate = answered === 0 ? 0 : answered / ((lastAnswer - windowStart) / 1000)
  const lagPercentiles = percentiles(lag)
  const behindReasons: string[] = []
  if (sentRate < spec.rate * MIN_SENT_SHARE) behindReasons.push(`dispatched ${Math.round(sentRate)} of ${spec.rate} requests/s`)
  if (lagPercentiles.p99 > MAX_LAG_P99_MS) behindReasons.push(`its own lag p99 ${lagPercentiles.p99.toFixed(2)} ms > ${MAX_LAG_P99_MS} ms`)
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
