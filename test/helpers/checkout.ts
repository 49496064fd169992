/**
 * Storefront clients that sell one pet's stock through the service's own HTTP API, and the checks that nothing was
 * oversold: shared by test/selling/never-oversold.test.ts (200 clients at once, an instance killed) and the load
 * run's checkout mix (test/load/run.ts, clients for a whole run).
 *
 * A shopper places a hold (or an order), sometimes sending the same request again under the same Idempotency-Key
 * before its first answer came, then confirms, releases or abandons it to its expiry (delivers or cancels an order). Every request
 * it has no answer to (a connection refused or reset: its instance died) is sent again, with the same key, to the next
 * instance, until it is answered. The Book keeps what every client was told; the checks compare it with what the
 * database holds, sampled while the clients run and read again at the end.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import pg from 'pg'

/** An answer, read whole. */
export interface Answer {
  status: number
  headers: Headers
  body: string
}

/** Sends one request; throws when no answer came (the connection failed). */
export type Transport = (url: string, init: { method: string, headers: Record<string, string>, body?: string }) => Promise<Answer>

/** fetch, read whole, with a deadline for a server that hangs. */
export const fetchTransport: Transport = async (url, init) => {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(15_000) })
  return { status: res.status, headers: res.headers, body: await res.text() }
}

/** What a hold's client last saw of it. */
export type HoldSeen = 'active' | 'confirmed' | 'released' | 'expired'
/** What an order's client last saw of it. */
export type OrderSeen = 'placed' | 'approved' | 'delivered' | 'cancelled'

/** A hold acknowledged (answered 2xx) to its client. */
export interface HeldRecord {
  id: string
  petId: number
  quantity: number
  reference: string
  /** The expiry the answer named (ms since the epoch). */
  expiresAt: number
  seen: HoldSeen
  /** The instance whose answer acknowledged it. */
  acknowledgedBy: string
}

/** An order acknowledged to its client. */
export interface OrderedRecord {
  id: number
  petId: number
  quantity: number
  reference: string
  seen: OrderSeen
  acknowledgedBy: string
}

/** What the clients were told, and what surprised them. */
export class Book {
  readonly holds: HeldRecord[] = []
  readonly orders: OrderedRecord[] = []
  /** Per Idempotency-Key: the resource ids its 2xx answers named, and how many of them were not replays. */
  readonly keys = new Map<string, { ids: Set<string>, fresh: number, answers: number }>()
  /** References sent that may have made a hold or an order (answered or not): each must have made at most one. */
  readonly references = new Set<string>()
  readonly counts = new Map<string, number>()
  readonly problems: string[] = []
  /** Requests sent again to another instance after theirs gave no answer. */
  failovers = 0

  count (what: string, n = 1): void {
    this.counts.set(what, (this.counts.get(what) ?? 0) + n)
  }

  n (what: string): number {
    return this.counts.get(what) ?? 0
  }

  problem (what: string): void {
    this.problems.push(what)
  }

  /** Units the clients were told were sold, per pet: confirmed holds and delivered orders. */
  sold (petId: number): number {
    let units = 0
    for (const hold of this.holds) if (hold.petId === petId && hold.seen === 'confirmed') units += hold.quantity
    for (const order of this.orders) if (order.petId === petId && order.seen === 'delivered') units += order.quantity
    return units
  }

  /** The latest expiry of a hold left to expire (ms since the epoch), 0 when none. */
  lastExpiry (): number {
    return Math.max(0, ...this.holds.filter((h) => h.seen === 'active').map((h) => h.expiresAt))
  }

  summary (): string {
    return [...this.counts].sort().map(([what, n]) => `${what} ${n}`).join(', ')
  }
}

/** How long a client keeps sending one request before it gives up on it (a problem then). */
const GIVE_UP_MS = 30_000

const random = (below: number): number => Math.floor(Math.random() * below)

/** How a checkout's holds end, by weight: confirmed (paid), released (the customer left), abandoned to their expiry. */
export interface CheckoutMix { confirm: number, release: number, abandon: number }

/** A client of the service: its key, the instances in the order it tries them, the book it writes into. */
export class Shopper {
  #home: number

  constructor (
    private readonly book: Book,
    private readonly transport: Transport,
    private readonly bases: readonly string[],
    private readonly key: string,
    home: number
  ) {
    this.#home = home % bases.length
  }

