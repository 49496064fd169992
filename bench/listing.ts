/**
 * The two clients of the listing-1m scenario (see bench/README.md), each in its own process, so that reading a
 * 50 MB listing in one cannot delay a /healthz probe in the other:
 *
 *   node --import tsx bench/listing.ts probe '<ProbeSpec as JSON>'    prints one ProbeResult per URL, as a JSON array
 *   node --import tsx bench/listing.ts client '<ClientSpec as JSON>'  prints one ClientResult as JSON
 *
 * The client reads its bearer key from BENCH_KEY (not the command line, which ps shows).
 */
import { Agent, request } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'

export interface ProbeSpec {
  /** Each is asked at every tick: the service's /healthz, and a reference that shows the machine's own delays. */
  urls: string[]
  seconds: number
  /** A tick every intervalMs, whether or not the earlier probes have been answered. */
  intervalMs: number
  timeoutMs: number
}

export interface ProbeResult {
  url: string
  count: number
  /** Probes that failed or did not answer 200 (their latencies count too: a timeout is a slow answer). */
  errors: number
  /** Milliseconds from sending the request to the end of the response. */
  p50: number
  p99: number
  max: number
}

export interface ClientSpec {
  /** http://host:port, without a path. */
  base: string
  seconds: number
  /** PATCH picks a pet id in 1..pets at random. */
  pets: number
}

export interface ClientResult {
  /** PATCH + GET pairs in which both answered 2xx. */
  pairs: number
  /** Milliseconds; the GET reads the whole body. */
  getP50: number
  getMax: number
  patchP50: number
  /** Bytes of the last listing read. */
  listingBytes: number
  non2xx: number
  errors: number
  statusCodes: Record<string, number>
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0

/**
 * Open loop: every intervalMs each URL is probed on schedule, however long the earlier probes take, so that a
 * server stalled for 200 ms shows as twenty slow probes rather than one (a closed loop would wait out the stall and
 * miss it: coordinated omission). Latency runs from the moment each request is sent.
 */
async function probe (spec: ProbeSpec): Promise<ProbeResult[]> {
  const series = spec.urls.map((url) => ({ url, latencies: [] as number[], errors: 0 }))
  const one = async (target: typeof series[number]): Promise<void> => {
    const sent = performance.now()
    try {
      const res = await fetch(target.url, { signal: AbortSignal.timeout(spec.timeoutMs) })
      await res.arrayBuffer()
      if (res.status !== 200) target.errors++
    } catch {
      target.errors++
    }
    target.latencies.push(performance.now() - sent)
  }
  // Unrecorded: the first fetch loads undici and each URL's first opens a connection, tens of milliseconds that
  // would otherwise delay the first scheduled probes and show as the servers'.
  for (let i = 0; i < 3; i++) {
    for (const url of spec.urls) await (await fetch(url, { signal: AbortSignal.timeout(spec.timeoutMs) })).arrayBuffer()
  }
  const start = performance.now()
  const inFlight: Array<Promise<void>> = []
  for (let due = start; due < start + spec.seconds * 1000; due += spec.intervalMs) {
    const wait = due - performance.now()
    if (wait > 0) await sleep(wait)
    for (const target of series) inFlight.push(one(target))
  }
  await Promise.all(inFlight)
  return series.map(({ url, latencies, errors }) => {
    latencies.sort((a, b) => a - b)
    return { url, count: latencies.length, errors, p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), max: latencies.at(-1) ?? 0 }
  })
}

/** One client, strictly sequential: PATCH a random pet, then GET the whole listing, until the time is up. */
async function client (spec: ClientSpec, key: string): Promise<ClientResult> {
  const headers = { authorization: `Bearer ${key}` }
  // One connection, kept alive: the client is one user, sequential.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const gets: number[] = []
  const patches: number[] = []
  const statusCodes: Record<string, number> = {}
  let non2xx = 0
  let errors = 0
  let listingBytes = 0
  /**
   * Sends one request and reads the whole body, counting its bytes and keeping none: node:http rather than fetch,
   * which would gather 50 MB of chunks in JavaScript and so take CPU from the prober beside it. Returns the body's
   * size, or null when the request failed or did not answer 2xx.
   */
  const send = async (url: string, method: string, body: string | null, times: number[]): Promise<number | null> => {
    const started = performance.now()
    try {
      const { status, bytes } = await new Promise<{ status: number, bytes: number }>((resolve, reject) => {
        const req = request(url, { method, agent, headers: body === null ? headers : { ...headers, 'content-type': 'application/json' } }, (res) => {
          let bytes = 0
          res.on('data', (chunk: Buffer) => { bytes += chunk.length })
          res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }))
          res.on('error', reject)
        })
        req.on('error', reject)
        req.end(body ?? undefined)
      })
      times.push(performance.now() - started)
      statusCodes[status] = (statusCodes[status] ?? 0) + 1
      if (status >= 200 && status < 300) return bytes
      non2xx++
    } catch {
      errors++
      // A refused connection fails at once: do not spin.
      await sleep(100)
    }
    return null
  }
  const end = performance.now() + spec.seconds * 1000
  let pairs = 0
  for (let round = 0; performance.now() < end; round++) {
    const petId = 1 + Math.floor(Math.random() * spec.pets)
    const patched = await send(`${spec.base}/v1/inventory/${petId}`, 'PATCH', JSON.stringify({ quantity: round % 1000 }), patches)
    const bytes = await send(`${spec.base}/v1/inventory`, 'GET', null, gets)
    if (bytes !== null) listingBytes = bytes
    if (patched !== null && bytes !== null) pairs++
  }
  agent.destroy()
  gets.sort((a, b) => a - b)
  patches.sort((a, b) => a - b)
  return {
    pairs, getP50: percentile(gets, 0.5), getMax: gets.at(-1) ?? 0, patchP50: percentile(patches, 0.5), listingBytes, non2xx, errors, statusCodes
  }
}

const [mode, spec] = process.argv.slice(2)
if (mode === 'probe' && spec !== undefined) {
  console.log(JSON.stringify(await probe(JSON.parse(spec) as ProbeSpec)))
} else if (mode === 'client' && spec !== undefined && process.env.BENCH_KEY !== undefined) {
  console.log(JSON.stringify(await client(JSON.parse(spec) as ClientSpec, process.env.BENCH_KEY)))
} else {
  console.error('usage: BENCH_KEY=KEY node --import tsx bench/listing.ts client SPEC | node --import tsx bench/listing.ts probe SPEC')
  process.exit(2)
}
