/**
 * The load generator: one autocannon run, as its own process so that it can be pinned to a core apart from
 * the server. Usage: node --import tsx bench/load.ts '<LoadSpec as JSON>'; prints one LoadResult as JSON.
 * Programmatic rather than the autocannon CLI because the PATCH scenario needs a setupRequest hook to
 * rotate over the pets.
 */
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

const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec
const headers = spec.patchPets === undefined ? spec.headers : { ...spec.headers, 'content-type': 'application/json' }
const cpuBefore = process.cpuUsage()
const result = await autocannon({
  url: spec.url,
  connections: spec.connections,
  duration: spec.duration,
  headers,
  ...(spec.patchPets === undefined ? {} : { requests: patchRequests(spec.patchPets, spec.patchEvery ?? 1, new URL(spec.url).pathname) })
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
