/**
 * floor-fastify, floor-fields, floor-gate: one scenario three ways (bench/peer/floor.js's modes), references for
 * what the framework alone costs, each against a bare ceiling of its own. Fastify 5 sending fixed bytes: bare; with
 * the response fields the service sends (request id, nosniff, no-store, the five rate-limit fields, ETag); and with
 * those fields plus the least gate a Fastify service can have (a synchronous onRequest hook: the bearer token found in
 * a Map, no hashing, two window counters, the rate-limit fields rendered from them; no store, strikes, bans or
 * logging).
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { LoadResult } from '../load.js'
import { describeRun, measure, side } from '../measure.js'
import { log, type Scenario, type ScenarioResult, type Target } from '../scenario.js'
import { installPeer, PEER_DIR, scenarioDir, startCeiling } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, memoryMb, startNode, stop, waitOutput } from '../support.js'

export const floorFastify: Scenario = {
  id: 'floor-fastify',
  title: 'Reference: Fastify 5 alone sending fixed bytes (no auth, limiter, store, extra fields)',
  target: null,
  run: (result) => floorScenario(result, 'fastify')
}

export const floorFields: Scenario = {
  id: 'floor-fields',
  title: 'Reference: Fastify 5 sending fixed bytes with the service\'s response fields',
  target: null,
  run: (result) => floorScenario(result, 'floor')
}

export const floorGate: Scenario = {
  id: 'floor-gate',
  title: 'Reference: the same with the least gate: a synchronous hook, a token Map, two window counters',
  target: null,
  run: (result) => floorScenario(result, 'gate')
}

/**
 * The framework floors (bench/peer/floor.js): Fastify 5 sending fixed bytes, bare or with the response fields the
 * service sends, alternating with a bare server sending the same bytes. References, no target.
 */
async function floorScenario (result: ScenarioResult, kind: 'floor' | 'fastify' | 'gate'): Promise<void> {
  await installPeer()
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const pets = Array.from({ length: 10 }, (_, i) => ({ petId: i + 1, quantity: i + 1, status: 'available' }))
    writeFileSync(join(dir, 'body.json'), JSON.stringify(pets))
    const key = 'psk_live_floorgatefloorgatefloorgate00'
    const mode = kind === 'fastify' ? ['bare'] : kind === 'gate' ? ['gate'] : []
    const proc = startNode([join(PEER_DIR, 'floor.js'), join(dir, 'body.json'), ...mode], { BENCH_KEY: key }, 'server')
    cleanup.defer(() => stop(proc))
    const port = await waitOutput(proc, /listening (\d+)/)
    const headers: Record<string, string> = kind === 'gate' ? { Authorization: `Bearer ${key}` } : {}
    const floor: Target = { name: kind, url: `http://127.0.0.1:${port}/v1/inventory`, headers, proc }
    const { target: ceiling, bytes } = await startCeiling(floor, dir, cleanup)
    await measure(ceiling, settings.warmup)
    await measure(floor, settings.warmup)
    const ceilingRuns: LoadResult[] = []
    const floorRuns: LoadResult[] = []
    for (let round = 1; round <= settings.rounds; round++) {
      const c = await measure(ceiling, settings.duration)
      const f = await measure(floor, settings.duration)
      ceilingRuns.push(c)
      floorRuns.push(f)
      log(`${result.id} round ${round}/${settings.rounds}: ceiling ${describeRun(c)}; ${kind} ${describeRun(f)}`)
    }
    result.ceiling = side(ceilingRuns)
    result.ceilingFrom = 'own'
    result.service = side(floorRuns)
    result.peakRssMb = memoryMb(proc.pid, 'VmHWM')
    result.notes.push(`${kind} answers ${bytes} bytes (10 entries); its ratio is its own to the ceiling`)
  })
}
