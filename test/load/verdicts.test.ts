/**
 * The load run's verdicts: the memory verdict follows the trend of the live heap, so the same behaviour gets the
 * same verdict whatever moment of the heap's saw-tooth a sample fell on.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { differences, judgeMemory, overLimit, type MemorySample } from './verdicts.js'

const MB = 1024 * 1024

/**
 * Samples every second of a run of `seconds`: a heap that grows between collections (a saw-tooth of `swingMb`)
 * and is collected every `gcEvery` seconds down to `live(t)` MB; RSS follows the heap.
 */
function run (seconds: number, live: (t: number) => number, options: { gcEvery?: number, swingMb?: number, phase?: number } = {}): MemorySample[] {
  const { gcEvery = 5, swingMb = 120, phase = 0 } = options
  const samples: MemorySample[] = []
  let majors = 0
  let afterGc = 0
  for (let t = 0; t <= seconds; t++) {
    const sinceGc = (t + phase) % gcEvery
    if (sinceGc === 0 && t + phase > 0) {
      majors++
      afterGc = live(t) * MB
    }
    samples.push({ at: t * 1000, heapAfterGc: afterGc, majors, rssMb: 60 + live(t) + swingMb * sinceGc / gcEvery })
  }
  return samples
}

describe('the memory verdict', () => {
  test('when the live heap is flat, then every phase of the saw-tooth gets the same verdict: flat', () => {
    for (let phase = 0; phase < 5; phase++) {
      const verdict = judgeMemory(run(60, () => 40 + (phase % 2), { phase }), 60_000)
      assert.equal(verdict.ok, true, verdict.text)
    }
  })

  test('when the live heap grows steadily, then it is growing, whatever the phase', () => {
    for (let phase = 0; phase < 5; phase++) {
      const verdict = judgeMemory(run(60, (t) => 40 + t, { phase }), 60_000)
      assert.equal(verdict.ok, false, verdict.text)
      assert.match(verdict.text, /GROWING/)
    }
  })

  test('when the heap grows only during the warm-up, then it is flat', () => {
    const verdict = judgeMemory(run(100, (t) => t < 15 ? 10 + 3 * t : 55), 100_000)
    assert.equal(verdict.ok, true, verdict.text)
  })

  test('when one collection leaves an outlier, then the medians keep the verdict', () => {
    const verdict = judgeMemory(run(60, (t) => t === 50 ? 200 : 40), 60_000)
    assert.equal(verdict.ok, true, verdict.text)
  })

  test('when too few major collections ran, then the RSS minima of each quarter decide', () => {
    const flat = judgeMemory(run(60, () => 40, { gcEvery: 40 }), 60_000)
    assert.match(flat.text, /RSS minimum per quarter/)
    assert.equal(flat.ok, true, flat.text)
    const growing = judgeMemory(run(60, (t) => 40 + 2 * t, { gcEvery: 40, swingMb: 0 }), 60_000)
    assert.equal(growing.ok, false, growing.text)
  })

  test('when there are too few samples, then it cannot judge, and says so', () => {
    const verdict = judgeMemory(run(2, () => 40), 60_000)
    assert.equal(verdict.ok, false)
    assert.match(verdict.text, /cannot judge/)
  })
})

describe('the limit check', () => {
  test('when a quota was admitted more than its limit in a window, then that window is named', () => {
    const windows = new Map([['a|minute|100', 60], ['a|minute|160', 61], ['a|day|86400', 121], ['b|minute|100', 1000]])
    const limits = new Map([['a', { perMinute: 60, perDay: 1000 }]])
    assert.deepEqual(overLimit(windows, limits), ['a minute: 61 > 60'])
  })
})

describe('stock comparison', () => {
  test('when two readings differ, then each differing pet is named with both values', () => {
    const a = new Map([[1, 5], [2, 7]])
    const b = new Map([[1, 5], [2, 8], [3, 0]])
    assert.deepEqual(differences(a, b, ['store', 'copy']), ['pet 2: store 7, copy 8', 'pet 3: store undefined, copy 0'])
  })
})
