import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const MODULE = fileURLToPath(new URL('../src/tick-shape.ts', import.meta.url))

describe('tick shape', () => {
  test('when a full collection runs while no tick is pending, then later tick records keep the shape of the first', () => {
    // A process of its own: V8's intrinsics and gc() need flags, and the shapes must be this process's first ones.
    const script = `
      import { executionAsyncResource } from 'node:async_hooks'
      const { keepTickShape, keptTickRecord } = await import(${JSON.stringify(MODULE)})
      keepTickShape()
      const record = () => new Promise((resolve) => { process.nextTick(() => { resolve(executionAsyncResource()) }) })
      await record()
      const kept = keptTickRecord()
      if (kept === null) throw new Error('no tick record kept')
      // Between bursts no record is alive but the kept one: a full collection frees whatever only records held.
      globalThis.gc()
      globalThis.gc()
      await new Promise((resolve) => setTimeout(resolve, 5))
      const later = await record()
      const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)')
      const fast = new Function('a', 'return %HasFastProperties(a)')
      console.log(JSON.stringify({ sameMap: sameMap(kept, later), fast: fast(later), keys: Reflect.ownKeys(later).length }))
    `
    const child = spawnSync(process.execPath, ['--allow-natives-syntax', '--expose-gc', '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' })
    assert.equal(child.status, 0, child.stderr)
    const seen = JSON.parse(child.stdout.trim().split('\n').at(-1) as string) as { sameMap: boolean, fast: boolean, keys: number }
    // The same map: V8's memory of the record literal (one map per key) still matches, so nextTick stays optimized.
    assert.deepEqual({ sameMap: seen.sameMap, fast: seen.fast }, { sameMap: true, fast: true })
    assert.ok(seen.keys >= 4, `a tick record has its async ids, callback and args: ${seen.keys} keys`)
  })
})
