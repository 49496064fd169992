/**
 * The container image (Dockerfile) as an operator runs it: built on (stand-ins of) the official base images, the
 * embedded default with a /data volume, keys made with `docker exec`, data that outlives the container, a read-only
 * root filesystem without capabilities, the health check, and a stop that drains and exits 0.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { before, describe, test, type TestContext } from 'node:test'
import { freePort } from '../helpers/net.js'
import { baseImages, build, buildImage, docker, inspect, requireDocker, runContainer, uniqueName, volume, waitFor, waitForStatus } from './docker.js'

/** The images of the build-argument test (removed after it): never the tag a user builds. */
const TEST_RUNTIME_TAG = 'petstore-inventory:test-runtime'

/** Room for a slow machine: a container starts in about a second here. */
const START_MS = 30_000

interface Served { name: string, base: string, port: number }

/** Runs the image as `docker run -v VOLUME:/data IMAGE` with host networking on a free port, and waits until it is alive. */
async function serve (t: TestContext, image: string, data: string, extra: readonly string[] = [], args: readonly string[] = []): Promise<Served> {
  const port = await freePort()
  const name = await runContainer(t, uniqueName('image'), ['--env', `PORT=${port}`, '--volume', `${data}:/data`, ...extra, image, ...args])
  const base = `http://127.0.0.1:${port}`
  await waitForStatus(`${base}/healthz`, START_MS)
  return { name, base, port }
}

/** `docker exec NAME petstore ARGS`: the CLI in the running container, on its store. */
function petstore (name: string, ...args: string[]): Promise<string> {
  return docker(['exec', name, 'petstore', ...args])
}

function call (base: string, key: string, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${base}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } })
}

