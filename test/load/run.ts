/**
 * `npm run test:load`: a bounded run (LOAD_SECONDS, default 60 s) of mostly admitted traffic against one instance on
 * SQLite and two instances on PostgreSQL + Redis (LOAD_ONLY=sqlite or postgres runs one). Writers set, adjust and
 * batch the stock of their own pets with If-Match and Idempotency-Key and replay some writes; storefront keys sell
 * pets of their own through holds and orders (./checkout.ts); readers read the listing; a follower mirrors the stock
 * from the change feed; one key is rotated and one revoked during the run; a minority of clients run out of quota,
 * ignore 429 or send garbage. At the end it checks and prints: no 5xx and no unexpected answer; at least 80 % of
 * answers 2xx; the store, the writers' and storefronts' model and the follower's copy agree; every acknowledged write
 * is in the feed exactly once, every refused one not at all, every replay was one; never more units held and sold
 * than stocked, at any sample of the database, and the checkout pets' end state exactly what their clients were told;
 * no quota beyond its limit in any window; the rotated and revoked keys refused; memory judged from its trend.
 * Not part of `npm test`; stops by itself and removes what it created.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { Cleanup, cleanupOnSignals, freePort, memoryMb, ROOT, runNode, startNode, stop, waitHttp, type Proc } from '../../bench/support.js'
import { postgresStock, sqliteStock, type StockDatabase } from '../helpers/checkout.js'
import { cleanRedis, redisReachable } from '../ratelimit/redis-env.js'
import { Checkout, CHECKOUT_STOCK } from './checkout.js'
import { Follower, garbage, reader, rude, WriteBook, Writer, type Holder } from './clients.js'
import { Traffic } from './traffic.js'
import { differences, judgeMemory, overLimit, type MemorySample } from './verdicts.js'

const SECONDS = Number(process.env.LOAD_SECONDS ?? 60)
const ONLY = process.env.LOAD_ONLY ?? ''
const POSTGRES_URL = process.env.POSTGRES_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const REDIS_URL = process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379'
const BIN = join(ROOT, 'bin/petstore.js')
/** Preloaded into the servers: a full collection every 5 s, so the live heap is read at a steady pace. */
const COLLECT = pathToFileURL(join(ROOT, 'test/load/collect.js')).href
const PETS = 400
const WRITERS = 8
const READERS = 4
/** Pets sold by the storefronts (ids after the writers' pets), their keys, and the shoppers each starting checkouts. */
const CHECKOUT_PETS = 4
const STOREFRONTS = 2
const SHOPPERS = 4
const CHECKOUTS_PER_SECOND = 2
/** The auth cache: how long a running server may still accept a key after its revocation. */
const AUTH_CACHE_TTL_MS = 1000

/**
 * The plans, sized for the run: writers (40 operations/s, a batch costing one request per change) and readers
 * (30/s) never meet their limits; the `tight` reader (10/s on 120 a minute) runs out of its minute and waits; the
 * rude client (5/s on 120 a minute) ignores 429 and gets banned. The abusive clients send at a fixed pace, however
 * slow the server: at 5/s each they stay a minority of the traffic even when a busy machine slows the others down.
 */
interface Limits { perMinute: number, perDay: number }
const PLAN_LIMITS: Record<'free' | 'pro' | 'business', Limits> = {
  free: { perMinute: 120, perDay: 100_000 }, pro: { perMinute: 3000, perDay: 1_000_000 }, business: { perMinute: 12_000, perDay: 10_000_000 }
}
/** The servers' plans (RATE_LIMIT_<PLAN>=perMinute/perDay), from PLAN_LIMITS. */
const LIMITS = {
  ...Object.fromEntries(Object.entries(PLAN_LIMITS).map(([plan, l]) => [`RATE_LIMIT_${plan.toUpperCase()}`, `${l.perMinute}/${l.perDay}`])),
  RATE_LIMIT_ANONYMOUS: '600/100000'
}

interface Issued extends Holder { id: string }

