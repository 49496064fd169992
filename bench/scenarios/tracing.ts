/**
 * tracing: what traces cost. GET (10 entries) and PATCH on a service that traces (every request unless
 * BENCH_TRACES_SAMPLER and _ARG say otherwise; exported over OTLP/HTTP to a collector that keeps nothing,
 * bench/otlp-sink.js), alternating with the same service not tracing, in the same rounds. The ratio is traced / not
 * traced for GET; PATCH's is a check beside it. `details`: spans exported, PATCH requests/s both ways. A reference
 * (failed when no span arrived). (Tracing off against the release before tracing existed is get-10 and patch,
 * alternating builds.)
 */
import { join } from 'node:path'
import type { LoadResult } from '../load.js'
import { describeRun, measure, side } from '../measure.js'
import { log, type Scenario, type ScenarioResult, type Target } from '../scenario.js'
import { prepareStore, scenarioDir, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, memoryMb, ROOT, startNode, stop, waitOutput } from '../support.js'

export const tracing: Scenario = {
  id: 'tracing',
  title: 'GET and PATCH, every request traced (OTLP/HTTP), against not traced',
  target: null,
  run: (result) => tracingScenario(result)
}

const PETS = 10

async function tracingScenario (result: ScenarioResult): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const sink = startNode([join(ROOT, 'bench/otlp-sink.js')], {}, 'load')
    cleanup.defer(() => stop(sink))
    const sinkUrl = `http://127.0.0.1:${await waitOutput(sink, /listening (\d+)/)}`
    const service = async (name: string, extra: Record<string, string>): Promise<Target> => {
      const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(scenarioDir(`${result.id}-${name}`), 'petstore.db'), ...extra }
      return await startService(name, env, await prepareStore(env, PETS), cleanup)
    }
    const off = await service('off', {})
    const on = await service('on', {
      OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: settings.tracesSampler,
      ...(settings.tracesSamplerArg === '' ? {} : { OTEL_TRACES_SAMPLER_ARG: settings.tracesSamplerArg }),
      OTEL_SERVICE_NAME: 'petstore-bench'
    })
    const write = { patchPets: PETS }
    for (const target of [off, on]) {
      await measure(target, settings.warmup)
      await measure(target, settings.warmup, write)
    }
    const runs: Record<'getOff' | 'getOn' | 'patchOff' | 'patchOn', LoadResult[]> = { getOff: [], getOn: [], patchOff: [], patchOn: [] }
    for (let round = 1; round <= settings.rounds; round++) {
      runs.getOff.push(await measure(off, settings.duration))
      runs.getOn.push(await measure(on, settings.duration))
      runs.patchOff.push(await measure(off, settings.duration, write))
      runs.patchOn.push(await measure(on, settings.duration, write))
      log(`${result.id} round ${round}/${settings.rounds}: GET off ${describeRun(runs.getOff.at(-1) as LoadResult)}; GET on ${describeRun(runs.getOn.at(-1) as LoadResult)}`)
      log(`${result.id} round ${round}/${settings.rounds}: PATCH off ${describeRun(runs.patchOff.at(-1) as LoadResult)}; PATCH on ${describeRun(runs.patchOn.at(-1) as LoadResult)}`)
    }
    const spans = Number(await (await fetch(`${sinkUrl}/count`)).text())
    if (spans === 0) throw new Error('the traced service exported no span: tracing did not start')
    result.service = side(runs.getOn)
    result.ceiling = side(runs.getOff)
    result.ceilingFrom = 'not traced'
    result.peakRssMb = memoryMb(on.proc.pid, 'VmHWM')
    const patchOn = side(runs.patchOn)
    const patchOff = side(runs.patchOff)
    const patchRatio = patchOff.rps > 0 ? patchOn.rps / patchOff.rps : null
    result.checks.push({
      name: 'PATCH traced/not',
      value: patchRatio,
      text: patchRatio === null ? '-' : patchRatio.toFixed(3),
      target: 'reference',
      met: null,
      flag: ''
    })
    result.notes.push(`the ceiling column is the same service not tracing; sampler ${settings.tracesSampler} ${settings.tracesSamplerArg}; ${spans} spans exported; ` +
      `PATCH traced ${Math.round(patchOn.rps)} rps (p99 ${patchOn.p99.toFixed(2)} ms), not traced ${Math.round(patchOff.rps)} rps ` +
      `(p99 ${patchOff.p99.toFixed(2)} ms): ${patchRatio === null ? '-' : patchRatio.toFixed(3)}`)
    result.details = { sampler: `${settings.tracesSampler} ${settings.tracesSamplerArg}`.trim(), spansExported: spans, patchTracedRps: patchOn.rps, patchNotTracedRps: patchOff.rps, patchRatio }
  })
}
