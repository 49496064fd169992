/**
 * `npm run bench:profile`: where a GET /v1/inventory spends its time. Runs the service (and the bare node:http
 * ceiling, for comparison) under wrk with V8's CPU profiler on, keeps the samples taken while the load ran, sorts
 * each sample's function into a part of the request path, and prints microseconds per request for each part.
 *
 * BENCH_PROFILE_ROOT=/path/to/another/checkout profiles that build instead (built, with node_modules), so a
 * before/after pair can be measured in one run on one machine: `git worktree add /tmp/before <commit>`.
 * BENCH_DURATION (default 10) sets the seconds of load per server. Needs wrk; pins as bench/run.ts does.
 * BENCH_PROFILE_SCENARIO=patch profiles PATCH /v1/inventory/{petId} on 10,000 pets (durable SQLite, the bench's
 * rotation) instead; the ceiling stays the bare server answering the GET's bytes, as in `npm run bench`.
 * BENCH_PROFILE_TRACES_SAMPLER (and _ARG) profiles the service tracing, with that OTEL_TRACES_SAMPLER (and _ARG),
 * exporting OTLP/HTTP (protobuf, or BENCH_TRACES_PROTOCOL=http/json) to bench/otlp-sink.js on the load core; the
 * SDK's and the spans' work is a part of its own.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { settings } from './settings.js'
import { Cleanup, cleanupOnSignals, freePort, PINNING, ROOT, runCommand, runNode, startNode, stop, waitHttp, waitOutput } from './support.js'

const TARGET = process.env.BENCH_PROFILE_ROOT ?? ROOT
const SECONDS = Number(process.env.BENCH_DURATION ?? 10)
const PATCH = process.env.BENCH_PROFILE_SCENARIO === 'patch'
const PATCH_PETS = 10_000
const WRK_SCRIPT = join(ROOT, 'bench/wrk.lua')
const TRACES_SAMPLER = process.env.BENCH_PROFILE_TRACES_SAMPLER ?? ''
const TRACES_SAMPLER_ARG = process.env.BENCH_PROFILE_TRACES_SAMPLER_ARG ?? ''
const CONNECTIONS = 50

interface CpuProfile {
  nodes: Array<{ id: number, callFrame: { functionName: string, url: string } }>
  startTime: number
  samples: number[]
  timeDeltas: number[]
}

/** Parts of the path, in the order of a request; the first rule that matches a sample's function wins. */
const PARTS: Array<[string, (fn: string, url: string) => boolean]> = [
  ['idle (waiting for the socket)', (fn) => fn === '(idle)'],
  ['garbage collection', (fn) => fn === '(garbage collector)'],
  ['write (writev, streams)', (fn, url) => /^(writev|writeGeneric|writevGeneric|createWriteWrap|writeUtf8String|writeBuffer)$/.test(fn) ||
    /node:internal\/stream_base_commons|node:internal\/streams\/writable|node:net$/.test(url)],
  ['tracing (OpenTelemetry, spans, context)', (_fn, url) => /@opentelemetry|@fastify\/otel|dist\/tracing\/|node:async_hooks|node:internal\/async_local_storage|async_context_frame/.test(url)],
  ['headers (set, validate, render)', (fn) => /header|Header/.test(fn) || /^RegExp: /.test(fn) && /\\x20|\\t/.test(fn)],
  ['parse (HTTP parser, request objects)', (_fn, url) => /node:_http_common|node:_http_incoming|node:internal\/streams\/readable/.test(url)],
  ['route (find-my-way)', (_fn, url) => url.includes('find-my-way')],
  ['auth (credentials, key cache)', (fn, url) => /access\/authenticator|access\/keys|lru-cache/.test(url) || fn === 'credentialsOf'],
  ['limiter', (_fn, url) => /dist\/ratelimit\//.test(url)],
  ['admission (gate, quota fields)', (_fn, url) => /dist\/access\/|dist\/http\/plugins\/access/.test(url)],
  ['store (SQLite statements, commit)', (_fn, url) => /dist\/store\/|better-sqlite3/.test(url)],
  ['request body (JSON, validation)', (_fn, url) => /dist\/http\/(json-body|validation)|secure-json-parse|ajv/.test(url)],
  ['body (listing cache, handler)', (_fn, url) => /dist\/http\/(inventory-cache|routes)|fast-json-stringify/.test(url)],
  ['logging', (_fn, url) => /pino|dist\/logger/.test(url)],
  ['metrics', (_fn, url) => /dist\/metrics|prom-client/.test(url)],
  ['promise and tick hops', (fn, url) => /^(runMicrotasks|processTicksAndRejections|nextTick)$/.test(fn) || url.includes('task_queues')],
  ['framework (fastify hooks, reply)', (_fn, url) => /node_modules\/(fastify|@fastify|avvio|light-my-request)/.test(url) || /dist\/(app|http)\//.test(url)],
  ['node:http server and response', (_fn, url) => /node:_http_server|node:_http_outgoing|node:events|node:internal\/timers/.test(url)],
  ['other', () => true]
]

function partOf (fn: string, url: string): string {
  return (PARTS.find(([, matches]) => matches(fn, url)) as [string, unknown])[0]
}

const DETAIL = process.env.BENCH_PROFILE_DETAIL === '1'
/** BENCH_PROFILE_DETAIL_PART: with DETAIL, only the functions of the parts whose name this matches (`tracing`, say). */
const DETAIL_PART = new RegExp(process.env.BENCH_PROFILE_DETAIL_PART ?? '')

/** Microseconds of main-thread time per part, from samples taken within [fromUs, toUs] (monotonic clock). */
function parts (profile: CpuProfile, fromUs: number, toUs: number): Map<string, number> {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node.callFrame]))
  const totals = new Map<string, number>()
  const functions = new Map<string, number>()
  let at = profile.startTime
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0
    at += delta
    if (at < fromUs || at > toUs) return
    const frame = nodes.get(id)
    const part = partOf(frame?.functionName ?? '', frame?.url ?? '')
    totals.set(part, (totals.get(part) ?? 0) + delta)
    if (DETAIL && DETAIL_PART.test(part)) {
      const name = `${part}: ${frame?.functionName ?? ''} ${(frame?.url ?? '').replace(/.*node_modules\//, '')}`
      functions.set(name, (functions.get(name) ?? 0) + delta)
    }
  })
  // BENCH_PROFILE_DETAIL=1: the heaviest functions, to see what a part holds.
  if (DETAIL) for (const [name, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.error(`${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`)
  return totals
}

const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n)

