/**
 * `npm run test:load`: a bounded run of mixed traffic (LOAD_SECONDS, default 60 s) against one instance on
 * SQLite and two instances on PostgreSQL + Redis. Many keys on different plans, GETs and PATCHes, clients that
 * ignore 429, clients that send garbage. At the end it checks, and prints: zero 5xx, every acknowledged PATCH is
 * the stored value, no key got more than its limit in any window, and server memory back near its baseline.
 * Not part of `npm test`; stops by itself and removes what it created.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { Cleanup, cleanupOnSignals, freePort, memoryMb, ROOT, runNode, startNode, stop, waitHttp, type Proc } from '../../bench/support.js'
import { cleanRedis, redisReachable } from '../ratelimit/redis-env.js'

const SECONDS = Number(process.env.LOAD_SECONDS ?? 60)
const POSTGRES_URL = process.env.POSTGRES_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const REDIS_URL = process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379'
const BIN = join(ROOT, 'bin/petstore.js')
const PETS = 200
// Small limits so that the run exercises refusals and bans within its minute windows.
const LIMITS = { RATE_LIMIT_FREE: '60/1000', RATE_LIMIT_PRO: '300/10000', RATE_LIMIT_BUSINESS: '1000/100000', RATE_LIMIT_ANONYMOUS: '600/100000' }
const PLANS: Array<{ plan: string, perMinute: number, perDay: number, args?: string[] }> = [
  { plan: 'free', perMinute: 60, perDay: 1000 }, { plan: 'free', perMinute: 60, perDay: 1000 }, { plan: 'free', perMinute: 60, perDay: 1000 },
  { plan: 'pro', perMinute: 300, perDay: 10_000 }, { plan: 'pro', perMinute: 300, perDay: 10_000 },
  { plan: 'business', perMinute: 1000, perDay: 100_000 },
  { plan: 'enterprise', perMinute: 2000, perDay: 200_000, args: ['--per-minute', '2000', '--per-day', '200000'] }
]

interface Key { key: string, plan: string, perMinute: number, perDay: number }
interface Tally { statuses: Map<number, number>, fiveXX: string[], windows: Map<string, number>, acknowledged: Map<number, number> }

function count (tally: Tally, status: number): void {
  tally.statuses.set(status, (tally.statuses.get(status) ?? 0) + 1)
}

/** Counts an admitted request in the windows named by its RateLimit header (the server's own windows). */
function admitted (tally: Tally, key: Key, res: Response): void {
  const header = res.headers.get('ratelimit') ?? ''
  const match = /"minute";r=\d+;t=(\d+), "day";r=\d+;t=(\d+)/.exec(header)
  if (match === null) return
  const now = Math.floor(Date.now() / 1000)
  for (const [name, t] of [['minute', match[1]], ['day', match[2]]]) {
    // The window's end, to a few seconds: a request and its answer may straddle a second.
    const end = Math.round((now + Number(t)) / 5) * 5
    const id = `${key.key}|${name}|${end}`
    tally.windows.set(id, (tally.windows.get(id) ?? 0) + 1)
  }
}

async function call (tally: Tally, url: string, init: RequestInit): Promise<Response | null> {
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) })
    count(tally, res.status)
    if (res.status >= 500) tally.fiveXX.push(`${init.method ?? 'GET'} ${url} -> ${res.status} ${await res.text()}`)
    else await res.arrayBuffer()
    return res
  } catch (error) {
    tally.fiveXX.push(`${init.method ?? 'GET'} ${url} -> ${(error as Error).message}`)
    return null
  }
}

