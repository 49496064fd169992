/**
 * Checks that bench/open-loop.ts is an open loop that corrects for coordinated omission: the bare server (on the
 * server core) is stopped with SIGSTOP for STALL seconds in the middle of a run at RATE requests/s, and what the
 * generator measured is set against what an open loop must measure. While the server is stopped the schedule goes
 * on: about RATE x STALL requests are sent (in flight at once: `maxInFlight`) and each waits from its due time until
 * the server resumes, so their latencies spread evenly from 0 to STALL and the share of all requests slower than x
 * ms is (STALL - x) / SECONDS: p99 about STALL - 0.01 x SECONDS. A closed loop would have at most its connections'
 * requests (50) in flight while the server is stopped.
 *
 *   node --import tsx bench/open-loop-check.ts [RATE [SECONDS [STALL]]]      defaults 2000 10 1
 */
import { writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { OpenLoopResult, OpenLoopSpec } from './open-loop.js'
import { BARE } from './servers.js'
import { ROOT, runNode, startNode, stop, waitOutput } from './support.js'

const [rate, seconds, stall] = [Number(process.argv[2] ?? 2000), Number(process.argv[3] ?? 10), Number(process.argv[4] ?? 1)]
const WARMUP = 2
const body = join(tmpdir(), `open-loop-check-${process.pid}.json`)
writeFileSync(body, '{"inventory":[]}')
const bare = startNode([BARE, body, 'application/json'], {}, 'server')
try {
  const origin = `http://127.0.0.1:${await waitOutput(bare, /listening (\d+)/)}`
  /** Stops the bare server for `stall` s, `at` s from now. */
  const pause = async (at: number): Promise<void> => {
    await sleep(at * 1000)
    bare.child.kill('SIGSTOP')
    await sleep(stall * 1000)
    bare.child.kill('SIGCONT')
  }
  const spec: OpenLoopSpec = { origins: [origin], rate, warmup: WARMUP, duration: seconds, maxConnections: 50, timeoutMs: 10_000 }
  // The generator takes about half a second to start (tsx): the stall lands in the middle of the measured window.
  const [stdout] = await Promise.all([
    runNode(['--import', 'tsx', join(ROOT, 'bench/open-loop.ts'), JSON.stringify(spec)], {}, 'load'),
    pause(0.5 + WARMUP + seconds / 2 - stall / 2)
  ])
  const r = JSON.parse(stdout.trim().split('\n').pop() ?? '') as OpenLoopResult
  const expectedP99 = Math.max(0, stall - 0.01 * seconds) * 1000
  console.log(`open loop at ${rate}/s for ${seconds} s, server stopped ${stall} s in the middle:`)
  console.log(`  sent ${Math.round(r.sentRate)}/s, answered ${Math.round(r.answeredRate)}/s, in flight at most ${r.maxInFlight} (an open loop: about ${rate * stall}), ` +
    `${r.queuedForConnection} requests waited for one of ${spec.maxConnections} connections`)
  console.log(`  latency from due time: p50 ${r.latency.p50} ms, p90 ${r.latency.p90} ms, p99 ${r.latency.p99} ms (expected about ${expectedP99}), max ${r.latency.max} ms`)
  console.log(`  generator lag: p50 ${r.lag.p50} ms, p99 ${r.lag.p99} ms, max ${r.lag.max} ms${r.behind ? `; BEHIND: ${r.behindReasons.join('; ')}` : ''}`)
  console.log(`  generator CPU ${r.loadCpuPct.toFixed(1)} % of a core, waiting for a CPU ${r.runQueueMsPerS === null ? '-' : r.runQueueMsPerS.toFixed(0)} ms/s; ` +
    `${r.connectionsOpened} connections opened, ${r.errors} failed requests, ${r.unfinished} unfinished`)
} finally {
  await stop(bare)
}
