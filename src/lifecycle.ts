/**
 * Whether this instance is leaving. A balancer (Kubernetes, HAProxy, a cloud load balancer) learns that an instance
 * is going away only from its readiness check, some seconds after the stop began: until then it keeps sending. So a
 * stop first drains (docs/decisions.md, "Draining"): readiness fails at once, requests are still served, each answer
 * closes its connection so that clients reconnect to an instance that stays, and only then does the listener close.
 */
export class Lifecycle {
  #draining = false

  /** True from the start of a stop: /readyz answers 503 and every answer carries `Connection: close`. */
  get draining (): boolean {
    return this.#draining
  }

  drain (): void {
    this.#draining = true
  }
}
