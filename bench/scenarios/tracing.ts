/**
 * tracing: what traces cost. GET (10 entries) and PATCH on a service that traces (every request unless
 * BENCH_TRACES_SAMPLER and _ARG say otherwise; exported over OTLP/HTTP, protobuf unless BENCH_TRACES_PROTOCOL says
 * http/json, to a collector that keeps nothing, bench/otlp-sink.js), side by side with the same service not tracing:
 * both at once on the server core, on BENCH_TRACING_STARTS fresh pairs of processes. The figures are requests per
 * CPU-second traced / not, GET's and PATCH's, the median of each start's median, as checks; the ratio column is the
 * side-by-side throughput ratio. `details`: spans exported, PATCH requests/s both ways. A reference (failed when no
 * span arrived). (Tracing off against the release before tracing existed is get-10 and patch, alternating builds.)
 */
import { join } from 'node:path'
import type { LoadResult, LoadSpec } from '../load.js'
import { describeRun, measure, side } from '../measure.js'
import { log, type Scenario, type ScenarioResult, type Target } from '../scenario.js'
import { prepareStore, scenarioDir, startService } from '../servers.js'
import { settings } from '../settings.js'
import { Cleanup, median, memoryMb, ROOT, startNode, stop, waitOutput } from '../support.js'

export const tracing: Scenario = {
  id: 'tracing',
  title: 'GET and PATCH, every request traced (OTLP/HTTP), against not traced',
  target: null,
  run: (result) => tracingScenario(result)
}

const PETS = 10

/** Requests per CPU-second of `on` over those of `off`: null when a server's CPU could not be read. */
function perCpuRatio (on: LoadResult, off: LoadResult): number | null {
  if (on.serverCpuPct === null || off.serverCpuPct === null || on.serverCpuPct === 0 || off.serverCpuPct === 0) return null
  return (on.rps / on.serverCpuPct) / (off.rps / off.serverCpuPct)
}

async function tracingScenario (result: ScenarioResult): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const sink = startNode([join(ROOT, 'bench/otlp-sink.js')], {}, 'load')
    cleanup.defer(() => stop(sink))
    const sinkUrl = `http://127.0.0.1:${await waitOutput(sink, /listening (\d+)/)}`
    const service = async (name: string, extra: Record<string, string>, scope: Cleanup): Promise<Target> => {
      const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(scenarioDir(`${result.id}-${name}`), 'petstore.db'), ...extra }
      return await startService(name, env, await prepareStore(env, PETS), scope)
    }
    const traced = {
      OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: settings.tracesProtocol,
      OTEL_TRACES_SAMPLER: settings.tracesSampler,
      ...(settings.tracesSamplerArg === '' ? {} : { OTEL_TRACES_SAMPLER_ARG: settings.tracesSamplerArg }),
      OTEL_SERVICE_NAME: 'petstore-bench'
    }
    const write = { patchPets: PETS }
    const runs: Record<'getOff' | 'getOn' | 'patchOff' | 'patchOn', LoadResult[]> = { getOff: [], getOn: [], patchOff: [], patchOn: [] }
    const perCpu: Record<'get' | 'patch', number[]> = { get: [], patch: [] }
    // Each start's median: one build and sampler read 0.6 in one start and 0.95 in the next (the traced process's
    // garbage collection differs between starts), while two untraced services agree within 0.03.
    const perStart: Record<'get' | 'patch', number[]> = { get: [], patch: [] }
    for (let start = 1; start <= settings.tracingStarts; start++) {
      await Cleanup.scope(async (scope) => {
        const off = await service('off', {}, scope)
        const on = await service('on', traced, scope)
        // Side by side: both services on the server core at once, each under its own generator on the load core. The
        // VM's speed drifts by half within seconds (docs/adr/0049-tracing-costs-compared-side-by-side.md); whatever it
        // is at a moment, both pay it, so what each answers per CPU-second it got compares the two builds' costs.
        const pair = async (seconds: number, extra: Partial<LoadSpec> = {}): Promise<[LoadResult, LoadResult]> =>
          await Promise.all([measure(off, seconds, extra), measure(on, seconds, extra)])
        await pair(settings.warmup)
        await pair(settings.warmup, write)
        const ratios: Record<'get' | 'patch', number[]> = { get: [], patch: [] }
        for (let round = 1; round <= settings.rounds; round++) {
          for (const [name, extra] of [['get', {}], ['patch', write]] as const) {
            const [offRun, onRun] = await pair(settings.duration, extra)
            runs[`${name}Off`].push(offRun)
            runs[`${name}On`].push(onRun)
            const ratio = perCpuRatio(onRun, offRun)
            if (ratio !== null) ratios[name].push(ratio)
            log(`${result.id} start ${start}/${settings.tracingStarts} round ${round}/${settings.rounds}: ${name.toUpperCase()} off ${describeRun(offRun)}; ` +
              `on ${describeRun(onRun)}; per CPU-second ${ratio === null ? '-' : ratio.toFixed(3)}`)
          }
        }
        for (const name of ['get', 'patch'] as const) {
          perCpu[name].push(...ratios[name])
          if (ratios[name].length > 0) perStart[name].push(median(ratios[name]))
        }
        const peak = memoryMb(on.proc.pid, 'VmHWM')
        if (peak !== null) result.peakRssMb = Math.max(result.peakRssMb ?? 0, peak)
      })
    }
    const spans = Number(await (await fetch(`${sinkUrl}/count`)).text())
    if (spans === 0) throw new Error('the traced service exported no span: tracing did not start')
    result.service = side(runs.getOn)
    result.ceiling = side(runs.getOff)
    result.ceilingFrom = 'not traced, side by side'
    // The median of the starts' medians: a start is one draw of the traced process's state, its rounds are not.
    const getRatio = perStart.get.length === 0 ? null : median(perStart.get)
    const patchRatio = perStart.patch.length === 0 ? null : median(perStart.patch)
    for (const [name, value, starts] of [['GET', getRatio, perStart.get], ['PATCH', patchRatio, perStart.patch]] as const) {
      result.checks.push({
        name: `${name} traced/not per CPU-second`,
        value,
        text: value === null ? '-' : `${value.toFixed(3)} (starts ${starts.map((r) => r.toFixed(2)).join(', ')})`,
        target: 'reference',
        met: null,
        flag: ''
      })
    }
    const patchOn = side(runs.patchOn)
    const patchOff = side(runs.patchOff)
    result.notes.push(`the ceiling column is the same service not tracing, loaded at the same time on the same core; sampler ${settings.tracesSampler} ${settings.tracesSamplerArg}, ${settings.tracesProtocol}; ${spans} spans exported; ` +
      `requests per CPU-second traced/not: GET ${getRatio === null ? '-' : getRatio.toFixed(3)}, PATCH ${patchRatio === null ? '-' : patchRatio.toFixed(3)}; ` +
      `PATCH traced ${Math.round(patchOn.rps)} rps (p99 ${patchOn.p99.toFixed(2)} ms), not traced ${Math.round(patchOff.rps)} rps (p99 ${patchOff.p99.toFixed(2)} ms)`)
    result.details = { sampler: `${settings.tracesSampler} ${settings.tracesSamplerArg}`.trim(), protocol: settings.tracesProtocol, spansExported: spans, getPerCpuRatio: getRatio, patchPerCpuRatio: patchRatio, getPerCpuRounds: perCpu.get, patchPerCpuRounds: perCpu.patch, getPerCpuStarts: perStart.get, patchPerCpuStarts: perStart.patch, patchTracedRps: patchOn.rps, patchNotTracedRps: patchOff.rps }
  })
}
