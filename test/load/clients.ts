/**
 * The load run's clients. Writers own their pets and model their stock exactly, so every write's outcome is known:
 * each write carries an `Idempotency-Key` (a write whose answer is lost is sent again with it until answered) and a
 * note that names it, which the follower reads back from the change feed to check that every acknowledged write was
 * applied exactly once and every refused one not at all. Readers, a client that runs out of its minute, a client
 * that ignores 429 and one that sends garbage make up the rest.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Pace, respectLimits, type Answer, type Call, type Traffic } from './traffic.js'

/** An API key as a client holds it; rotation hands the client a new one (same quota). */
export interface Holder {
  /** The quota's name in the run's tallies (a rotated key keeps its quota). */
  quota: string
  key: string
  /** Set when the key was revoked: the client stops at its first 401 after this. */
  revokedAt?: number
}

/** What the writers did, for the checks after the run. */
export class WriteBook {
  /** Notes of writes answered 2xx (each must be in the feed exactly once). */
  readonly applied = new Set<string>()
  /** Notes of writes refused (412, 409 out of range, 401 after revocation): never in the feed. */
  readonly refused = new Set<string>()
  /** The stock each writer's model says its pets have. */
  readonly model = new Map<number, number>()
  replaysChecked = 0
  lostAnswers = 0
  byKind = new Map<string, number>()

  count (kind: string): void {
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1)
  }
}

interface Entry { petId: number, quantity: number, etag?: string }

/** A write and its first answer, kept for replaying it. */
interface Sent { url: string, init: Call, answer: Answer }

const random = (below: number): number => Math.floor(Math.random() * below)

export class Writer {
  readonly #etags = new Map<number, string>()
  /** A tag each pet had before its latest write: stale now. */
  readonly #stale = new Map<number, string>()
  #last: Sent | null = null
  #seq = 0
  #stopped = false

  constructor (
    private readonly traffic: Traffic,
    private readonly bases: string[],
    private readonly holder: Holder,
    private readonly pets: number[],
    private readonly book: WriteBook,
    private readonly tag: string
  ) {}

