/**
 * The webhook receiver of docs/webhooks.md, run as written: taken from the page, started as its own process,
 * subscribed to a running server, it verifies a real delivery and prints it.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, test } from 'node:test'
import { cliFor, freePort, startServe } from './run.js'
import { waitFor as waitUntil } from '../helpers/wait.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The page's receiver: the js block that starts with `// receiver.mjs`. */
function documentedReceiver (): string {
  const page = readFileSync(join(ROOT, 'docs/webhooks.md'), 'utf8')
  const block = /```js\n(\/\/ receiver\.mjs[\s\S]*?)```/.exec(page)?.[1]
  assert.ok(block !== undefined, 'docs/webhooks.md shows the receiver')
  return block
}

describe('the webhook receiver of docs/webhooks.md', () => {
  test('when run as written and subscribed, then it verifies a delivery and prints the change', async (t) => {
    // Inside the project, so that the example's import of standardwebhooks resolves to the project's own.
    const dir = mkdtempSync(join(ROOT, '.docs-example-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const file = join(dir, 'receiver.mjs')
    writeFileSync(file, documentedReceiver())

    const cli = cliFor(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '20' })
    const pets = [{ id: 1, name: 'Rex', status: 'available', quantity: 3 }]
    assert.equal((await cli.run(['import', cli.file('pets.json', JSON.stringify({ pets }))])).code, 0)
    const { key } = JSON.parse((await cli.run(['keys', 'create', '--plan', 'pro', '--json'])).stdout) as { key: string }
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const { base } = await startServe(cli)
    const port = await freePort()
    const subscribed = await fetch(`${base}/v1/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: `http://127.0.0.1:${port}/`, events: ['inventory.changed'] }) })
    const { secret } = await subscribed.json() as { secret: string }

    const child = spawn(process.execPath, [file], { env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: secret, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] })
    t.after(() => { child.kill('SIGKILL') })
    let output = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    // Until the receiver listens, attempts fail and are retried (5 s later by default): start it before the change.
    await waitFor(async () => await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' }).then((r) => r.status === 400, () => false))

    assert.equal((await fetch(`${base}/v1/inventory/1`, { method: 'PATCH', headers, body: '{"quantity":2}' })).status, 200)
    await waitFor(async () => /^evt_[0-9a-f]{16}_\d+ 1 2$/m.test(output))
  })
})

async function waitFor (condition: () => Promise<boolean>): Promise<void> {
  await waitUntil('condition', condition, { intervalMs: 50 })
}