async function wrk (url: string, headers: Record<string, string>, seconds: number, patchPets = 0): Promise<number> {
  const args = ['wrk', '-t1', `-c${CONNECTIONS}`, `-d${seconds}s`]
  for (const [name, value] of Object.entries(headers)) args.push('-H', `${name}: ${value}`)
  const script = patchPets > 0 ? ['-s', WRK_SCRIPT, url, '--', String(patchPets)] : [url]
  const { stdout } = await runCommand([...args, ...script], {}, 'load', (seconds + 60) * 1000)
  const match = /(\d+) requests in/.exec(stdout)
  if (match === null) throw new Error(`wrk printed no count: ${stdout}`)
  return Number(match[1])
}

/** Loads a server started with --cpu-prof for SECONDS after a warm-up; returns the parts per request. */
async function profileUnderLoad (start: (dir: string) => Promise<{ url: string, headers: Record<string, string>, stopServer: () => Promise<void>, patchPets?: number }>,
  work: string, name: string): Promise<{ requests: number, perRequest: Map<string, number> }> {
  const dir = mkdtempSync(join(work, `${name}-`))
  const server = await start(dir)
  await wrk(server.url, server.headers, 3, server.patchPets)
  const from = monotonicUs()
  const requests = await wrk(server.url, server.headers, SECONDS, server.patchPets)
  const to = monotonicUs()
  await server.stopServer()
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'))
  if (file === undefined) throw new Error(`${name}: no CPU profile was written`)
  // BENCH_PROFILE_KEEP=dir: the raw profile is copied there, for a closer look (the work folder goes with the run).
  if (process.env.BENCH_PROFILE_KEEP !== undefined) cpSync(join(dir, file), join(process.env.BENCH_PROFILE_KEEP, `${name}.cpuprofile`))
  const totals = parts(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile, from, to)
  return { requests, perRequest: new Map([...totals].map(([part, us]) => [part, us / requests])) }
}

