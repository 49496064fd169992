/**
 * webhooks: commit-to-receiver latency of webhook deliveries: one server on SQLite
 * (WEBHOOK_ALLOW_PRIVATE_NETWORKS=true), 3 subscriptions on receivers in the bench process, 100 PATCHes a second for
 * 20 s. `details`: changes, deliveries expected and received, p50, p99, max. Target: every delivery received and no
 * write failed (failed otherwise).
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Scenario, ScenarioResult } from '../scenario.js'
import { prepareStore, scenarioDir, startService } from '../servers.js'
import { Cleanup } from '../support.js'

export const webhooks: Scenario = {
  id: 'webhooks',
  title: 'Webhooks: commit-to-receiver latency at 100 changes/s, 3 subscriptions (SQLite)',
  target: null,
  run: webhookLatency
}

/**
 * 100 changes a second for WEBHOOKS.seconds through one server (SQLite), 3 subscriptions on local receivers: the time
 * from sending each PATCH (its commit comes after) to each receiver getting its event, matched by the request id the
 * event carries (the subscriptions belong to the writing key's quota). Events that arrive before their PATCH's answer
 * are matched once the answer is in.
 */
const WEBHOOKS = { rate: 100, seconds: 20, subscriptions: 3 }

async function webhookLatency (result: ScenarioResult): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { DATABASE_URL: join(dir, 'petstore.db'), WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }
    const key = await prepareStore(env, 100)
    const service = await startService('service', env, key, cleanup)
    const base = service.url.replace(/\/v1\/inventory$/, '')
    const acknowledged = new Map<string, number>()
    const arrivals: Array<[string, number]> = []
    let received = 0
    const receivers = await Promise.all(Array.from({ length: WEBHOOKS.subscriptions }, async () => {
      const server = createServer((request, response) => {
        const chunks: Buffer[] = []
        request.on('data', (chunk: Buffer) => chunks.push(chunk)).on('end', () => {
          const at = performance.now()
          received++
          const requestId = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data: { requestId: string | null } }).data.requestId
          if (requestId !== null) arrivals.push([requestId, at])
          response.writeHead(204).end()
        })
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      cleanup.defer(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
    }))
    const headers = { ...service.headers, 'content-type': 'application/json' }
    for (const url of receivers) {
      const res = await fetch(`${base}/v1/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url, events: ['inventory.changed'] }) })
      if (res.status !== 201) throw new Error(`createWebhook answered ${res.status}: ${await res.text()}`)
    }
    const total = WEBHOOKS.rate * WEBHOOKS.seconds
    let failed = 0
    const started = performance.now()
    const writes: Array<Promise<void>> = []
    for (let i = 0; i < total; i++) {
      const due = started + i * 1000 / WEBHOOKS.rate
      const wait = due - performance.now()
      if (wait > 0) await sleep(wait)
      const requestId = `bench-${i}`
      // From the moment the write is sent: the commit happens after it, so this bounds commit-to-receiver from above
      // (a delivery can even arrive before the write's own answer does).
      const sentAt = performance.now()
      writes.push(fetch(`${base}/v1/inventory/${i % 100 + 1}`, { method: 'PATCH', headers: { ...headers, 'x-request-id': requestId }, body: JSON.stringify({ quantity: i % 1000 }) })
        .then(async (res) => {
          await res.arrayBuffer()
          if (res.status === 200) acknowledged.set(requestId, sentAt)
          else failed++
        }, () => { failed++ }))
    }
    await Promise.all(writes)
    const deadline = performance.now() + 30_000
    while (received < acknowledged.size * WEBHOOKS.subscriptions && performance.now() < deadline) await sleep(50)
    const latencies = arrivals.flatMap(([requestId, at]) => {
      const sent = acknowledged.get(requestId)
      return sent === undefined ? [] : [at - sent]
    })
    const sorted = [...latencies].sort((a, b) => a - b)
    const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN
    const expected = acknowledged.size * WEBHOOKS.subscriptions
    result.details = { changes: acknowledged.size, failedWrites: failed, expectedDeliveries: expected, received, matched: latencies.length, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: sorted.at(-1) ?? NaN }
    result.notes.push(`${acknowledged.size} changes at ${WEBHOOKS.rate}/s, ${WEBHOOKS.subscriptions} subscriptions: ${received} of ${expected} deliveries received; ` +
      `commit-to-receiver p50 ${at(0.5).toFixed(1)} ms, p99 ${at(0.99).toFixed(1)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(1)} ms` +
      (failed > 0 ? `; ${failed} writes failed` : ''))
    if (received < expected || failed > 0) result.status = 'failed'
  })
}
