/**
 * The load run's checkout mix: storefront keys selling pets of their own (apart from the writers') through holds and
 * orders for the whole run, as test/helpers/checkout.ts's shoppers do: most holds confirmed, some released, some
 * abandoned to a short expiry, a quarter of the requests sent again under the same Idempotency-Key before the first
 * answer came. A stocker
 * (the admin key) brings in an arrival when a pet runs low, so that a long run keeps selling rather than refusing.
 * The database is sampled all along; at the end the checks of the never-oversold test are made.
 */
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Book, endStateProblems, Shopper, watchStock, type StockDatabase, type Transport } from '../helpers/checkout.js'
import { Pace, type Traffic } from './traffic.js'

/** What the checkout mix found, for the run's report and verdict. */
export interface CheckoutVerdict {
  ok: boolean
  lines: string[]
  /** The stock each checkout pet ends with, as the clients were told (stocked - sold): the run's model of them. */
  expected: Map<number, number>
}

/** Units each checkout pet is imported with, and what an arrival brings when one runs low. */
export const CHECKOUT_STOCK = 100
const ARRIVAL = 100
const LOW = 20
/** Most checkouts are paid; some customers leave, some just go away. */
const MOSTLY_PAID = { confirm: 60, release: 20, abandon: 20 }

/** Sends through the run's Traffic (counted, 5xx recorded); a request without an answer throws, so shoppers resend it. */
function through (traffic: Traffic): Transport {
  return async (url, init) => {
    const answer = await traffic.send(url, init)
    if (answer === null) throw new Error(`no answer from ${url}`)
    return answer
  }
}

export class Checkout {
  readonly book = new Book()
  /** Units given to each pet: the import's, then every arrival acknowledged. */
  readonly stocked = new Map<number, number>()
  readonly #transport: Transport

  constructor (
    private readonly traffic: Traffic,
    private readonly bases: string[],
    private readonly pets: number[],
    private readonly storefrontKeys: string[],
    private readonly adminKey: string,
    private readonly database: StockDatabase
  ) {
    this.#transport = through(traffic)
    for (const petId of pets) this.stocked.set(petId, CHECKOUT_STOCK)
  }

  /**
   * Runs `shoppers` clients until `until`, each starting a checkout (or an order) `perSecond` times a second, and the
   * stocker; then waits for every abandoned hold to expire and checks the end state.
   */
  async run (shoppers: number, perSecond: number, until: number): Promise<CheckoutVerdict> {
    const watch = watchStock(this.database, this.pets, 50)
    const tag = randomUUID().slice(0, 8)
    const settled = await Promise.allSettled([
      ...Array.from({ length: shoppers }, async (_, i) => {
        const shopper = new Shopper(this.book, this.#transport, this.bases, this.storefrontKeys[i % this.storefrontKeys.length] as string, i)
        const pace = new Pace(perSecond)
        const running: Array<Promise<void>> = []
        while (Date.now() < until) {
          await pace.slot()
          const petId = this.pets[Math.floor(Math.random() * this.pets.length)] as number
          const copies = Math.random() < 0.25 ? 2 : 1
          // Checkouts overlap, as a storefront's customers do: the next one does not wait for this one's payment.
          running.push(Math.random() < 0.75
            ? shopper.checkout(petId, { expiresIn: 2 + Math.floor(Math.random() * 3), keepFor: 60, thinkMs: 1000, copies, tag, mix: MOSTLY_PAID })
            : shopper.order(petId, { thinkMs: 500, copies, tag, deliver: 0.6 }))
        }
        await Promise.all(running)
      }),
      this.#stocker(until)
    ])
    const failed = settled.find((r) => r.status === 'rejected')
    if (failed === undefined) await sleep(Math.max(0, this.book.lastExpiry() - Date.now()) + 200)
    // Stopped whatever happened: a sampler left running would keep the run's process alive.
    const watched = await watch.stop()
    if (failed !== undefined) throw failed.reason
    const problems = [...this.book.problems, ...await endStateProblems(this.book, this.database, this.stocked, this.bases, this.adminKey, this.#transport)]
    const expected = new Map([...this.stocked].map(([petId, units]) => [petId, units - this.book.sold(petId)]))
    const b = this.book
    const sold = this.pets.reduce((sum, petId) => sum + b.sold(petId), 0)
    const stocked = [...this.stocked.values()].reduce((sum, n) => sum + n, 0)
    const lines = [
      `holds: ${b.n('holds placed')} placed (${b.n('holds confirmed')} confirmed, ${b.n('holds released')} released, ` +
        `${b.n('holds abandoned to expiry')} abandoned to expiry, ${b.n('confirm too late (hold_not_active)') + b.n('release too late (hold_not_active)')} ended too late), ` +
        `${b.n('hold refused (insufficient_stock)')} refused (insufficient_stock); orders: ${b.n('orders placed')} placed ` +
        `(${b.n('orders delivered')} delivered, ${b.n('orders cancelled')} cancelled), ${b.n('order refused (insufficient_stock)')} refused; ` +
        `${b.n('replays')} replays, ${b.n('409 idempotency_key_in_flight, sent again')} copies sent again while in flight`,
      `never oversold: ${watched.samples} samples of ${this.pets.length} pets' stock in the database (at most ${watched.maxHeld} units of a pet held), ` +
        `held + sold above stocked in ${watched.violations.length}${watched.violations.length > 0 ? ' e.g. ' + watched.violations.slice(0, 3).join('; ') : ''}`,
      `end state: ${sold} of ${stocked} units sold (${stocked - CHECKOUT_STOCK * this.pets.length} by arrivals during the run), ` +
        `${problems.length} differ from what the clients were told${problems.length > 0 ? ' e.g. ' + problems.slice(0, 3).join('; ') : ''}`
    ]
    const ok = watched.violations.length === 0 && problems.length === 0 && watched.samples > 0 && b.n('holds confirmed') > 0
    return { ok, lines, expected }
  }

  /** An arrival for every pet that runs low, once a second, with an Idempotency-Key sent again until answered. */
  async #stocker (until: number): Promise<void> {
    while (Date.now() < until) {
      await sleep(1000)
      for (const petId of this.pets) {
        const snapshot = await this.database.snapshot(petId)
        if (snapshot.onHand > LOW) continue
        const init = {
          method: 'POST',
          headers: { authorization: `Bearer ${this.adminKey}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
          // No note: the follower counts notes, and only the writers' (test/load/clients.ts).
          body: JSON.stringify({ delta: ARRIVAL, reason: 'arrival' })
        }
        for (let attempt = 0; attempt < 20; attempt++) {
          const answer = await this.traffic.send(`${this.bases[attempt % this.bases.length] as string}/v1/inventory/${petId}/adjustments`, init)
          if (answer?.status === 200) {
            this.stocked.set(petId, (this.stocked.get(petId) ?? 0) + ARRIVAL)
            this.book.count('arrivals')
            break
          }
          if (answer !== null && answer.status !== 409) {
            this.traffic.surprise(`checkout restock: ${answer.status} ${answer.body.slice(0, 200)}`)
            break
          }
          await sleep(100)
        }
      }
    }
  }
}
