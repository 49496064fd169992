/**
 * The load run's verdicts, kept apart from the traffic so that each is unit-tested: memory growth judged from a
 * trend (never from two snapshots), and no quota beyond its limit in any window.
 */

/** One reading of an instance during the run. */
export interface MemorySample {
  /** Milliseconds since the run began. */
  at: number
  /** petstore_heap_after_gc_bytes: the heap the last major collection left (0 before the first). */
  heapAfterGc: number
  /** Major collections so far (nodejs_gc_duration_seconds_count{kind="major"}). */
  majors: number
  rssMb: number
}

export interface Verdict {
  ok: boolean
  text: string
}

const MB = 1024 * 1024

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle] as number : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2
}

/** Least-squares slope of `y` over `x`. */
function slope (points: Array<[number, number]>): number {
  const n = points.length
  const mx = points.reduce((a, [x]) => a + x, 0) / n
  const my = points.reduce((a, [, y]) => a + y, 0) / n
  let num = 0
  let den = 0
  for (const [x, y] of points) {
    num += (x - mx) * (y - my)
    den += (x - mx) ** 2
  }
  return den === 0 ? 0 : num / den
}

/**
 * Whether an instance's memory grew during the run. The first `warmup` share of the run is left out (caches fill,
 * code is compiled). The heap after each major collection is the live heap: the run passes when the median of the
 * second half of those readings is within `allowance` of the first half's (a share, or a floor in MB, whichever is
 * larger). With fewer than four major collections after warm-up (a heap with so little to collect has not grown
 * much), the lowest RSS of each quarter of the run is compared the same way instead: a minimum over a window is
 * where the heap was just collected, not a moment in its saw-tooth.
 */
export function judgeMemory (samples: MemorySample[], runMs: number, options: { warmup?: number, share?: number, floorMb?: number } = {}): Verdict {
  const { warmup = 0.2, share = 0.25, floorMb = 16 } = options
  const from = runMs * warmup
  const measured = samples.filter((s) => s.at >= from && s.at <= runMs)
  if (measured.length < 4) return { ok: false, text: `only ${measured.length} memory samples in the run: cannot judge` }
  const allowance = (base: number): number => Math.max(base * share, floorMb)
  const points: Array<[number, number]> = []
  let majors = samples.filter((s) => s.at < from).at(-1)?.majors ?? 0
  for (const sample of measured) {
    if (sample.majors > majors && sample.heapAfterGc > 0) points.push([sample.at, sample.heapAfterGc / MB])
    majors = Math.max(majors, sample.majors)
  }
  if (points.length >= 4) {
    const half = points.length >> 1
    const first = median(points.slice(0, half).map(([, y]) => y))
    const last = median(points.slice(points.length - half).map(([, y]) => y))
    const ok = last - first <= allowance(first)
    const perMinute = slope(points) * 60_000
    return {
      ok,
      text: `heap after major GC (${points.length} collections): median ${first.toFixed(1)} MB in the first half, ${last.toFixed(1)} MB ` +
        `in the second (${perMinute >= 0 ? '+' : ''}${perMinute.toFixed(2)} MB/min), allowed +${allowance(first).toFixed(1)}: ${ok ? 'flat' : 'GROWING'}`
    }
  }
  const quarters = [0, 1, 2, 3].map((q) => {
    const start = from + (runMs - from) * q / 4
    const end = from + (runMs - from) * (q + 1) / 4
    const inside = measured.filter((s) => s.at >= start && s.at <= end).map((s) => s.rssMb)
    return inside.length === 0 ? Number.NaN : Math.min(...inside)
  })
  if (quarters.some(Number.isNaN)) return { ok: false, text: `a quarter of the run has no memory sample: cannot judge (${points.length} major collections)` }
  const [first, , , last] = quarters as [number, number, number, number]
  const ok = last - first <= allowance(first)
  return {
    ok,
    text: `only ${points.length} major collections after warm-up; RSS minimum per quarter ${quarters.map((q) => q.toFixed(0)).join('/')} MB, ` +
      `allowed +${allowance(first).toFixed(1)}: ${ok ? 'flat' : 'GROWING'}`
  }
}

/** Every window (`quota|minute|end` or `quota|day|end`) in which a quota was admitted more than its limit. */
export function overLimit (windows: Map<string, number>, limits: Map<string, { perMinute: number, perDay: number }>): string[] {
  const over: string[] = []
  for (const [id, admitted] of windows) {
    const [quota, window] = id.split('|') as [string, 'minute' | 'day']
    const limit = limits.get(quota)?.[window === 'minute' ? 'perMinute' : 'perDay']
    if (limit !== undefined && admitted > limit) over.push(`${quota} ${window}: ${admitted} > ${limit}`)
  }
  return over
}

/** Pets whose stock differs between two readings of it (`a` names the first, `b` the second). */
export function differences (a: Map<number, number>, b: Map<number, number>, names: [string, string]): string[] {
  const found: string[] = []
  for (const petId of new Set([...a.keys(), ...b.keys()])) {
    if (a.get(petId) !== b.get(petId)) found.push(`pet ${petId}: ${names[0]} ${a.get(petId)}, ${names[1]} ${b.get(petId)}`)
  }
  return found
}