  /**
   * Sends one keyed write until it is answered: again to the next instance when no answer came, again after a moment
   * when the key is in flight (a copy of it still running on that instance), the store was busy (503) or the quota
   * asks to wait. Returns the answer and the instance that gave it; null after GIVE_UP_MS (recorded as a problem).
   */
  async write (path: string, body: unknown, key: string): Promise<{ answer: Answer, base: string } | null> {
    const deadline = Date.now() + GIVE_UP_MS
    let at = this.#home
    while (Date.now() < deadline) {
      const base = this.bases[at] as string
      let answer: Answer
      try {
        answer = await this.transport(`${base}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.key}`, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify(body)
        })
      } catch {
        this.book.failovers++
        at = (at + 1) % this.bases.length
        // A client that lost its instance stays with the next one.
        this.#home = at
        await sleep(20)
        continue
      }
      if (answer.status === 409 && answer.body.includes('idempotency_key_in_flight')) {
        this.book.count('409 idempotency_key_in_flight, sent again')
        await sleep(100 + random(100))
        continue
      }
      if (answer.status === 503) {
        // The store was busy or away (its pool's wait ran out): nothing was done, and the same key is safe to resend.
        this.book.count('503, sent again')
        await sleep(100 + random(200))
        continue
      }
      if (answer.status === 429) {
        this.book.count('429, sent again after Retry-After')
        await sleep(Number(answer.headers.get('retry-after') ?? 1) * 1000)
        continue
      }
      if (answer.status >= 200 && answer.status < 300) {
        const id = String((JSON.parse(answer.body) as { id: unknown }).id)
        const seen = this.book.keys.get(key) ?? { ids: new Set<string>(), fresh: 0, answers: 0 }
        seen.ids.add(id)
        seen.answers++
        if (answer.headers.get('idempotent-replayed') !== 'true') seen.fresh++
        else this.book.count('replays')
        this.book.keys.set(key, seen)
      }
      return { answer, base }
    }
    this.book.problem(`POST ${path} (key ${key}) got no answer within ${GIVE_UP_MS} ms`)
    return null
  }

  /**
   * Sends the same write `copies` times under one key, each copy 50-150 ms after the one before, as a client that
   * gave up waiting and sent it again before the first answer came.
   */
  async #copies (path: string, body: unknown, copies: number): Promise<Array<{ answer: Answer, base: string }>> {
    const key = randomUUID()
    const answers = await Promise.all(Array.from({ length: copies }, async (_, i) => {
      if (i > 0) await sleep(i * (50 + random(100)))
      return await this.write(path, body, key)
    }))
    return answers.filter((a): a is { answer: Answer, base: string } => a !== null)
  }

  #unexpected (what: string, answer: Answer): void {
    this.book.problem(`${what}: ${answer.status} ${answer.body.slice(0, 300)}`)
  }

  /** Checks a 409 insufficient_stock: it names the line asked for, with fewer units available than requested. */
  #refused (what: string, answer: Answer, petId: number, quantity: number): void {
    const error = JSON.parse(answer.body) as { code: string, shortages?: Array<{ petId: number, requested: number, available: number }> }
    const shortage = error.shortages?.[0]
    if (error.shortages?.length !== 1 || shortage?.petId !== petId || shortage.requested !== quantity ||
      !(shortage.available >= 0 && shortage.available < quantity)) {
      this.#unexpected(`${what} refused without the shortage asked`, answer)
    }
    this.book.count(`${what} refused (insufficient_stock)`)
  }

  /**
   * One checkout: a hold of 1-3 units of `petId`, then, as `mix` weighs them, its confirmation, its release or its
   * expiry. `expiresIn`: the expiry of a hold left to expire (seconds); the others get `keepFor`, long enough to be
   * ended first.
   */
  async checkout (petId: number, options: { expiresIn: number, keepFor: number, thinkMs: number, copies: number, tag: string, mix: CheckoutMix }): Promise<void> {
    const quantity = 1 + random(3)
    const { confirm, release, abandon } = options.mix
    const roll = Math.random() * (confirm + release + abandon)
    const plan = roll < confirm ? 'confirm' : roll < confirm + release ? 'release' : 'abandon'
    const reference = `${options.tag}-h-${randomBytes(6).toString('hex')}`
    const expiresIn = plan === 'abandon' ? options.expiresIn : options.keepFor
    this.book.references.add(reference)
    const answers = await this.#copies('/v1/holds', { lines: [{ petId, quantity }], expiresIn, reference }, options.copies)
    const granted = answers.filter(({ answer }) => answer.status === 201)
    for (const { answer } of answers) {
      if (answer.status === 409 && answer.body.includes('"insufficient_stock"')) this.#refused('hold', answer, petId, quantity)
      else if (answer.status !== 201) this.#unexpected('POST /v1/holds', answer)
    }
    const first = granted[0]
    if (first === undefined) return
    const hold = JSON.parse(first.answer.body) as { id: string, state: string, lines: Array<{ petId: number, quantity: number }>, reference: string | null, expiresAt: string | null }
    if (hold.state !== 'active' || hold.reference !== reference || hold.lines.length !== 1 || hold.lines[0]?.petId !== petId ||
      hold.lines[0]?.quantity !== quantity || hold.expiresAt === null || first.answer.headers.get('location') !== `holds/${hold.id}`) {
      this.#unexpected('a hold not as asked', first.answer)
    }
    for (const other of granted) {
      if (other.answer.body !== first.answer.body) this.#unexpected(`a copy under the same key answered another body than ${first.answer.body}`, other.answer)
    }
    this.book.count('holds placed')
    const record: HeldRecord = { id: hold.id, petId, quantity, reference, expiresAt: Date.parse(hold.expiresAt ?? ''), seen: 'active', acknowledgedBy: first.base }
    this.book.holds.push(record)
    if (plan === 'abandon') {
      this.book.count('holds abandoned to expiry')
      return
    }
    await sleep(random(options.thinkMs))
    const ending = plan === 'confirm' ? 'confirm' : 'release'
    const ended = await this.#copies(`/v1/holds/${hold.id}/${ending}`, {}, random(4) === 0 ? 2 : 1)
    for (const { answer } of ended) {
      if (answer.status === 200) {
        const state = (JSON.parse(answer.body) as { state: string }).state
        const expected = ending === 'confirm' ? 'confirmed' : 'released'
        if (state !== expected) this.#unexpected(`${ending} answered state ${state}`, answer)
        record.seen = expected
      } else if (answer.status === 409 && answer.body.includes('"hold_not_active"') && Date.now() >= record.expiresAt) {
        // Slower than its expiry (a loaded machine): the hold expired, as the client is told.
        record.seen = 'expired'
        this.book.count(`${ending} too late (hold_not_active)`)
      } else this.#unexpected(`POST /v1/holds/{id}/${ending}`, answer)
    }
    if (record.seen !== 'active') this.book.count(`holds ${record.seen}`)
  }

  /** One order of 1-3 units of `petId`: placed, sometimes approved, then delivered (the sale; `deliver` of them) or cancelled. */
  async order (petId: number, options: { thinkMs: number, copies: number, tag: string, deliver: number }): Promise<void> {
    const quantity = 1 + random(3)
    const reference = `${options.tag}-o-${randomBytes(6).toString('hex')}`
    this.book.references.add(reference)
    const answers = await this.#copies('/v1/store/orders', { petId, quantity, reference }, options.copies)
    const placed = answers.filter(({ answer }) => answer.status === 201)
    for (const { answer } of answers) {
      if (answer.status === 409 && answer.body.includes('"insufficient_stock"')) this.#refused('order', answer, petId, quantity)
      else if (answer.status !== 201) this.#unexpected('POST /v1/store/orders', answer)
    }
    const first = placed[0]
    if (first === undefined) return
    const order = JSON.parse(first.answer.body) as { id: number, petId: number, quantity: number, status: string, reference: string | null, holdId: string | null }
    if (order.status !== 'placed' || order.petId !== petId || order.quantity !== quantity || order.reference !== reference || order.holdId === null) {
      this.#unexpected('an order not as asked', first.answer)
    }
    for (const other of placed) {
      if (other.answer.body !== first.answer.body) this.#unexpected(`a copy under the same key answered another body than ${first.answer.body}`, other.answer)
    }
    this.book.count('orders placed')
    const record: OrderedRecord = { id: order.id, petId, quantity, reference, seen: 'placed', acknowledgedBy: first.base }
    this.book.orders.push(record)
    const moves: Array<'approve' | 'deliver' | 'cancel'> = [...(random(2) === 0 ? ['approve' as const] : []), Math.random() < options.deliver ? 'deliver' : 'cancel']
    for (const move of moves) {
      await sleep(random(options.thinkMs))
      const to = ({ approve: 'approved', deliver: 'delivered', cancel: 'cancelled' } as const)[move]
      for (const { answer } of await this.#copies(`/v1/store/orders/${order.id}/${move}`, {}, random(4) === 0 ? 2 : 1)) {
        if (answer.status !== 200) this.#unexpected(`POST /v1/store/orders/{id}/${move}`, answer)
        else if ((JSON.parse(answer.body) as { status: string }).status !== to) this.#unexpected(`${move} answered another status`, answer)
        else record.seen = to
      }
    }
    this.book.count(`orders ${record.seen}`)
  }
}