function value (text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `))
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1))
}

/** Reads each instance's live heap, major collections and RSS every second until `until`. */
async function sampleMemory (servers: Array<{ proc: Proc, base: string }>, start: number, until: number): Promise<MemorySample[][]> {
  const samples: MemorySample[][] = servers.map(() => [])
  while (Date.now() < until) {
    await Promise.all(servers.map(async (server, i) => {
      try {
        const text = await (await fetch(`${server.base}/metrics`, { signal: AbortSignal.timeout(5000) })).text()
        samples[i]?.push({
          at: Date.now() - start,
          heapAfterGc: value(text, 'petstore_heap_after_gc_bytes'),
          majors: value(text, 'nodejs_gc_duration_seconds_count', '{kind="major"}'),
          rssMb: memoryMb(server.proc.pid, 'VmRSS') ?? 0
        })
      } catch {
        // A sample missed (a slow scrape) leaves a gap; the verdict needs samples in every quarter, not every second.
      }
    }))
    await sleep(1000)
  }
  return samples
}

/**
 * One scenario; `database` opens the instances' database for direct reads (the checkout mix samples it), once it is
 * migrated.
 */
async function scenario (name: string, env: Record<string, string>, instances: number, cleanup: Cleanup, database: () => Promise<StockDatabase>): Promise<boolean> {
  console.log(`\n== ${name}: ${instances} instance(s), ${SECONDS} s of traffic`)
  const dir = mkdtempSync(join(tmpdir(), 'petstore-load-'))
  cleanup.defer(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'pets.json')
  const checkoutPets = Array.from({ length: CHECKOUT_PETS }, (_, i) => PETS + i + 1)
  writeFileSync(file, JSON.stringify({
    pets: [
      ...Array.from({ length: PETS }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available', quantity: 0 })),
      ...checkoutPets.map((id) => ({ id, name: `pet ${id}`, status: 'available', quantity: CHECKOUT_STOCK }))
    ]
  }))
  const base = { ...env, ...LIMITS, LOG_LEVEL: 'warn', AUTH_CACHE_TTL_MS: String(AUTH_CACHE_TTL_MS), SHUTDOWN_DRAIN_MS: '0' }
  await runNode([BIN, 'migrate'], base)
  await runNode([BIN, 'import', file], base)
  /** Limits of each quota the run checks (every key but the admin's, whose limits never bind). */
  const limits = new Map<string, Limits>()
  const issue = async (quota: string, plan: keyof typeof PLAN_LIMITS | 'enterprise', ...args: string[]): Promise<Issued> => {
    const { id, key } = JSON.parse(await runNode([BIN, 'keys', 'create', '--plan', plan, '--name', quota, '--json', ...args], base)) as { id: string, key: string }
    if (plan !== 'enterprise') limits.set(quota, PLAN_LIMITS[plan])
    return { quota, id, key }
  }
  const writerKeys: Issued[] = []
  for (let i = 0; i < WRITERS; i++) writerKeys.push(await issue(`writer-${i}`, 'business'))
  const readerKeys: Issued[] = []
  for (let i = 0; i < READERS; i++) readerKeys.push(await issue(`reader-${i}`, 'pro'))
  const tight = await issue('tight', 'free')
  const rudeKey = await issue('rude', 'free')
  const garbageKey = await issue('garbage', 'pro')
  const followerKey = await issue('follower', 'business')
  const admin = (await issue('admin', 'enterprise', '--per-minute', '1000000', '--per-day', '100000000')).key
  const storefronts: string[] = []
  for (let i = 0; i < STOREFRONTS; i++) {
    storefronts.push((await issue(`storefront-${i}`, 'enterprise', '--per-minute', '1000000', '--per-day', '100000000', '--scope', 'storefront')).key)
  }
  const stock = await database()
  cleanup.defer(() => stock.close())

  const servers: Array<{ proc: Proc, base: string }> = []
  for (let i = 0; i < instances; i++) {
    const port = await freePort()
    const proc = startNode(['--expose-gc', '--import', COLLECT, BIN, 'serve'], { ...base, PORT: String(port), HOST: '127.0.0.1' })
    cleanup.defer(() => stop(proc))
    await waitHttp(`http://127.0.0.1:${port}/healthz`, proc)
    servers.push({ proc, base: `http://127.0.0.1:${port}` })
  }
  const bases = servers.map((s) => s.base)

  const traffic = new Traffic()
  const book = new WriteBook()
  for (let petId = 1; petId <= PETS; petId++) book.model.set(petId, 0)
  const follower = new Follower(traffic, bases, followerKey)
  await follower.start()
  const start = Date.now()
  const until = start + SECONDS * 1000
  const tag = randomBytes(3).toString('hex')
  const writers = writerKeys.map((key, w) =>
    new Writer(traffic, bases, key, Array.from({ length: PETS / WRITERS }, (_, i) => i * WRITERS + w + 1), book, `${tag}-w${w}`))
  const checkout = new Checkout(traffic, bases, checkoutPets, storefronts, admin, stock)

  // A rotation a third of the way in, a revocation at two thirds: each key refused on every instance afterwards.
  const lifecycle: string[] = []
  const refusedEverywhere = async (key: string, what: string): Promise<void> => {
    const statuses = await Promise.all(bases.map(async (b) => (await traffic.send(`${b}/v1/inventory/1`, { headers: { authorization: `Bearer ${key}` } }))?.status))
    lifecycle.push(`${what}: ${statuses.every((s) => s === 401) ? 'refused (401) on every instance' : `ANSWERED ${statuses.join('/')}`}`)
  }
  const events = (async () => {
    await sleep(Math.max(0, start + SECONDS * 1000 / 3 - Date.now()))
    const rotated = writerKeys[0] as Issued
    const old = rotated.key
    const next = JSON.parse(await runNode([BIN, 'keys', 'rotate', rotated.id, '--overlap', '3s', '--json'], base)) as { key: string }
    rotated.key = next.key
    await sleep(3000 + AUTH_CACHE_TTL_MS + 1000)
    await refusedEverywhere(old, `${rotated.quota}'s key after its rotation (3 s overlap)`)
    await sleep(Math.max(0, start + SECONDS * 2000 / 3 - Date.now()))
    const revoked = writerKeys[1] as Issued
    revoked.revokedAt = Date.now()
    await runNode([BIN, 'keys', 'revoke', revoked.id], base)
    await sleep(AUTH_CACHE_TTL_MS + 1000)
    await refusedEverywhere(revoked.key, `${revoked.quota}'s key after its revocation`)
  })()

  const [memory, , sold] = await Promise.all([
    sampleMemory(servers, start, until),
    events,
    checkout.run(SHOPPERS, CHECKOUTS_PER_SECOND, until),
    follower.run(until),
    ...writers.map((writer) => writer.run(40, until)),
    ...readerKeys.map((key) => reader(traffic, bases, key, 30, until)),
    reader(traffic, bases, tight, 10, until),
    rude(traffic, bases, rudeKey, 5, until),
    garbage(traffic, bases, garbageKey, 5, until)
  ])
  await follower.drain()
  // The storefronts' pets end as their clients were told: part of the model the store is compared with.
  for (const [petId, quantity] of sold.expected) book.model.set(petId, quantity)

  // The store on every instance, the writers' and storefronts' model and the follower's copy.
  const stockProblems: string[] = []
  for (const b of bases) {
    const listing = await (await fetch(`${b}/v1/inventory`, { headers: { authorization: `Bearer ${admin}` } })).json() as Array<{ petId: number, quantity: number }>
    const stored = new Map(listing.map((e) => [e.petId, e.quantity]))
    stockProblems.push(...differences(stored, book.model, [`stored (${b})`, 'writers\' model']))
    stockProblems.push(...differences(stored, follower.copy, [`stored (${b})`, 'follower\'s copy']))
  }
  const notTwice: string[] = []
  for (const note of book.applied) if (follower.notes.get(note) !== 1) notTwice.push(`${note} acknowledged, in the feed ${follower.notes.get(note) ?? 0} times`)
  for (const note of book.refused) if (follower.notes.has(note)) notTwice.push(`${note} refused, in the feed ${follower.notes.get(note) ?? 0} times`)
  for (const note of follower.notes.keys()) if (!book.applied.has(note) && !book.refused.has(note)) notTwice.push(`${note} in the feed, never answered`)
  const over = overLimit(traffic.windows, limits)
  const verdicts = memory.map((samples) => judgeMemory(samples, SECONDS * 1000))
  const rss = memory.map((samples) => samples.map((s) => s.rssMb))
  const share = traffic.successShare()

  const total = traffic.total()
  console.log(`requests: ${total} (${Math.round(total / SECONDS)}/s); statuses: ${[...traffic.statuses].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}: ${n}`).join(', ')}`)
  console.log(`2xx: ${(share * 100).toFixed(1)} % of answers (at least 80 %)`)
  console.log(`writes: ${[...book.byKind].sort().map(([k, n]) => `${k} ${n}`).join(', ')}; answers lost and sent again: ${book.lostAnswers}`)
  console.log(`5xx or failed requests: ${traffic.failures.length}${traffic.failures.length > 0 ? ' e.g. ' + traffic.failures.slice(0, 3).join(' | ') : ''}`)
  console.log(`unexpected answers: ${traffic.surprises.length}${traffic.surprises.length > 0 ? ' e.g. ' + traffic.surprises.slice(0, 3).join(' | ') : ''}`)
  console.log(`stock: ${PETS} pets on ${bases.length} instance(s) against the writers' model and the follower's copy (${follower.changes} changes read): ` +
    `${stockProblems.length} differ${stockProblems.length > 0 ? ' e.g. ' + stockProblems.slice(0, 3).join('; ') : ''}`)
  for (const line of sold.lines) console.log(`checkout: ${line}`)
  console.log(`exactly once: ${book.applied.size} acknowledged writes each in the feed once, ${book.refused.size} refused in it never, ` +
    `${book.replaysChecked} replays answered the first answer: ${notTwice.length} exceptions${notTwice.length > 0 ? ' e.g. ' + notTwice.slice(0, 3).join('; ') : ''}`)
  const busiest = new Map<string, number>()
  for (const [id, n] of traffic.windows) if (id.includes('|minute|')) busiest.set(id.split('|')[0] as string, Math.max(busiest.get(id.split('|')[0] as string) ?? 0, n))
  console.log(`busiest minute per quota (admitted/limit): ${[...busiest].sort().map(([quota, n]) => `${quota} ${n}/${limits.get(quota)?.perMinute}`).join(', ')}`)
  console.log(`key windows checked: ${traffic.windows.size}, over the limit: ${over.length}${over.length > 0 ? ' ' + over.slice(0, 3).join('; ') : ''}`)
  for (const line of lifecycle) console.log(`keys: ${line}`)
  verdicts.forEach((verdict, i) => {
    const values = rss[i] ?? []
    console.log(`memory, instance ${i + 1}: ${verdict.text}; RSS ${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)} MB`)
  })
  const ok = traffic.failures.length === 0 && traffic.surprises.length === 0 && share >= 0.8 && stockProblems.length === 0 &&
    notTwice.length === 0 && book.applied.size > 0 && book.replaysChecked > 0 && over.length === 0 && lifecycle.length === 2 &&
    lifecycle.every((line) => line.includes('refused (401)')) && verdicts.every((v) => v.ok) && sold.ok
  console.log(ok ? 'PASS' : 'FAIL')
  return ok
}

cleanupOnSignals()
const results: boolean[] = []
if (ONLY === '' || ONLY === 'sqlite') {
  results.push(await Cleanup.scope((cleanup) => {
    const file = join(mkdtempSync(join(tmpdir(), 'petstore-load-db-')), 'load.db')
    return scenario('SQLite', { DATABASE_URL: file }, 1, cleanup, async () => sqliteStock(file))
  }))
}
if (ONLY === '' || ONLY === 'postgres') {
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
      return await scenario('PostgreSQL + Redis', { DATABASE_URL: url.toString(), REDIS_URL, REDIS_KEY_PREFIX: prefix }, 2, cleanup,
        () => postgresStock(url.toString()))
    }))
  } else {
    console.log(`\nPostgreSQL (${POSTGRES_URL}) or Redis (${REDIS_URL}) not reachable: ${process.env.CI === 'true' ? 'FAIL (CI)' : 'skipping the two-instance scenario'}`)
    if (process.env.CI === 'true') results.push(false)
    await admin.end().catch(() => {})
  }
}
const passed = results.filter(Boolean).length
console.log(`\n${passed} passed, ${results.length - passed} failed`)
process.exitCode = passed === results.length && results.length > 0 ? 0 : 1
