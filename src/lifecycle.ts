/**
 * Whether this instance is leaving. A balancer (Kubernetes, HAProxy, a cloud load balancer) learns that an instance
 * is going away only from its readiness check, some seconds after the stop began: until then it keeps sending. So a
 * stop first drains (docs/adr/0019-drain-before-stopping.md): readiness fails at once, requests are still served, each answer
 * closes its connection so that clients reconnect to an instance that stays, and only then does the listener close.
 */
export class Lifecycle {
  #draining = false
  readonly #onDrain = new Set<() => void>()

  /** True from the start of a stop: /readyz answers 503 and every answer carries `Connection: close`. */
  get draining (): boolean {
    return this.#draining
  }

  /** Starts the drain; the onDrain listeners are called on the first call only. */
  drain (): void {
    if (this.#draining) return
    this.#draining = true
    for (const listener of [...this.#onDrain]) listener()
  }

  /**
   * Calls `listener` when the drain starts (at once when it has started), for what an answer's `Connection: close`
   * cannot reach: a long-lived answer such as a change stream, which ends so that its client reconnects to an instance
   * that stays. The listener must not throw. Returns a function that removes it.
   */
  onDrain (listener: () => void): () => void {
    if (this.#draining) {
      listener()
      return () => {}
    }
    this.#onDrain.add(listener)
    return () => { this.#onDrain.delete(listener) }
  }
}