/** What the database holds of one pet at one instant (one read transaction). */
export interface StockSnapshot {
  onHand: number
  /** Units of the pet's active hold lines, with their expiry (null: an order's, which does not expire). */
  lines: Array<{ quantity: number, expiresAt: number | null }>
  /** Units sold: what the ledger's sale rows took from the stock. */
  sold: number
  /** Units stocked: what every other stock change of the ledger (import, arrival, ...) added, less what it took. */
  stocked: number
}

/** Direct reads of the service's database, apart from the service: what the checks compare the clients' book with. */
export interface StockDatabase {
  snapshot (petId: number): Promise<StockSnapshot>
  /** How many holds (orders) each reference made, for the references given. */
  madeBy (references: readonly string[]): Promise<{ holds: Map<string, number>, orders: Map<string, number> }>
  close (): Promise<void>
}

const SNAPSHOT = {
  onHand: 'SELECT quantity FROM inventory WHERE pet_id = $1',
  lines: 'SELECT quantity, expires_at FROM hold_lines WHERE pet_id = $1 AND active',
  ledger: `SELECT coalesce(sum(CASE WHEN reason = 'sale' THEN coalesce(previous_quantity, 0) - quantity ELSE 0 END), 0) AS sold,
    coalesce(sum(CASE WHEN reason <> 'sale' THEN quantity - coalesce(previous_quantity, 0) ELSE 0 END), 0) AS stocked
    FROM stock_ledger WHERE pet_id = $1 AND event IS NULL AND reason IS NOT NULL`
}