/** A well-behaved client: GETs and PATCHes of its own pets (one at a time, so the last acknowledged is defined). */
async function politeClient (tally: Tally, bases: string[], key: Key, pets: number[], until: number): Promise<void> {
  const headers = { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' }
  for (let i = 0; Date.now() < until; i++) {
    const base = bases[i % bases.length] as string
    const petId = pets[i % pets.length] as number
    const quantity = Math.floor(Math.random() * 1000)
    const res = i % 3 === 0
      ? await call(tally, `${base}/v1/inventory/${petId}`, { method: 'PATCH', headers, body: JSON.stringify({ quantity }) })
      : await call(tally, `${base}/v1/inventory`, { headers })
    if (res === null) continue
    if (res.status === 200 || res.status === 304) admitted(tally, key, res)
    if (res.status === 200 && i % 3 === 0) tally.acknowledged.set(petId, quantity)
    if (res.status === 429) await sleep(Math.min(2000, Number(res.headers.get('retry-after') ?? 1) * 1000))
  }
}

/** A client that ignores 429: it keeps sending (and gets banned). */
async function rudeClient (tally: Tally, bases: string[], key: Key, until: number): Promise<void> {
  const headers = { authorization: `Bearer ${key.key}` }
  for (let i = 0; Date.now() < until; i++) {
    const res = await call(tally, `${bases[i % bases.length] as string}/v1/inventory`, { headers })
    if (res?.status === 200) admitted(tally, key, res)
  }
}

const GARBAGE: Array<(base: string, key: string) => [string, RequestInit]> = [
  (base, key) => [`${base}/v1/inventory/1`, { method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"quantity":' }],
  (base, key) => [`${base}/v1/inventory/1`, { method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"quantity":-1,"__proto__":{}}' }],
  (base, key) => [`${base}/v1/inventory/99999999999999999999`, { method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, body: 'x' }],
  (base) => [`${base}/v1/inventory`, { headers: { authorization: `Bearer psk_live_${randomBytes(8).toString('hex')}` } }],
  (base, key) => [`${base}/v1/store/orders?limit=abc&cursor=%00`, { headers: { authorization: `Bearer ${key}` } }],
  (base, key) => [`${base}/v1/pets/1e3`, { headers: { authorization: `Bearer ${key}` } }]
]

/** A client that sends garbage; its key (a free one) is counted like any other. */
async function garbageClient (tally: Tally, bases: string[], key: Key, until: number): Promise<void> {
  for (let i = 0; Date.now() < until; i++) {
    const [url, init] = (GARBAGE[i % GARBAGE.length] as (base: string, key: string) => [string, RequestInit])(bases[i % bases.length] as string, key.key)
    const res = await call(tally, url, init)
    if (res !== null && res.status !== 429 && res.status !== 401 && res.headers.get('ratelimit') !== null && init.headers !== undefined &&
      String((init.headers as Record<string, string>).authorization).includes(key.key)) admitted(tally, key, res)
  }
}

async function scenario (name: string, env: Record<string, string>, instances: number, cleanup: Cleanup): Promise<boolean> {
  console.log(`\n== ${name}: ${instances} instance(s), ${SECONDS} s of mixed traffic`)
  const dir = mkdtempSync(join(tmpdir(), 'petstore-load-'))
  cleanup.defer(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'pets.json')
  writeFileSync(file, JSON.stringify({ pets: Array.from({ length: PETS }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available', quantity: 0 })) }))
  const base = { ...env, ...LIMITS, LOG_LEVEL: 'warn', AUTH_CACHE_TTL_MS: '1000', SHUTDOWN_DRAIN_MS: '0' }
  await runNode([BIN, 'migrate'], base)
  await runNode([BIN, 'import', file], base)
  const keys: Key[] = []
  for (const spec of PLANS) keys.push({ ...spec, key: (await runNode([BIN, 'keys', 'create', '--plan', spec.plan, ...(spec.args ?? [])], base)).trim() })
  const admin = (await runNode([BIN, 'keys', 'create', '--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '100000000'], base)).trim()

  const servers: Array<{ proc: Proc, base: string }> = []
  for (let i = 0; i < instances; i++) {
    const port = await freePort()
    const proc = startNode([BIN, 'serve'], { ...base, PORT: String(port), HOST: '127.0.0.1' })
    cleanup.defer(() => stop(proc))
    await waitHttp(`http://127.0.0.1:${port}/healthz`, proc)
    servers.push({ proc, base: `http://127.0.0.1:${port}` })
  }
  const bases = servers.map((s) => s.base)
  // Warm up, then take the memory baseline.
  for (let i = 0; i < 200; i++) await fetch(`${bases[i % bases.length] as string}/v1/inventory`, { headers: { authorization: `Bearer ${admin}` } }).then((r) => r.arrayBuffer())
  const baseline = servers.map((s) => memoryMb(s.proc.pid, 'VmRSS') ?? 0)

  const tally: Tally = { statuses: new Map(), fiveXX: [], windows: new Map(), acknowledged: new Map() }
  const until = Date.now() + SECONDS * 1000
  const polite = keys.slice(0, 6)
  await Promise.all([
    ...polite.flatMap((key, k) => [0, 1].map((c) => {
      const mine = Array.from({ length: PETS }, (_, i) => i + 1).filter((petId) => petId % (polite.length * 2) === k * 2 + c)
      return politeClient(tally, bases, key, mine, until)
    })),
    rudeClient(tally, bases, keys[0] as Key, until),
    rudeClient(tally, bases, keys[6] as Key, until),
    garbageClient(tally, bases, keys[1] as Key, until),
    garbageClient(tally, bases, keys[2] as Key, until)
  ])

  // Acknowledged writes: the stored value of every pet is the last acknowledged one, on every instance.
  let mismatches = 0
  for (const b of bases) {
    const stored = await (await fetch(`${b}/v1/inventory`, { headers: { authorization: `Bearer ${admin}` } })).json() as Array<{ petId: number, quantity: number }>
    for (const item of stored) {
      const expected = tally.acknowledged.get(item.petId)
      if (expected !== undefined && expected !== item.quantity) mismatches++
    }
  }
  // No key beyond its limit in any window.
  const over: string[] = []
  for (const [id, n] of tally.windows) {
    const [key, window] = id.split('|') as [string, string]
    const spec = keys.find((k) => k.key === key)
    const limit = window === 'minute' ? spec?.perMinute : spec?.perDay
    if (limit !== undefined && n > limit) over.push(`${spec?.plan} ${window}: ${n} > ${limit}`)
  }
  await sleep(5000)
  const after = servers.map((s) => memoryMb(s.proc.pid, 'VmRSS') ?? 0)
  const memoryOk = after.every((mb, i) => mb <= Math.max((baseline[i] ?? 0) * 1.5, (baseline[i] ?? 0) + 64))

  const total = [...tally.statuses.values()].reduce((a, b) => a + b, 0)
  console.log(`requests: ${total} (${Math.round(total / SECONDS)}/s); statuses: ${[...tally.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}: ${n}`).join(', ')}`)
  console.log(`5xx or failed requests: ${tally.fiveXX.length}${tally.fiveXX.length > 0 ? ' e.g. ' + tally.fiveXX.slice(0, 3).join(' | ') : ''}`)
  console.log(`acknowledged PATCHes checked: ${tally.acknowledged.size} pets, stored value differs: ${mismatches}`)
  console.log(`key windows checked: ${tally.windows.size}, over the limit: ${over.length}${over.length > 0 ? ' ' + over.slice(0, 3).join('; ') : ''}`)
  console.log(`memory (RSS MB) baseline ${baseline.map((m) => m.toFixed(0)).join('/')} -> after ${after.map((m) => m.toFixed(0)).join('/')}: ${memoryOk ? 'within bound' : 'ABOVE BOUND'}`)
  const ok = tally.fiveXX.length === 0 && mismatches === 0 && over.length === 0 && memoryOk && tally.acknowledged.size > 0
  console.log(ok ? 'PASS' : 'FAIL')
  return ok
}

cleanupOnSignals()
const results: boolean[] = []
results.push(await Cleanup.scope((cleanup) => scenario('SQLite', { DATABASE_URL: join(mkdtempSync(join(tmpdir(), 'petstore-load-db-')), 'load.db') }, 1, cleanup)))
const database = `petstore_load_${randomBytes(6).toString('hex')}`
const admin = new pg.Client({ connectionString: POSTGRES_URL })
if (await admin.connect().then(() => true, () => false) && await redisReachable(REDIS_URL)) {
  const url = new URL(POSTGRES_URL)
  url.pathname = `/${database}`
  const prefix = `load:${randomUUID()}:`
  await admin.query(`CREATE DATABASE ${database}`)
  results.push(await Cleanup.scope(async (cleanup) => {
    cleanup.defer(async () => { await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`); await admin.end() })
    cleanup.defer(() => cleanRedis(prefix, REDIS_URL))
    return await scenario('PostgreSQL + Redis', { DATABASE_URL: url.toString(), REDIS_URL, REDIS_KEY_PREFIX: prefix }, 2, cleanup)
  }))
} else {
  console.log('\nPostgreSQL or Redis not reachable: skipping the two-instance scenario')
  await admin.end().catch(() => {})
}
const passed = results.filter(Boolean).length
console.log(`\n${passed} passed, ${results.length - passed} failed`)
process.exitCode = passed === results.length ? 0 : 1