if (await requireDocker('the container image tests')) {
  describe('the container image', () => {
    let image = ''
    before(async () => { image = await buildImage() })

    test('when built on NODE_IMAGE alone, then it is below 250 MB, runs Node 24 as uid 1000 and carries neither npm (nor npx, corepack, yarn) nor a compiler', async () => {
      const [meta] = JSON.parse(await docker(['image', 'inspect', image])) as Array<{ Size: number, Config: { User: string, Entrypoint: string[], Cmd: string[] } }>
      assert.ok(meta !== undefined)
      assert.ok(meta.Size < 250_000_000, `the image is ${Math.round(meta.Size / 1e6)} MB`)
      assert.equal(meta.Config.User, '1000:1000')
      assert.deepEqual([meta.Config.Entrypoint, meta.Config.Cmd], [['petstore'], ['serve']])
      const probe = await docker(['run', '--rm', '--network', 'none', '--entrypoint', 'bash', image, '-c',
        'id -u; node --version; command -v npm npx corepack yarn gcc cc || echo none; find /usr/local -mindepth 2 ! -path /usr/local/bin/node ! -path /usr/local/bin/petstore'])
      const [uid, node, tools, ...local] = probe.trim().split('\n')
      assert.equal(uid, '1000')
      assert.match(node ?? '', /^v24\./)
      assert.equal(tools, 'none')
      assert.deepEqual(local, [], 'nothing under /usr/local but node and the petstore link')
    })

    test('when run with a /data volume, then /healthz answers, a key made with docker exec reads and writes the stock, and the health check passes', async (t) => {
      const data = await volume(t, 'data')
      // The image's HEALTHCHECK (petstore health), run every second instead of every ten.
      const { name, base } = await serve(t, image, data, ['--health-interval=1s', '--health-start-period=1s'])
      const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
      assert.deepEqual(await (await fetch(`${base}/healthz`)).json(), { status: 'ok', version })
      await petstore(name, 'import', '/app/data/demo.json')
      const key = (await petstore(name, 'keys', 'create', '--plan', 'pro', '--name', 'container')).trim()
      assert.match(key, /^psk_live_[0-9A-Za-z]{49}$/)
      // The start line names no address only the container reaches, and a command that works in it (no npx there).
      const logs = await docker(['logs', name])
      assert.match(logs, /API \/v1, reference \/docs, metrics \/metrics, on port \d+ of this container/)
      assert.match(logs, /Create a key in the container with: petstore keys create --plan free --name me \(docker exec CONTAINER/)

      const listed = await call(base, key, '/v1/inventory')
      assert.equal(listed.status, 200)
      assert.ok(((await listed.json()) as unknown[]).length > 0)
      const patched = await call(base, key, '/v1/inventory/1', { method: 'PATCH', body: '{"quantity": 41}' })
      assert.equal(patched.status, 200)
      assert.equal(((await patched.json()) as { quantity: number }).quantity, 41)
      assert.equal((await call(base, 'psk_live_wrong', '/v1/inventory')).status, 401)

      const health = await waitFor('the Docker health check to pass', START_MS, async () => {
        const status = (await inspect(name)).State.Health?.Status
        return status === 'healthy' ? status : undefined
      })
      assert.equal(health, 'healthy')
    })

    test('when the container is replaced by a new one on the same volume, then the stock and the keys are still there', async (t) => {
      const data = await volume(t, 'data')
      const first = await serve(t, image, data)
      await petstore(first.name, 'import', '/app/data/demo.json')
      const key = (await petstore(first.name, 'keys', 'create', '--plan', 'pro')).trim()
      assert.equal((await call(first.base, key, '/v1/inventory/1', { method: 'PATCH', body: '{"quantity": 77}' })).status, 200)
      await docker(['rm', '--force', first.name])

      const second = await serve(t, image, data)
      const res = await call(second.base, key, '/v1/inventory/1')
      assert.equal(res.status, 200)
      assert.equal(((await res.json()) as { quantity: number }).quantity, 77)
    })

    test('when run with a read-only root filesystem, no capabilities and no privilege escalation, then it serves and writes, and only /data is writable', async (t) => {
      const data = await volume(t, 'data')
      const { name, base } = await serve(t, image, data, ['--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges'], ['serve', '--seed-demo'])
      const key = (await petstore(name, 'keys', 'create', '--plan', 'pro')).trim()
      assert.equal((await call(base, key, '/v1/inventory/1', { method: 'PATCH', body: '{"quantity": 5}' })).status, 200)
      // Adjustments write the ledger and an idempotency record too.
      const adjusted = await call(base, key, '/v1/inventory/1/adjustments', { method: 'POST', body: '{"delta": 2}', headers: { 'idempotency-key': 'ro-1' } })
      assert.equal(adjusted.status, 200)
      assert.equal(((await adjusted.json()) as { quantity: number }).quantity, 7)

      const writable = await docker(['exec', name, 'bash', '-c',
        'for d in /app /tmp /etc /data; do if touch "$d/.probe" 2>/dev/null; then echo "$d writable"; rm -f "$d/.probe"; else echo "$d read-only"; fi; done; grep ^Uid /proc/1/status'])
      assert.deepEqual(writable.trim().split('\n').slice(0, 4), ['/app read-only', '/tmp read-only', '/etc read-only', '/data writable'])
      assert.match(writable, /^Uid:\s+1000\s+1000\s+1000\s+1000$/m, 'the server (PID 1) runs as uid 1000')
    })

    test('when RUNTIME_IMAGE names a base of the same Debian release, then the runtime is built on it; of another release, the build stops naming both', async () => {
      const bases = await baseImages()
      const tag = `${TEST_RUNTIME_TAG}-${process.pid}`
      const onDebian = await build(tag, { NODE_IMAGE: bases.NODE_IMAGE, RUNTIME_IMAGE: bases.RUNTIME_IMAGE })
      try {
        assert.equal(onDebian.code, 0, onDebian.stderr)
        const probe = await docker(['run', '--rm', '--network', 'none', '--entrypoint', 'bash', tag, '-c', 'node --version; command -v npm || echo none'])
        assert.match(probe, /^v24\.[\s\S]*\nnone\n$/)
      } finally {
        await docker(['image', 'rm', '--force', tag]).catch(() => {})
      }
      // The same Debian saying it is another release: what a base of the next release looks like to the check.
      const other = `${TEST_RUNTIME_TAG}-other-release-${process.pid}`
      await docker(['build', '--network', 'host', '--tag', other, '-'], {
        input: `FROM ${bases.RUNTIME_IMAGE}\nRUN sed --in-place --follow-symlinks 's/bookworm/trixie/g' /etc/os-release\n`
      })
      try {
        const refused = await build(`${tag}-refused`, { NODE_IMAGE: bases.NODE_IMAGE, RUNTIME_IMAGE: other })
        assert.notEqual(refused.code, 0)
        // BuildKit reports the failing step's output on stderr; the legacy builder (Debian's docker.io without buildx)
        // prints it on stdout and says only "returned a non-zero code" on stderr.
        assert.match(refused.stdout + refused.stderr, /RUNTIME_IMAGE is Debian trixie and NODE_IMAGE Debian bookworm: node links against its Debian's C library/)
      } finally {
        await docker(['image', 'rm', '--force', other]).catch(() => {})
      }
    })

    test('when sent SIGTERM, then /readyz answers 503 at once while requests are served, and the process exits 0 within 10 s', async (t) => {
      const data = await volume(t, 'data')
      const { name, base } = await serve(t, image, data, [], ['serve', '--seed-demo'])
      const key = (await petstore(name, 'keys', 'create', '--plan', 'pro')).trim()
      assert.equal((await fetch(`${base}/readyz`)).status, 200)

      const stoppedAt = Date.now()
      await docker(['kill', '--signal', 'TERM', name])
      await waitForStatus(`${base}/readyz`, 5000, 503)
      assert.equal((await call(base, key, '/v1/inventory')).status, 200, 'requests are still served during the drain')
      const exitCode = Number((await docker(['wait', name], { timeoutMs: 15_000 })).trim())
      const stoppedAfter = Date.now() - stoppedAt
      assert.equal(exitCode, 0)
      assert.ok(stoppedAfter < 10_000, `stopped ${stoppedAfter} ms after SIGTERM`)
      assert.match(await docker(['logs', name]), /draining[\s\S]*drained: closing the listener/)
    })
  })
}