/**
 * The PostgreSQL database of the instances: a REPEATABLE READ, READ ONLY transaction per snapshot, one at a time on
 * the one connection. Callers ask at once (the load run's sampler and its stocker, test/load/checkout.ts); left to the
 * driver's queue, their statements interleave: the second BEGIN joins the first's transaction and the first COMMIT
 * ends it, so the second's last reads run outside it, each in a snapshot of its own: an on-hand count from one moment
 * and ledger sums from a later one, a state no transaction ever committed.
 */
export async function postgresStock (url: string): Promise<StockDatabase> {
  const client = new pg.Client({ connectionString: url })
  client.on('error', () => {})
  await client.connect()
  let last: Promise<unknown> = Promise.resolve()
  /** Runs `work` once every read asked before it is done, so no two share the connection's transaction. */
  const inTurn = <T>(work: () => Promise<T>): Promise<T> => {
    const done = last.then(work, work)
    last = done.catch(() => {})
    return done
  }
  return {
    snapshot: (petId) => inTurn(async () => {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      try {
        const onHand = await client.query<{ quantity: number }>(SNAPSHOT.onHand, [petId])
        const lines = await client.query<{ quantity: number, expires_at: Date | null }>(SNAPSHOT.lines, [petId])
        const ledger = await client.query<{ sold: string, stocked: string }>(SNAPSHOT.ledger, [petId])
        return {
          onHand: onHand.rows[0]?.quantity ?? 0,
          lines: lines.rows.map((row) => ({ quantity: row.quantity, expiresAt: row.expires_at === null ? null : row.expires_at.getTime() })),
          sold: Number(ledger.rows[0]?.sold ?? 0),
          stocked: Number(ledger.rows[0]?.stocked ?? 0)
        }
      } finally {
        await client.query('COMMIT')
      }
    }),
    madeBy: (references) => inTurn(async () => {
      const holds = await client.query<{ reference: string, n: number }>(
        'SELECT reference, count(*)::int AS n FROM holds WHERE reference = ANY($1) AND order_id IS NULL GROUP BY reference', [references])
      const orders = await client.query<{ reference: string, n: number }>(
        'SELECT reference, count(*)::int AS n FROM orders WHERE reference = ANY($1) GROUP BY reference', [references])
      return { holds: new Map(holds.rows.map((r) => [r.reference, r.n])), orders: new Map(orders.rows.map((r) => [r.reference, r.n])) }
    }),
    close: () => inTurn(() => client.end())
  }
}

