/**
 * The load generator: one autocannon run, as its own process so that it can be pinned to a core apart from
 * the server. Usage: node --import tsx bench/load.ts '<LoadSpec as JSON>'; prints one LoadResult as JSON.
 * Programmatic rather than the autocannon CLI because the PATCH scenario needs a setupRequest hook to
 * rotate over the pets, and the holds scenario an onResponse hook to confirm the hold it just placed.
 */
import { randomBytes } from 'node:crypto'
import autocannon from 'autocannon'

export interface LoadSpec {
  url: string
  connections: number
  /** Seconds. */
  duration: number
  headers: Record<string, string>
  /** When set: PATCH /v1/inventory/{petId} with petId rotating over 1..patchPets. */
  patchPets?: number
  /** With patchPets: only every patchEvery-th request is such a PATCH, the others GET `url` (a read/write mix). */
  patchEvery?: number
  /**
   * When set: each connection places a hold of one unit (POST /v1/holds, petId rotating over 1..holdPets), then
   * confirms it (POST /v1/holds/{id}/confirm), each with an Idempotency-Key of its own; autocannon only (wrk cannot tell
   * which connection an answer belongs to, so it cannot confirm the hold a connection placed).
   */
  holdPets?: number
}

export interface LoadResult {
  /** Mean of the per-second samples. */
  rps: number
  /** Milliseconds. */
  p50: number
  p99: number
  requests: number
  non2xx: number
  /** Connection errors, timeouts included. */
  errors: number
  timeouts: number
  statusCodes: Record<string, number>
  /** This load generator's CPU use during the run, in % of one core: near 100 means it, not the server, is the limit. */
  loadCpuPct: number
  /** The server's CPU use during the run, in % of one core (filled in by the harness, which knows the pid). */
  serverCpuPct: number | null
}

function patchRequests (pets: number, every: number, getPath: string): autocannon.Request[] {
  // One counter for every connection, so the writes spread evenly over the pets.
  let next = 0
  let count = 0
  return [{
    method: 'PATCH',
    setupRequest: (request) => {
      // autocannon writes Content-Length into the headers it passes here, and they carry over to the next request:
      // each request gets its own, without it (a GET with a stale Content-Length would hang the connection).
      const headers = Object.fromEntries(Object.entries(request.headers ?? {})
        .filter(([name]) => !['content-length', 'content-type'].includes(name.toLowerCase())))
      count += 1
      if (every > 1 && count % every !== 0) return { ...request, method: 'GET', path: getPath, body: undefined, headers }
      next += 1
      return {
        ...request,
        method: 'PATCH',
        path: `/v1/inventory/${(next % pets) + 1}`,
        body: `{"quantity":${next % 1000}}`,
        headers: { ...headers, 'content-type': 'application/json' }
      }
    }
  }]
}

/**
 * A hold and its confirmation, per connection, over and over. The hold's id comes from its answer (the connection's
 * context); a hold refused leaves none, and its confirmation goes to a hold that does not exist (404, counted non-2xx).
 * Idempotency keys are unique across the load generators of a run (two at once against two instances).
 */
function holdRequests (pets: number): autocannon.Request[] {
  const prefix = `bench-${randomBytes(6).toString('hex')}-`
  let next = 0
  let keys = 0
  const headers = (request: autocannon.Request): Record<string, string> => ({
    ...Object.fromEntries(Object.entries(request.headers ?? {}).filter(([name]) => !['content-length', 'idempotency-key'].includes(name.toLowerCase()))),
    'content-type': 'application/json',
    'idempotency-key': `${prefix}${keys++}`
  })
  return [
    {
      method: 'POST',
      path: '/v1/holds',
      setupRequest: (request) => {
        next += 1
        // A long expiry: a hold whose confirmation failed must not expire under load and change what is measured.
        return { ...request, method: 'POST', path: '/v1/holds', body: `{"lines":[{"petId":${(next % pets) + 1},"quantity":1}],"expiresIn":600}`, headers: headers(request) }
      },
      onResponse: (status, body, context) => {
        (context as { holdId?: string }).holdId = status === 201 ? (JSON.parse(body) as { id: string }).id : 'hold_refused'
      }
    },
    {
      method: 'POST',
      setupRequest: (request, context) =>
        ({ ...request, method: 'POST', path: `/v1/holds/${(context as { holdId?: string }).holdId ?? 'hold_none'}/confirm`, body: '{}', headers: headers(request) })
    }
  ]
}

const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec
const headers = spec.patchPets === undefined && spec.holdPets === undefined ? spec.headers : { ...spec.headers, 'content-type': 'application/json' }
const requests = spec.holdPets !== undefined
  ? holdRequests(spec.holdPets)
  : spec.patchPets !== undefined ? patchRequests(spec.patchPets, spec.patchEvery ?? 1, new URL(spec.url).pathname) : undefined
const cpuBefore = process.cpuUsage()
const result = await autocannon({
  url: spec.url,
  connections: spec.connections,
  duration: spec.duration,
  headers,
  ...(requests === undefined ? {} : { requests })
})

const cpu = process.cpuUsage(cpuBefore)
const statusCodes: Record<string, number> = {}
for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stats.count ?? 0
const out: LoadResult = {
  rps: result.requests.average,
  p50: result.latency.p50,
  p99: result.latency.p99,
  requests: result.requests.total,
  non2xx: result.non2xx,
  errors: result.errors,
  timeouts: result.timeouts,
  statusCodes,
  loadCpuPct: (cpu.user + cpu.system) / 1e4 / spec.duration,
  serverCpuPct: null
}
process.stdout.write(JSON.stringify(out) + '\n')
