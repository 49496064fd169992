/**
 * The clients of the chaos run: several at once, mostly writers (PATCHes of the pets each owns, one write at a time,
 * each with an Idempotency-Key of its own) and a few readers (GETs). A write is retried with its key until it is
 * answered 2xx: after a 503 (honouring Retry-After, capped) and after a connection error (on the next instance), so
 * the last acknowledged write of every pet is what must be stored. Everything else (another 5xx, a 503 without
 * Retry-After, an unexpected 4xx, an answer that never comes) is a failure of the fault.
 */
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'

/** The longest a client waits after a 503, whatever its Retry-After says: the run measures recovery to about this. */
export const RETRY_AFTER_CAP_MS = 1000
/** An answer slower than this is a hang (the service's own limits answer within 2 s + 5 s). */
const ANSWER_TIMEOUT_MS = 15_000
/** A pause between a client's requests, so that the run leaves CPU to the servers it loads (two cores, shared). */
const PAUSE_MS = 5
/** After stop(), how long a client may still take to get its last write answered. */
const FINISH_TIMEOUT_MS = 30_000

export interface TrafficOptions {
  /** Every instance's base URL: clients start spread over them and move on at a connection error. */
  bases: string[]
  /** Bearer keys (limits that never bind); client i uses keys[i % keys.length]. */
  keys: string[]
  /** Clients that write (each its own pets, one write at a time). */
  clients: number
  /** Clients that only read (the listing and single entries), so that reads go on while writers wait on a retry. */
  readers: number
  /** The pets of client i are i * petsPerClient + 1 ... (i + 1) * petsPerClient. */
  petsPerClient: number
}

interface Client {
  key: string
  pets: number[]
  /** The instance it sends to now. */
  instance: number
}

/** Whether fetch gave up waiting for the answer (AbortSignal.timeout), as opposed to a connection error. */
function isTimeout (error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')
}

export class Traffic {
  readonly bases: string[]
  readonly pets: number[]
  /** The last acknowledged quantity of each pet. */
  readonly acknowledged = new Map<number, number>()
  /** When each acknowledged write was answered (ms since the epoch). */
  readonly acks: number[] = []
  /** How long the try that was acknowledged took, in the order of `acks`. */
  readonly ackLatencies: number[] = []
  /** When each 503 was answered. */
  readonly unavailable: number[] = []
  /** When each 503 to a read was answered (these are in `unavailable` too). */
  readonly unavailableReads: number[] = []
  /** When each read was answered 200. */
  readonly reads: number[] = []
  connectionErrors = 0
  /** Retries refused with 409 idempotency_key_in_flight after a lost answer (the first try still running somewhere). */
  inFlightRetries = 0
  /** Requests whose answer did not come within ANSWER_TIMEOUT_MS. */
  timeouts = 0
  /** Every answer that fails the fault, described. */
  readonly failures: string[] = []
  /** Pets whose stored value is unknown: a write of theirs failed in a way that says nothing about whether it applied. */
  readonly uncertain = new Set<number>()
  readonly #clients: Client[]
  readonly #readers: Client[]
  #stopping = false
  #finishBy = Infinity
  #running: Promise<void>[] = []
  startedAt = 0
  stoppedAt = 0

