/**
 * Which AsyncLocalStorage the SDK's context manager sits on (src/tracing/node-context.ts): on Node 22 the async-hooks
 * one unless the process has --experimental-async-context-frame, on Node 24 and later always the frame one. Asked
 * of child processes of this Node, started as an operator would start them.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, test } from 'node:test'

const MODULE = fileURLToPath(new URL('../../src/tracing/node-context.ts', import.meta.url))
const MAJOR = Number(process.versions.node.split('.')[0])

/** contextOnAsyncHooks() in a fresh process of this Node, with NODE_OPTIONS as given. */
function onAsyncHooks (nodeOptions: string): boolean {
  const script = `import('${MODULE}').then((m) => process.stdout.write(String(m.contextOnAsyncHooks())))`
  const out = execFileSync(process.execPath, ['--import', 'tsx', '-e', script], { env: { ...process.env, NODE_OPTIONS: nodeOptions }, encoding: 'utf8' })
  return out.trim() === 'true'
}

describe('the context under the tracing SDK', () => {
  test('when Node 22 runs without the frame flag, then it is async hooks; with it, the frame', { skip: MAJOR !== 22 && 'Node 22 only' }, () => {
    assert.equal(onAsyncHooks(''), true)
    assert.equal(onAsyncHooks('--experimental-async-context-frame'), false)
  })

  test('when Node 24 or later runs, then it is the frame, with no flag', { skip: MAJOR < 24 && 'Node 24 and later' }, () => {
    assert.equal(onAsyncHooks(''), false)
  })
})