/** The SQLite file of the instance, opened read-only beside it (WAL: a reader never blocks its writer). */
export function sqliteStock (file: string): StockDatabase {
  const db = new Database(file, { readonly: true, fileMustExist: true })
  db.pragma('busy_timeout = 5000')
  const sqlite = (sql: string): string => sql.replaceAll('$1', '?')
  const onHand = db.prepare<[number], { quantity: number }>(sqlite(SNAPSHOT.onHand))
  const lines = db.prepare<[number], { quantity: number, expires_at: string | number | null }>(sqlite(SNAPSHOT.lines.replace('AND active', 'AND active = 1')))
  const ledger = db.prepare<[number], { sold: number, stocked: number }>(sqlite(SNAPSHOT.ledger))
  const read = db.transaction((petId: number): StockSnapshot => ({
    onHand: onHand.get(petId)?.quantity ?? 0,
    lines: lines.all(petId).map((row) => ({ quantity: row.quantity, expiresAt: row.expires_at === null ? null : typeof row.expires_at === 'number' ? row.expires_at : Date.parse(row.expires_at) })),
    sold: ledger.get(petId)?.sold ?? 0,
    stocked: ledger.get(petId)?.stocked ?? 0
  }))
  return {
    snapshot: async (petId) => read.deferred(petId),
    async madeBy (references) {
      const count = (sql: string): Map<string, number> => {
        const rows = db.prepare<string[], { reference: string, n: number }>(sql.replace('?', references.map(() => '?').join(', '))).all(...references)
        return new Map(rows.map((r) => [r.reference, r.n]))
      }
      return {
        holds: references.length === 0 ? new Map() : count('SELECT reference, count(*) AS n FROM holds WHERE reference IN (?) AND order_id IS NULL GROUP BY reference'),
        orders: references.length === 0 ? new Map() : count('SELECT reference, count(*) AS n FROM orders WHERE reference IN (?) GROUP BY reference')
      }
    },
    close: async () => { db.close() }
  }
}

/** The units of a snapshot's lines that count at `at`: active and not expired (an order's never expires). */
export function heldAt (snapshot: StockSnapshot, at: number): number {
  return snapshot.lines.reduce((sum, line) => line.expiresAt === null || line.expiresAt > at ? sum + line.quantity : sum, 0)
}

/**
 * What one snapshot shows wrong: more units held and sold than stocked, or an on-hand count the ledger does not
 * explain. `at` is read after the snapshot's transaction ended, so every write it saw was decided before `at`: a hold
 * the service let expire to grant another is expired at `at` too.
 */
export function oversold (snapshot: StockSnapshot, at: number): string | null {
  const held = heldAt(snapshot, at)
  if (held + snapshot.sold > snapshot.stocked) return `held ${held} + sold ${snapshot.sold} > stocked ${snapshot.stocked} (on hand ${snapshot.onHand})`
  if (snapshot.onHand !== snapshot.stocked - snapshot.sold) return `on hand ${snapshot.onHand} but stocked ${snapshot.stocked} - sold ${snapshot.sold}`
  return null
}

/** Samples the pets' stock in the database until stopped; every sample is judged by `oversold`. */
export function watchStock (database: StockDatabase, petIds: readonly number[], intervalMs = 20): { stop: () => Promise<{ samples: number, maxHeld: number, violations: string[] }> } {
  let stopped = false
  let samples = 0
  let maxHeld = 0
  const violations: string[] = []
  const loop = (async () => {
    while (!stopped) {
      for (const petId of petIds) {
        try {
          const snapshot = await database.snapshot(petId)
          const at = Date.now()
          samples++
          maxHeld = Math.max(maxHeld, heldAt(snapshot, at))
          const wrong = oversold(snapshot, at)
          if (wrong !== null) violations.push(`pet ${petId} at ${new Date(at).toISOString()}: ${wrong}`)
        } catch (error) {
          violations.push(`pet ${petId}: the sample failed: ${(error as Error).message}`)
        }
      }
      await sleep(intervalMs)
    }
  })()
  return {
    stop: async () => {
      stopped = true
      await loop
      return { samples, maxHeld, violations }
    }
  }
}