async function main (): Promise<void> {
  cleanupOnSignals()
  const cleanup = new Cleanup()
  const work = mkdtempSync(join(tmpdir(), 'petstore-profile-'))
  cleanup.defer(() => rmSync(work, { recursive: true, force: true }))
  try {
    const bin = join(TARGET, 'bin/petstore.js')
    const env = { DATABASE_URL: join(work, 'store.db'), LOG_LEVEL: 'warn' }
    await runNode([bin, 'migrate'], env)
    const pets = Array.from({ length: 10 }, (_, i) => ({ id: i + 1, name: `Pet ${i + 1}`, status: 'available', quantity: i }))
    writeFileSync(join(work, 'pets.json'), JSON.stringify({ pets, orders: [] }))
    const patchEnv = { ...env, DATABASE_URL: join(work, 'patch.db') }
    if (PATCH) {
      await runNode([bin, 'migrate'], patchEnv)
      const many = Array.from({ length: PATCH_PETS }, (_, i) => ({ id: i + 1, name: `Pet ${i + 1}`, status: 'available', quantity: i % 1000 }))
      writeFileSync(join(work, 'many.json'), JSON.stringify({ pets: many, orders: [] }))
      await runNode([bin, 'import', join(work, 'many.json')], patchEnv)
    }
    await runNode([bin, 'import', join(work, 'pets.json')], env)
    const createKey = async (keyEnv: Record<string, string>): Promise<string> =>
      (await runNode([bin, 'keys', 'create', '--plan', 'enterprise', '--name', 'profile', '--per-minute', '1000000000', '--per-day', '1000000000'], keyEnv)).trim()
    const headers = { authorization: `Bearer ${await createKey(env)}` }
    const tracingEnv: Record<string, string> = {}
    if (TRACES_SAMPLER !== '') {
      const sink = startNode([join(ROOT, 'bench/otlp-sink.js')], {}, 'load')
      cleanup.defer(() => stop(sink))
      tracingEnv.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${await waitOutput(sink, /listening (\d+)/)}`
      tracingEnv.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = settings.tracesProtocol
      tracingEnv.OTEL_TRACES_SAMPLER = TRACES_SAMPLER
      if (TRACES_SAMPLER_ARG !== '') tracingEnv.OTEL_TRACES_SAMPLER_ARG = TRACES_SAMPLER_ARG
    }
    const serviceEnv = { ...(PATCH ? patchEnv : env), ...tracingEnv }
    const serviceHeaders = PATCH ? { authorization: `Bearer ${await createKey(patchEnv)}` } : headers

    // The ceiling answers the bytes of the 10-entry GET in both scenarios, read from a server on that store.
    let body = Buffer.alloc(0)
    {
      const port = await freePort()
      const proc = startNode([bin, 'serve'], { ...env, PORT: String(port), HOST: '127.0.0.1' }, 'server')
      await waitHttp(`http://127.0.0.1:${port}/healthz`, proc)
      body = Buffer.from(await (await fetch(`http://127.0.0.1:${port}/v1/inventory`, { headers })).arrayBuffer())
      await stop(proc, 20_000)
    }

    const service = await profileUnderLoad(async (dir) => {
      const port = await freePort()
      const proc = startNode(['--cpu-prof', `--cpu-prof-dir=${dir}`, bin, 'serve'], { ...serviceEnv, PORT: String(port), HOST: '127.0.0.1' }, 'server')
      cleanup.defer(() => stop(proc))
      await waitHttp(`http://127.0.0.1:${port}/healthz`, proc)
      return { url: `http://127.0.0.1:${port}/v1/inventory`, headers: serviceHeaders, stopServer: () => stop(proc, 20_000), ...(PATCH ? { patchPets: PATCH_PETS } : {}) }
    }, work, 'service')

    const ceiling = await profileUnderLoad(async (dir) => {
      const file = join(dir, 'body')
      writeFileSync(file, body)
      const proc = startNode(['--cpu-prof', `--cpu-prof-dir=${dir}`, join(ROOT, 'bench/bare-server.js'), file, 'application/json; charset=utf-8'], {}, 'server')
      cleanup.defer(() => stop(proc))
      const port = await waitOutput(proc, /listening (\d+)/)
      return { url: `http://127.0.0.1:${port}/v1/inventory`, headers: {}, stopServer: () => stop(proc, 20_000) }
    }, work, 'ceiling')

    const rows = PARTS.map(([part]) => part)
    const fmt = (us: number | undefined): string => (us ?? 0).toFixed(1)
    const sum = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0)
    console.log(`${PATCH ? `PATCH /v1/inventory/{petId}, ${PATCH_PETS} pets, durable SQLite (ceiling: the GET's bytes)` : 'GET /v1/inventory, 10 entries'}, ${CONNECTIONS} connections, ${SECONDS} s; build: ${TARGET}; ${TRACES_SAMPLER === '' ? 'not tracing' : `tracing, sampler ${TRACES_SAMPLER} ${TRACES_SAMPLER_ARG}`.trim()}; pinned: ${PINNING === null ? 'no' : 'yes'}`)
    console.log(`service ${service.requests} requests (${(service.requests / SECONDS).toFixed(0)}/s), ceiling ${ceiling.requests} (${(ceiling.requests / SECONDS).toFixed(0)}/s), ` +
      `ratio ${(service.requests / ceiling.requests).toFixed(3)} (under the profiler)\n`)
    console.log('| part | service µs/request | ceiling µs/request |')
    console.log('|---|---:|---:|')
    for (const part of rows) {
      if ((service.perRequest.get(part) ?? 0) < 0.05 && (ceiling.perRequest.get(part) ?? 0) < 0.05) continue
      console.log(`| ${part} | ${fmt(service.perRequest.get(part))} | ${fmt(ceiling.perRequest.get(part))} |`)
    }
    console.log(`| **total (main thread)** | **${fmt(sum(service.perRequest))}** | **${fmt(sum(ceiling.perRequest))}** |`)
  } finally {
    await cleanup.run()
  }
}

await main()