  constructor ({ bases, keys, clients, readers, petsPerClient }: TrafficOptions) {
    this.bases = bases
    this.#clients = Array.from({ length: clients }, (_, i) => ({
      key: keys[i % keys.length] as string,
      pets: Array.from({ length: petsPerClient }, (_, p) => i * petsPerClient + p + 1),
      instance: i % bases.length
    }))
    this.#readers = Array.from({ length: readers }, (_, i) => ({ key: keys[i % keys.length] as string, pets: [], instance: i % bases.length }))
    this.pets = this.#clients.flatMap((client) => client.pets)
  }

  start (): void {
    this.startedAt = Date.now()
    this.#running = [...this.#clients.map((client) => this.#writer(client)), ...this.#readers.map((client) => this.#reader(client))]
  }

  /** Stops sending; each client first gets its write under way answered (or gives up after FINISH_TIMEOUT_MS). */
  async stop (): Promise<void> {
    this.#stopping = true
    this.#finishBy = Date.now() + FINISH_TIMEOUT_MS
    await Promise.all(this.#running)
    this.stoppedAt = Date.now()
  }

  /** Resolves with the time of the first write acknowledged at or after `since`, or null after `timeoutMs`. */
  async firstAckAfter (since: number, timeoutMs: number): Promise<number | null> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const found = this.acks.find((at) => at >= since)
      if (found !== undefined) return found
      if (Date.now() > deadline) return null
      await sleep(20)
    }
  }

  /** A writer: its pets in turn, a new quantity each time. */
  async #writer (client: Client): Promise<void> {
    for (let n = 0; !this.#stopping; n++) {
      await this.#write(client, client.pets[n % client.pets.length] as number, Math.floor(Math.random() * 1_000_000))
      await sleep(PAUSE_MS)
    }
  }

  /** A reader: the listing and single entries, in turn, of any pet. */
  async #reader (client: Client): Promise<void> {
    for (let n = 0; !this.#stopping; n++) {
      await this.#read(client, n % 2 === 0 ? '/v1/inventory' : `/v1/inventory/${this.pets[n % this.pets.length] as number}`)
      await sleep(PAUSE_MS)
    }
  }

  #headers (client: Client): Record<string, string> {
    return { authorization: `Bearer ${client.key}`, 'content-type': 'application/json' }
  }

  #moveOn (client: Client): void {
    client.instance = (client.instance + 1) % this.bases.length
  }

  /** One write, retried with its key until it is answered 2xx, or a failure ends it. */
  async #write (client: Client, petId: number, quantity: number): Promise<void> {
    const idempotencyKey = randomUUID()
    const body = JSON.stringify({ quantity })
    let lostAnswer = false
    let refusedInARow = 0
    for (;;) {
      if (this.#stopping && Date.now() > this.#finishBy) {
        this.failures.push(`PATCH pet ${petId}: not answered 2xx within ${FINISH_TIMEOUT_MS / 1000} s of the end of the run`)
        this.uncertain.add(petId)
        return
      }
      const url = `${this.bases[client.instance] as string}/v1/inventory/${petId}`
      let status: number
      let retryAfter: string | null
      let text: string
      const sentAt = Date.now()
      try {
        const res = await fetch(url, {
          method: 'PATCH', headers: { ...this.#headers(client), 'idempotency-key': idempotencyKey }, body, signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS)
        })
        status = res.status
        retryAfter = res.headers.get('retry-after')
        text = await res.text()
      } catch (error) {
        // No answer: the write may or may not have applied; its retry with the same key settles which.
        lostAnswer = true
        if (isTimeout(error)) {
          this.timeouts++
          this.failures.push(`PATCH ${url}: no answer within ${ANSWER_TIMEOUT_MS / 1000} s`)
        } else {
          this.connectionErrors++
        }
        this.#moveOn(client)
        // Every instance refused in turn: none is listening, wait a little before going round again.
        if (++refusedInARow >= this.bases.length) await sleep(100)
        continue
      }
      refusedInARow = 0
      if (status >= 200 && status < 300) {
        this.acknowledged.set(petId, quantity)
        this.acks.push(Date.now())
        this.ackLatencies.push(Date.now() - sentAt)
        return
      }
      if (status === 503) {
        this.unavailable.push(Date.now())
        if (!this.#waitable(retryAfter, `PATCH ${url}`, text)) {
          this.uncertain.add(petId)
          return
        }
        await sleep(Math.min(Number(retryAfter) * 1000, RETRY_AFTER_CAP_MS))
        this.#moveOn(client)
        continue
      }
      // The retry of a lost answer may reach an instance where the first try still runs: wait for it and try again.
      if (status === 409 && lostAnswer && text.includes('"idempotency_key_in_flight"')) {
        this.inFlightRetries++
        await sleep(100)
        continue
      }
      this.failures.push(`PATCH ${url} -> ${status} ${text.slice(0, 300)}`)
      this.uncertain.add(petId)
      return
    }
  }

  async #read (client: Client, path: string): Promise<void> {
    const url = `${this.bases[client.instance] as string}${path}`
    try {
      const res = await fetch(url, { headers: this.#headers(client), signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS) })
      const text = await res.text()
      if (res.status === 200) {
        this.reads.push(Date.now())
      } else if (res.status === 503) {
        this.unavailable.push(Date.now())
        this.unavailableReads.push(Date.now())
        if (this.#waitable(res.headers.get('retry-after'), `GET ${url}`, text)) {
          await sleep(Math.min(Number(res.headers.get('retry-after')) * 1000, RETRY_AFTER_CAP_MS))
        }
        this.#moveOn(client)
      } else {
        this.failures.push(`GET ${url} -> ${res.status} ${text.slice(0, 300)}`)
      }
    } catch (error) {
      if (isTimeout(error)) {
        this.timeouts++
        this.failures.push(`GET ${url}: no answer within ${ANSWER_TIMEOUT_MS / 1000} s`)
      } else {
        this.connectionErrors++
      }
      this.#moveOn(client)
    }
  }

  /** A 503 must say when to come back (Retry-After in whole seconds); one that does not is a failure. */
  #waitable (retryAfter: string | null, what: string, text: string): boolean {
    if (retryAfter !== null && /^\d+$/.test(retryAfter)) return true
    this.failures.push(`${what} -> 503 without a Retry-After in seconds (${retryAfter ?? 'none'}) ${text.slice(0, 300)}`)
    return false
  }

  /** The median time an acknowledged write's try took, of those answered within [from, to]; null when none was. */
  medianLatency (from: number, to: number): number | null {
    const within = this.ackLatencies.filter((_, i) => (this.acks[i] as number) >= from && (this.acks[i] as number) <= to).sort((a, b) => a - b)
    return within.length === 0 ? null : within[Math.floor(within.length / 2)] as number
  }

  /** The longest time between two acknowledged writes (or the start or end of the traffic and the nearest one). */
  longestGap (): number {
    const times = [this.startedAt, ...[...this.acks].sort((a, b) => a - b), this.stoppedAt || Date.now()]
    let longest = 0
    for (let i = 1; i < times.length; i++) longest = Math.max(longest, (times[i] as number) - (times[i - 1] as number))
    return longest
  }

  /**
   * Checks the stored quantity of every pet against its last acknowledged write (0, as imported, for a pet never
   * acknowledged) through GET /v1/inventory on each of `bases`. Returns the differences, described.
   */
  async verify (bases: string[]): Promise<string[]> {
    const problems: string[] = []
    const key = this.#clients[0]?.key as string
    for (const base of bases) {
      const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS) })
      if (res.status !== 200) {
        problems.push(`${base}: GET /v1/inventory -> ${res.status} ${(await res.text()).slice(0, 200)}`)
        continue
      }
      const stored = new Map((await res.json() as Array<{ petId: number, quantity: number }>).map((item) => [item.petId, item.quantity]))
      for (const petId of this.pets) {
        if (this.uncertain.has(petId)) continue
        const expected = this.acknowledged.get(petId) ?? 0
        if (stored.get(petId) !== expected) problems.push(`${base}: pet ${petId} stores ${stored.get(petId)}, last acknowledged ${expected}`)
      }
    }
    return problems
  }
}
