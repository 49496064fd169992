/**
 * get-10: GET /v1/inventory on 10 entries (SQLite, the in-process limiter) against the bare ceiling, alternating;
 * with the peer in the same rounds when the peer scenario is wanted too. Its ceiling is the reference of patch,
 * get-10-redis and get-10-pg-2x. Target: service / ceiling >= 0.75.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { LoadResult } from '../load.js'
import { describeRun, measure, side } from '../measure.js'
import { log, type PeerRounds, type Scenario, type ScenarioResult, type Target } from '../scenario.js'
import { prepareStore, scenarioDir, startCeiling, startPeer, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, memoryMb } from '../support.js'

export const get10: Scenario = {
  id: 'get-10',
  title: 'GET /v1/inventory, 10 entries',
  target: 0.75,
  run: async (result, context) => { context.peerRounds = await getVsCeiling(result, 10, context.wanted('peer')) }
}

/**
 * get-10 and get-10k: GET /v1/inventory on `pets` entries, alternating with the bare server. With `withPeer`, the
 * peer runs in the same rounds (ceiling, service, peer) on the same ten entries, and its runs are returned; a peer
 * that cannot start is reported in the result's `error`, and the service and ceiling are measured regardless.
 */
export async function getVsCeiling (result: ScenarioResult, pets: number, withPeer = false): Promise<PeerRounds | null> {
  return await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const service = await startService('service', env, await prepareStore(env, pets), cleanup)
    const { target: ceiling, bytes, bodyFile, contentType } = await startCeiling(service, dir, cleanup)
    result.notes.push(`response ${bytes} bytes`)
    let peer: Target | null = null
    let peerError: Error | null = null
    let sameBytes = false
    if (withPeer) {
      try {
        peer = await startPeer(dir, bodyFile, cleanup)
        const answer = await fetch(peer.url, { headers: peer.headers })
        const body = Buffer.from(await answer.arrayBuffer())
        if (answer.status !== 200) throw new Error(`the peer answered ${answer.status}: ${body.toString().slice(0, 200)}`)
        sameBytes = body.equals(readFileSync(bodyFile)) && answer.headers.get('content-type') === contentType
      } catch (error) {
        peerError = error as Error
        peer = null
        log(`${result.id}: the peer is not measured: ${peerError.message}`)
      }
    }
    await measure(ceiling, settings.warmup)
    await measure(service, settings.warmup)
    if (peer !== null) await measure(peer, settings.warmup)
    const ceilingRuns: LoadResult[] = []
    const serviceRuns: LoadResult[] = []
    const peerRuns: LoadResult[] = []
    for (let round = 1; round <= settings.rounds; round++) {
      const c = await measure(ceiling, settings.duration)
      const s = await measure(service, settings.duration)
      const p = peer === null ? null : await measure(peer, settings.duration)
      ceilingRuns.push(c)
      serviceRuns.push(s)
      if (p !== null) peerRuns.push(p)
      log(`${result.id} round ${round}/${settings.rounds}: ceiling ${describeRun(c)}; service ${describeRun(s)}${p === null ? '' : `; peer ${describeRun(p)}`}`)
    }
    result.ceiling = side(ceilingRuns)
    result.ceilingFrom = 'own'
    result.service = side(serviceRuns)
    result.peakRssMb = memoryMb(service.proc.pid, 'VmHWM')
    if (peer !== null) result.notes.push('the peer ran in the same rounds, after the service (see peer)')
    if (!withPeer) return null
    return {
      peer: peer === null ? null : side(peerRuns),
      service: result.service,
      ceiling: result.ceiling,
      peakRssMb: peer === null ? null : memoryMb(peer.proc.pid, 'VmHWM'),
      sameBytes,
      error: peerError
    }
  })
}
