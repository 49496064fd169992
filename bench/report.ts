/**
 * The report: a scenario's ratio and flags (finish), the table printed at the end, and the JSON summary written
 * to bench/results/latest.json.
 */
import { cpus, platform, release, totalmem } from 'node:os'
import { fmtMb, pct, type ScenarioResult, type Side } from './scenario.js'
import { settings } from './settings.js'
import { PINNING } from './support.js'

/** The ratio to the ceiling and the flags: errors, non-2xx answers, and a ratio below target. */
export function finish (result: ScenarioResult): ScenarioResult {
  const { service, ceiling } = result
  if (service !== null && ceiling !== null) result.ratio = service.rps / ceiling.rps
  if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.non2xx + ceiling.errors > 0) result.flags.push('ceiling errors')
  if (service !== null && service.non2xx > 0) result.flags.push(`non-2xx: ${service.non2xx}`)
  if (service !== null && service.errors > 0) result.flags.push(`connection errors: ${service.errors}`)
  // A run that completed nothing measured nothing, however clean its status counts look.
  if (service !== null && service.runs.some((r) => r.requests === 0)) result.flags.push('a run completed no request')
  if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.runs.some((r) => r.requests === 0)) result.flags.push('a ceiling run completed no request')
  // A saturated load generator facing an idle bare server measured the generator: the ratio says nothing.
  if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.loadCpuPct >= 90 && (ceiling.serverCpuPct ?? 100) < 80) {
    result.flags.push('LOAD GENERATOR BOUND')
  } else if (ceiling !== null && result.ceilingFrom === 'own' && ceiling.loadCpuPct >= 90 && (ceiling.serverCpuPct ?? 100) < 95) {
    result.notes.push(`the ceiling is partly load-generator bound (bare server ${Math.round(ceiling.serverCpuPct ?? 0)}% CPU, ` +
      `${settings.loadGenerator} ${Math.round(ceiling.loadCpuPct)}%): the ratio is an upper bound`)
  }
  if (result.ratio !== null && result.target !== null && result.ratio < result.target) result.flags.push('BELOW TARGET')
  for (const check of result.checks) if (check.met === false) result.flags.push(check.flag)
  return result
}

export function table (results: ScenarioResult[]): string {
  const header = ['scenario', 'rps', 'p50 ms', 'p99 ms', 'ceiling rps', 'ratio', 'target', 'other targets', 'peak RSS MB', 'non-2xx+err', 'status']
  const rows = results.map((r) => [
    r.id,
    r.service === null ? '-' : String(Math.round(r.service.rps)),
    r.service === null ? '-' : r.service.p50.toFixed(2),
    r.service === null ? '-' : r.service.p99.toFixed(2),
    r.ceiling === null ? '-' : `${Math.round(r.ceiling.rps)}${r.ceilingFrom === 'own' ? '' : ` (${r.ceilingFrom})`}`,
    r.ratio === null ? '-' : r.ratio.toFixed(3),
    r.target === null ? '-' : `>= ${r.target}`,
    r.checks.length === 0 ? '-' : r.checks.map((c) => `${c.name} ${c.text} (target ${c.target})`).join('; '),
    fmtMb(r.peakRssMb),
    r.service === null ? '-' : String(r.service.non2xx + r.service.errors),
    r.status !== 'ok' ? r.status.toUpperCase() : r.flags.length === 0 ? 'ok' : r.flags.join(', ')
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)))
  // Left-aligned: the scenario, the other targets (text) and the status; the numbers are right-aligned.
  const left = new Set([0, header.indexOf('other targets'), header.length - 1])
  const line = (cells: string[]): string => cells.map((c, i) => left.has(i) ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number)).join('  ').trimEnd()
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)]
  for (const r of results) {
    for (const note of r.notes) out.push(`  ${r.id}: ${note}`)
    if (r.service !== null) out.push(`  ${r.id}: server CPU ${pct(r.service.serverCpuPct)}, load generator CPU ${pct(r.service.loadCpuPct)}`)
    if (r.ceiling !== null && r.ceilingFrom === 'own') {
      out.push(`  ${r.id}: ceiling p50 ${r.ceiling.p50.toFixed(2)} ms, p99 ${r.ceiling.p99.toFixed(2)} ms, non-2xx ${r.ceiling.non2xx + r.ceiling.errors}, ` +
        `bare server CPU ${pct(r.ceiling.serverCpuPct)}, load generator CPU ${pct(r.ceiling.loadCpuPct)}`)
    }
  }
  return out.join('\n')
}

export function summary (results: ScenarioResult[], startedAt: Date): unknown {
  const cpu = cpus()
  const stats = (s: Side | null) => s === null
    ? null
    : { rps: s.rps, p50: s.p50, p99: s.p99, non2xx: s.non2xx, errors: s.errors, serverCpuPct: s.serverCpuPct, loadCpuPct: s.loadCpuPct }
  return {
    machine: {
      cpu: cpu[0]?.model ?? 'unknown',
      cpus: cpu.length,
      totalMemoryMb: Math.round(totalmem() / 1024 / 1024),
      node: process.version,
      os: platform(),
      kernel: release()
    },
    date: startedAt.toISOString(),
    settings: { ...settings, pinned: PINNING !== null },
    scenarios: results.map((r) => ({
      id: r.id,
      title: r.title,
      status: r.status,
      ...(stats(r.service) ?? { rps: null, p50: null, p99: null, non2xx: null, errors: null }),
      ratio: r.ratio,
      target: r.target,
      peakRssMb: r.peakRssMb,
      flags: r.flags,
      checks: r.checks.map(({ name, value, target, met }) => ({ name, value, target, met })),
      ...(r.details === undefined ? {} : { details: r.details }),
      ceiling: stats(r.ceiling),
      ceilingFrom: r.ceilingFrom,
      ...(r.memory === undefined ? {} : { memory: r.memory }),
      ...(r.instancesPeakRssMb === undefined ? {} : { instancesPeakRssMb: r.instancesPeakRssMb }),
      notes: r.notes,
      runs: r.service?.runs.map(({ rps, p50, p99, non2xx, errors, statusCodes }) => ({ rps, p50, p99, non2xx, errors, statusCodes })) ?? [],
      ceilingRuns: r.ceilingFrom === 'own' ? r.ceiling?.runs.map(({ rps, p50, p99, non2xx, errors }) => ({ rps, p50, p99, non2xx, errors })) ?? [] : []
    }))
  }
}