/**
 * The end state, once every client is done and every abandoned hold has expired, against what the clients were told:
 * on hand = stocked - sold; the ledger's sales and what was told sold agree; nothing held; every acknowledged hold and
 * order is there in the state its client last saw (an abandoned hold: expired); no reference made two holds or orders
 * (a retry under the same key made no second one); every key's 2xx answers named one resource, at most one of them not
 * a replay. `stocked`: the units each pet was given. Reads through `base` with `key` (any scope that reads).
 */
export async function endStateProblems (book: Book, database: StockDatabase, stocked: ReadonlyMap<number, number>,
  bases: readonly string[], key: string, transport: Transport = fetchTransport): Promise<string[]> {
  const problems: string[] = []
  const get = async (base: string, path: string): Promise<Answer> =>
    await transport(`${base}${path}`, { method: 'GET', headers: { authorization: `Bearer ${key}` } })
  for (const [petId, units] of stocked) {
    const sold = book.sold(petId)
    const snapshot = await database.snapshot(petId)
    const wrong = oversold(snapshot, Date.now())
    if (wrong !== null) problems.push(`pet ${petId} at the end: ${wrong}`)
    if (snapshot.onHand !== units - sold) problems.push(`pet ${petId}: on hand ${snapshot.onHand}, stocked ${units} - told sold ${sold} = ${units - sold}`)
    if (snapshot.sold !== sold) problems.push(`pet ${petId}: the ledger's sales sum to ${snapshot.sold}, the clients were told ${sold}`)
    const held = heldAt(snapshot, Date.now())
    if (held !== 0) problems.push(`pet ${petId}: ${held} units still held after every hold ended`)
    for (const base of bases) {
      const answer = await get(base, `/v1/inventory/${petId}?include=availability`)
      const entry = JSON.parse(answer.body) as { quantity?: number, onHand?: number, held?: number, available?: number }
      if (answer.status !== 200 || entry.quantity !== units - sold || entry.onHand !== units - sold || entry.held !== 0 || entry.available !== units - sold) {
        problems.push(`${base}: pet ${petId} reads ${answer.status} ${answer.body.slice(0, 200)}, expected ${units - sold} on hand, 0 held, ${units - sold} available`)
      }
    }
  }
  const base = bases[0] as string
  for (const hold of book.holds) {
    const answer = await get(base, `/v1/holds/${hold.id}`)
    const expected = hold.seen === 'active' ? 'expired' : hold.seen
    const state = answer.status === 200 ? (JSON.parse(answer.body) as { state: string }).state : null
    if (state !== expected) problems.push(`hold ${hold.id} (acknowledged by ${hold.acknowledgedBy}, last seen ${hold.seen}) reads ${answer.status} ${answer.body.slice(0, 200)}`)
  }
  for (const order of book.orders) {
    const answer = await get(base, `/v1/store/orders/${order.id}`)
    const status = answer.status === 200 ? (JSON.parse(answer.body) as { status: string }).status : null
    if (status !== order.seen) problems.push(`order ${order.id} (acknowledged by ${order.acknowledgedBy}, last seen ${order.seen}) reads ${answer.status} ${answer.body.slice(0, 200)}`)
  }
  const made = await database.madeBy([...book.references])
  for (const [reference, n] of [...made.holds, ...made.orders]) if (n > 1) problems.push(`reference ${reference} made ${n} holds or orders`)
  for (const hold of book.holds) if (made.holds.get(hold.reference) !== 1) problems.push(`hold ${hold.id}: its reference made ${made.holds.get(hold.reference) ?? 0} holds`)
  for (const order of book.orders) if (made.orders.get(order.reference) !== 1) problems.push(`order ${order.id}: its reference made ${made.orders.get(order.reference) ?? 0} orders`)
  for (const [key, seen] of book.keys) {
    if (seen.ids.size > 1) problems.push(`Idempotency-Key ${key} answered ${seen.ids.size} resources: ${[...seen.ids].join(', ')}`)
    if (seen.fresh > 1) problems.push(`Idempotency-Key ${key}: ${seen.fresh} answers were not replays`)
  }
  return problems
}