  #base (): string {
    return this.bases[random(this.bases.length)] as string
  }

  #headers (extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.holder.key}`, 'content-type': 'application/json', ...extra }
  }

  #note (): string {
    return `${this.tag}-${this.#seq++}`
  }

  /** Sends a write until it is answered (the same Idempotency-Key each time); null when the run ended first. */
  async #write (path: string, method: string, body: unknown, until: number, extra: Record<string, string> = {}): Promise<Sent | null> {
    const url = `${this.#base()}${path}`
    const init: Call = { method, headers: this.#headers({ 'idempotency-key': randomUUID(), ...extra }), body: JSON.stringify(body) }
    for (let attempt = 0; ; attempt++) {
      const answer = await this.traffic.send(url, init)
      if (answer === null) this.book.lostAnswers++
      else if (answer.status === 429) this.book.count('429, sent again after Retry-After')
      else if (!(answer.status === 409 && answer.body.includes('idempotency_key_in_flight'))) return { url, init, answer }
      if (attempt > 50 || Date.now() > until + 30_000) return null
      await sleep(answer?.status === 429 ? Number(answer.headers.get('retry-after') ?? 1) * 1000 : 100)
    }
  }

  /** Records what an answered write did: `applied` notes on 2xx, `refused` on the expected refusal, else a surprise. */
  #settle (sent: Sent, notes: string[], expected: number, what: string): boolean {
    const { answer } = sent
    if (this.#revoked(answer)) {
      for (const note of notes) this.book.refused.add(note)
      return false
    }
    if (answer.status >= 200 && answer.status < 300 && expected === 200) {
      for (const note of notes) this.book.applied.add(note)
      this.traffic.admitted(this.holder.quota, answer)
      this.#last = sent
      this.book.count(what)
      return true
    }
    if (answer.status === expected) {
      for (const note of notes) this.book.refused.add(note)
      this.book.count(`${what} (${expected})`)
      if (answer.headers.get('ratelimit') !== null) this.traffic.admitted(this.holder.quota, answer)
      return false
    }
    if (answer.status !== 429) this.traffic.surprise(`${what}: ${answer.status} where ${expected} was expected: ${answer.body.slice(0, 200)}`)
    // Not applied (4xx) or unknown (5xx, a failure already): a 5xx write's notes are in neither set.
    if (answer.status < 500) for (const note of notes) this.book.refused.add(note)
    return false
  }

  #took (entry: Entry, etag: string | null): void {
    this.book.model.set(entry.petId, entry.quantity)
    const previous = this.#etags.get(entry.petId)
    if (previous !== undefined) this.#stale.set(entry.petId, previous)
    if (etag !== null) this.#etags.set(entry.petId, etag)
  }

  #pet (): number {
    return this.pets[random(this.pets.length)] as number
  }

  #newQuantity (petId: number): number {
    const now = this.book.model.get(petId) ?? 0
    const quantity = random(1000)
    return quantity === now ? quantity + 1 : quantity
  }

  async #set (until: number, ifMatch: 'fresh' | 'stale' | 'none'): Promise<void> {
    const petId = this.#pet()
    const extra: Record<string, string> = {}
    if (ifMatch === 'fresh') {
      const read = await this.traffic.send(`${this.#base()}/v1/inventory/${petId}`, { headers: this.#headers() })
      if (read === null || read.status !== 200) return this.#unexpectedRead(read, 'GET before If-Match')
      this.traffic.admitted(this.holder.quota, read)
      extra['if-match'] = read.headers.get('etag') ?? ''
    } else if (ifMatch === 'stale') {
      const stale = this.#stale.get(petId)
      if (stale === undefined) return
      extra['if-match'] = stale
    }
    const quantity = this.#newQuantity(petId)
    const note = this.#note()
    const sent = await this.#write(`/v1/inventory/${petId}`, 'PATCH', { quantity, reason: 'adjustment', note }, until, extra)
    if (sent === null) return
    const expected = ifMatch === 'stale' ? 412 : 200
    if (this.#settle(sent, [note], expected, ifMatch === 'fresh' ? 'PATCH If-Match' : ifMatch === 'stale' ? 'PATCH stale If-Match' : 'PATCH')) {
      const entry = JSON.parse(sent.answer.body) as Entry
      if (entry.quantity !== quantity) this.traffic.surprise(`PATCH answered quantity ${entry.quantity}, sent ${quantity}`)
      this.#took({ petId, quantity }, sent.answer.headers.get('etag'))
    }
  }

  async #adjust (until: number, outOfRange: boolean): Promise<void> {
    const petId = this.#pet()
    const now = this.book.model.get(petId) ?? 0
    const delta = outOfRange ? -(now + 1 + random(10)) : Math.max(-now, random(41) - 20) || 1
    const note = this.#note()
    const sent = await this.#write(`/v1/inventory/${petId}/adjustments`, 'POST', { delta, reason: delta > 0 ? 'arrival' : 'adjustment', note }, until)
    if (sent === null) return
    if (this.#settle(sent, [note], outOfRange ? 409 : 200, outOfRange ? 'adjustment out of range' : 'adjustment')) {
      const entry = JSON.parse(sent.answer.body) as Entry
      if (entry.quantity !== now + delta) this.traffic.surprise(`adjustment of ${delta} from ${now} answered ${entry.quantity}`)
      this.#took({ petId, quantity: now + delta }, sent.answer.headers.get('etag'))
    }
  }

  async #batch (until: number): Promise<void> {
    // Distinct pets, each set or adjusted upwards: the batch applies whole.
    const chosen = [...new Set(Array.from({ length: 2 + random(3) }, () => this.#pet()))]
    const changes = chosen.map((petId) => {
      const note = this.#note()
      if (random(2) === 0) {
        const quantity = this.#newQuantity(petId)
        return { change: { petId, quantity, note }, expect: quantity }
      }
      const delta = 1 + random(20)
      return { change: { petId, delta, note }, expect: (this.book.model.get(petId) ?? 0) + delta }
    })
    const sent = await this.#write('/v1/inventory/batch', 'POST', { changes: changes.map((c) => c.change) }, until)
    if (sent === null) return
    if (this.#settle(sent, changes.map((c) => c.change.note), 200, 'batch')) {
      const { entries } = JSON.parse(sent.answer.body) as { entries: Entry[] }
      changes.forEach(({ change, expect }, i) => {
        const entry = entries[i]
        if (entry?.quantity !== expect) this.traffic.surprise(`batch entry ${i} answered ${entry?.quantity}, expected ${expect}`)
        this.#took({ petId: change.petId, quantity: expect }, entry?.etag ?? null)
      })
    }
  }

  /** Sends the last acknowledged write again, as a client that lost its answer would: the first answer, replayed. */
  async #replay (): Promise<void> {
    const last = this.#last
    if (last === null) return
    const init = { ...last.init, headers: { ...last.init.headers, authorization: `Bearer ${this.holder.key}` } }
    const answer = await this.traffic.send(last.url, init)
    if (answer === null || this.#revoked(answer) || answer.status === 429) return
    this.traffic.admitted(this.holder.quota, answer)
    this.book.count('replay')
    this.book.replaysChecked++
    if (answer.status !== last.answer.status || answer.headers.get('idempotent-replayed') !== 'true' || answer.body !== last.answer.body) {
      this.traffic.surprise(`replay: ${answer.status} replayed=${answer.headers.get('idempotent-replayed')} ${answer.body.slice(0, 120)}, first ${last.answer.status} ${last.answer.body.slice(0, 120)}`)
    }
  }

  /** Whether the answer is the refusal of a key revoked on purpose: the writer then stops. */
  #revoked (answer: Answer): boolean {
    if (answer.status !== 401 || this.holder.revokedAt === undefined) return false
    this.#stopped = true
    return true
  }

  #unexpectedRead (answer: Answer | null, what: string): void {
    if (answer === null || answer.status === 429 || this.#revoked(answer)) return
    this.traffic.surprise(`${what}: ${answer.status} ${answer.body.slice(0, 200)}`)
  }

  /** Runs until `until` (or until its key is revoked), at `perSecond` operations. */
  async run (perSecond: number, until: number): Promise<void> {
    const pace = new Pace(perSecond)
    while (Date.now() < until && !this.#stopped) {
      await pace.slot()
      const roll = random(100)
      if (roll < 15) {
        const read = await this.traffic.send(`${this.#base()}/v1/inventory/${this.#pet()}`, { headers: this.#headers() })
        if (read?.status === 200) this.traffic.admitted(this.holder.quota, read)
        else this.#unexpectedRead(read, 'GET entry')
      } else if (roll < 35) await this.#set(until, 'none')
      else if (roll < 50) await this.#set(until, 'fresh')
      else if (roll < 53) await this.#set(until, 'stale')
      else if (roll < 75) await this.#adjust(until, false)
      else if (roll < 77) await this.#adjust(until, true)
      else if (roll < 88) await this.#batch(until)
      else await this.#replay()
      // The last answer's RateLimit field decides whether to wait; a writer's quota is sized not to run out.
    }
  }
}

/** A client reading the whole listing, sometimes revalidating it (304), and waiting when its quota runs out. */
export async function reader (traffic: Traffic, bases: string[], holder: Holder, perSecond: number, until: number): Promise<void> {
  const pace = new Pace(perSecond)
  let etag: string | null = null
  for (let i = 0; Date.now() < until; i++) {
    await pace.slot()
    const headers: Record<string, string> = { authorization: `Bearer ${holder.key}` }
    if (etag !== null && i % 10 === 0) headers['if-none-match'] = etag
    const answer = await traffic.send(`${bases[i % bases.length] as string}/v1/inventory`, { headers })
    if (answer === null) continue
    // A 304 is answered without spending quota (the limiter's not_modified decision): only a 200 counts.
    if (answer.status === 200) traffic.admitted(holder.quota, answer)
    else if (answer.status !== 304 && answer.status !== 429) traffic.surprise(`reader: ${answer.status} ${answer.body.slice(0, 200)}`)
    if (answer.status === 200) etag = answer.headers.get('etag')
    await respectLimits(answer, until)
  }
}

/** A client that ignores 429: it keeps sending at its rate, gets refused, then banned. */
export async function rude (traffic: Traffic, bases: string[], holder: Holder, perSecond: number, until: number): Promise<void> {
  const pace = new Pace(perSecond)
  for (let i = 0; Date.now() < until; i++) {
    await pace.slot()
    const answer = await traffic.send(`${bases[i % bases.length] as string}/v1/inventory`, { headers: { authorization: `Bearer ${holder.key}` } })
    if (answer?.status === 200) traffic.admitted(holder.quota, answer)
  }
}

const GARBAGE: Array<(base: string, key: string) => [string, Call]> = [
  (base, key) => [`${base}/v1/inventory/1`, { method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"quantity":' }],
  (base, key) => [`${base}/v1/inventory/1`, { method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"quantity":-1,"__proto__":{}}' }],
  (base, key) => [`${base}/v1/inventory/99999999999999999999`, { method: 'PATCH', headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' }, body: 'x' }],
  (base, key) => [`${base}/v1/inventory/batch`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"changes":[]}' }],
  (base, key) => [`${base}/v1/inventory/1/adjustments`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': '' }, body: '{"delta":1}' }],
  (base) => [`${base}/v1/inventory`, { headers: { authorization: `Bearer psk_live_${randomBytes(8).toString('hex')}` } }],
  (base, key) => [`${base}/v1/store/orders?limit=abc&cursor=%00`, { headers: { authorization: `Bearer ${key}` } }],
  (base, key) => [`${base}/v1/inventory/changes?after=not-a-cursor`, { headers: { authorization: `Bearer ${key}` } }],
  (base, key) => [`${base}/v1/pets/1e3`, { headers: { authorization: `Bearer ${key}` } }]
]

/**
 * A client that sends garbage with a write key, at pets the writers own: nothing it sends may be answered 2xx or
 * 5xx, or change the stock (the writers' model would no longer match).
 */
export async function garbage (traffic: Traffic, bases: string[], holder: Holder, perSecond: number, until: number): Promise<void> {
  const pace = new Pace(perSecond)
  for (let i = 0; Date.now() < until; i++) {
    await pace.slot()
    const [url, init] = (GARBAGE[i % GARBAGE.length] as (base: string, key: string) => [string, Call])(bases[i % bases.length] as string, holder.key)
    const answer = await traffic.send(url, init)
    if (answer === null) continue
    if (answer.status < 400) traffic.surprise(`garbage answered ${answer.status}: ${init.method ?? 'GET'} ${url}`)
    const own = init.headers?.authorization === `Bearer ${holder.key}`
    if (own && answer.status !== 429 && answer.status !== 401 && answer.headers.get('ratelimit') !== null) traffic.admitted(holder.quota, answer)
  }
}

/**
 * A follower: a copy of the stock kept from the change feed, as a shop's mirror would, starting from a listing and
 * the `Changes-Cursor` it carried. It counts every write note it reads.
 */
export class Follower {
  readonly copy = new Map<number, number>()
  readonly notes = new Map<string, number>()
  changes = 0
  #cursor = ''

  constructor (private readonly traffic: Traffic, private readonly bases: string[], private readonly holder: Holder) {}

  async start (): Promise<void> {
    const answer = await this.traffic.send(`${this.bases[0] as string}/v1/inventory`, { headers: { authorization: `Bearer ${this.holder.key}` } })
    if (answer?.status !== 200) throw new Error(`follower: the first listing answered ${answer?.status}`)
    for (const entry of JSON.parse(answer.body) as Entry[]) this.copy.set(entry.petId, entry.quantity)
    this.#cursor = answer.headers.get('changes-cursor') ?? ''
  }

  /** Reads one page; the number of changes it held. */
  async #page (i: number): Promise<number> {
    const url = `${this.bases[i % this.bases.length] as string}/v1/inventory/changes?limit=1000${this.#cursor === '' ? '' : `&after=${encodeURIComponent(this.#cursor)}`}`
    const answer = await this.traffic.send(url, { headers: { authorization: `Bearer ${this.holder.key}` } })
    if (answer === null) return 0
    if (answer.status !== 200) {
      if (answer.status !== 429) this.traffic.surprise(`follower: ${answer.status} ${answer.body.slice(0, 200)}`)
      return 0
    }
    this.traffic.admitted(this.holder.quota, answer)
    const page = JSON.parse(answer.body) as Array<{ petId: number, quantity: number, note: string | null, cursor: string }>
    for (const change of page) {
      this.copy.set(change.petId, change.quantity)
      if (change.note !== null) this.notes.set(change.note, (this.notes.get(change.note) ?? 0) + 1)
      this.#cursor = change.cursor
    }
    this.changes += page.length
    return page.length
  }

  /** Follows until `until`, polling every `idleMs` when caught up. */
  async run (until: number, idleMs = 100): Promise<void> {
    for (let i = 0; Date.now() < until; i++) if (await this.#page(i) < 1000) await sleep(idleMs)
  }

  /** After the writers stopped: reads until a page comes back empty. */
  async drain (): Promise<void> {
    for (let i = 0; await this.#page(i) > 0; i++);
  }
}
