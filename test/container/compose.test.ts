/**
 * compose.yaml as an operator runs it: `docker compose up` migrates once before any instance starts, the instances
 * behind the shipped HAProxy configuration share one rate limit exactly, and restarting every instance in turn loses
 * no request and applies no write twice.
 *
 * What is the operator's and what stands in, because the test machines reach no registry and give containers only
 * the host's network:
 * - compose.yaml is run by Docker Compose itself, with an override file that only changes what the machine forces:
 *   host networking, the test image, the local PostgreSQL database and Redis prefix of this test, and a free port.
 *   The `postgres` and `redis` services become placeholders that wait for the machine's own servers (their health
 *   checks open a TCP connection), so that `depends_on` and its conditions run as written.
 * - Host networking puts every instance on one port space, so Compose cannot scale `api`: the second and third
 *   instances run the same merged service definition (`docker compose config`) with `docker run`, on other ports.
 * - HAProxy is Debian bookworm's package (2.6) on the stand-in Debian image, not the haproxy:3.0 image; its
 *   configuration is the shipped deploy/compose/haproxy.cfg, with Docker's DNS replaced by the three addresses and the
 *   port by a free one. The shipped file itself is checked with `haproxy -c`.
 */
import assert from 'node:assert/strict'
import { randomUUID } from 'node:crypto'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { parse, stringify } from 'yaml'
import { cleanRedis, REDIS_URL, requireRedis } from '../ratelimit/redis-env.js'
import { awayFromMinuteBoundary } from '../helpers/clock.js'
import { freePort } from '../helpers/net.js'
import { adminQuery, POSTGRES_URL, requirePostgres } from '../helpers/postgres.js'
import { baseImages, buildImage, command, docker, inspect, ROOT, uniqueName, waitForStatus, requireDocker, type RunResult } from './docker.js'

const METRICS_TOKEN = 'compose-test-metrics-token'
/** HAProxy checks /readyz every second and needs two passes (rise 2) before sending to an instance. */
const BALANCER_RISE_MS = 3_000

/** `docker compose` where the plugin is installed, else Debian's `docker-compose` (v1). */
async function composeCommand (): Promise<string[]> {
  if ((await command('docker', ['compose', 'version'], { timeoutMs: 20_000 }).catch(() => null))?.code === 0) return ['docker', 'compose']
  return ['docker-compose']
}

/** The HAProxy stand-in: Debian's package on the stand-in Debian image, built once and then reused by tag. */
async function haproxyImage (debian: string): Promise<string> {
  const tag = 'petstore-stand-in/haproxy:bookworm'
  if ((await command('docker', ['image', 'inspect', tag])).code === 0) return tag
  const dockerfile = [
    `FROM ${debian}`,
    'RUN apt-get update && apt-get install -y --no-install-recommends haproxy && rm -rf /var/lib/apt/lists/*',
    'USER haproxy',
    'CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]'
  ].join('\n')
  await docker(['build', '--network', 'host', '--tag', tag, '-'], { input: dockerfile, timeoutMs: 10 * 60_000 })
  return tag
}

/** The shipped balancer configuration with Docker's DNS replaced by fixed servers and the port by `port`. */
function balancerConfig (shipped: string, port: number, servers: readonly number[]): string {
  const lines = shipped.replace(/^resolvers docker\n(?:[ \t]+.*\n)*/m, '').split('\n')
  const out: string[] = []
  for (const line of lines) {
    if (/^\s*bind :8080\s*$/.test(line)) out.push(`  bind 127.0.0.1:${port}`)
    else if (/^\s*default-server /.test(line)) out.push(line.replace(/ resolvers docker/, '').replace(/ init-addr none/, ''))
    else if (/^\s*server-template /.test(line)) out.push(...servers.map((p, i) => `  server api${i + 1} 127.0.0.1:${p}`))
    else out.push(line)
  }
  const text = out.join('\n')
  assert.ok(!/resolvers|server-template|:8080/.test(text), `the test's balancer configuration still names Docker's network:\n${text}`)
  return text
}

interface Instance { name: string, port: number }

const ready = (await requireDocker('the compose.yaml tests')) && (await requirePostgres('the compose.yaml tests')) &&
  (await requireRedis('the compose.yaml tests'))

if (ready) {
  describe('compose.yaml', () => {
    const project = `petstore-test-${randomUUID().slice(0, 8)}`
    const dir = mkdtempSync(join(tmpdir(), 'petstore-compose-'))
    const database = `petstore_test_${randomUUID().replaceAll('-', '').slice(0, 12)}`
    const redisPrefix = `test:${randomUUID()}:`
    const extras: string[] = []
    let compose: string[] = []
    let instances: Instance[] = []
    let balancer = ''
    let lb = ''

    const composeArgs = (...args: string[]): string[] =>
      [...compose.slice(1), '--project-name', project, '--file', join(ROOT, 'compose.yaml'), '--file', join(dir, 'override.yaml'), ...args]
    const runCompose = (...args: string[]): Promise<RunResult> =>
      command(compose[0] as string, composeArgs(...args), { timeoutMs: 5 * 60_000 })
    const containerOf = async (service: string): Promise<string> => (await runCompose('ps', '--all', '-q', service)).stdout.trim() ||
      (await runCompose('ps', '-q', service)).stdout.trim()
    const petstore = async (...args: string[]): Promise<string> => {
      const res = await runCompose('exec', '-T', 'api', 'petstore', ...args)
      assert.equal(res.code, 0, `petstore ${args.join(' ')}: ${res.stderr}`)
      return res.stdout.trim()
    }

    before(async () => {
      compose = await composeCommand()
      const [image, bases] = await Promise.all([buildImage(), baseImages()])
      const haproxy = await haproxyImage(bases.RUNTIME_IMAGE)
      await adminQuery(`CREATE DATABASE ${database}`)
      const databaseUrl = new URL(POSTGRES_URL)
      databaseUrl.pathname = `/${database}`
      const ports = [await freePort(), await freePort(), await freePort()]
      const placeholder = (port: number) => ({
        image: bases.RUNTIME_IMAGE,
        network_mode: 'host',
        command: ['sleep', 'infinity'],
        healthcheck: { test: ['CMD', 'bash', '-c', `exec 3<>/dev/tcp/127.0.0.1/${port}`], interval: '1s', timeout: '2s', retries: 30 }
      })
      const petstoreService = (environment: Record<string, string>) => ({
        image,
        network_mode: 'host',
        environment: {
          HOST: '127.0.0.1',
          DATABASE_URL: databaseUrl.toString(),
          REDIS_URL,
          REDIS_KEY_PREFIX: redisPrefix,
          ...environment
        }
      })
      writeFileSync(join(dir, 'override.yaml'), stringify({
        version: '2.4',
        services: {
          postgres: placeholder(Number(databaseUrl.port || 5432)),
          redis: placeholder(Number(new URL(REDIS_URL).port || 6379)),
          migrate: petstoreService({}),
          api: petstoreService({ PORT: String(ports[0]), METRICS_TOKEN })
        }
      }).replace(/^version: .*\n/m, ''))

      const up = await runCompose('up', '--detach', '--no-build', 'api')
      assert.equal(up.code, 0, `compose up: ${up.stderr}`)
      instances = [{ name: await containerOf('api'), port: ports[0] as number }]

      // The merged definition of `api`, as `--scale api=3` would run it, on the two other ports.
      const merged = parse((await runCompose('config')).stdout) as { services: Record<string, { environment: Record<string, string | null>, command: string[], image: string }> }
      const api = merged.services.api
      assert.ok(api !== undefined)
      for (const port of ports.slice(1) as number[]) {
        const name = uniqueName('compose-api')
        extras.push(name)
        const env = Object.entries({ ...api.environment, PORT: String(port) }).flatMap(([k, v]) => ['--env', `${k}=${v ?? ''}`])
        await docker(['run', '--detach', '--name', name, '--network', 'host', '--stop-timeout', '20', ...env, api.image, ...api.command])
        instances.push({ name, port })
      }
      for (const { port } of instances) await waitForStatus(`http://127.0.0.1:${port}/readyz`, 60_000)
      // Each instance listens on its own port: one that could not would leave another answering for it.
      for (const { name, port } of instances) assert.match(await docker(['logs', name]), new RegExp(`on port ${port} `), `${name} is not listening on ${port}`)
      await petstore('import', '/app/data/demo.json')

      const port = await freePort()
      writeFileSync(join(dir, 'haproxy.cfg'), balancerConfig(readFileSync(join(ROOT, 'deploy/compose/haproxy.cfg'), 'utf8'), port, ports))
      // HAProxy runs as its own user: the directory (mkdtemp makes it 0700) must be readable to it.
      chmodSync(dir, 0o755)
      chmodSync(join(dir, 'haproxy.cfg'), 0o644)
      balancer = uniqueName('compose-lb')
      extras.push(balancer)
      await docker(['run', '--detach', '--name', balancer, '--network', 'host', '--volume', `${dir}:/usr/local/etc/haproxy:ro`, haproxy])
      lb = `http://127.0.0.1:${port}`
      await waitForStatus(`${lb}/healthz`, 30_000)
      // Every instance up in the balancer (rise 2 at 1 s).
      await sleep(BALANCER_RISE_MS)
    })

    after(async () => {
      if (compose.length > 0) await runCompose('down', '--volumes', '--remove-orphans', '--timeout', '1').catch(() => {})
      for (const name of extras) await docker(['rm', '--force', '--volumes', name]).catch(() => {})
      await adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {})
      await cleanRedis(redisPrefix).catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    })

    test('the shipped HAProxy configuration is valid', async () => {
      const bases = await baseImages()
      const res = await command('docker', ['run', '--rm', '--network', 'none', '--volume', `${join(ROOT, 'deploy/compose')}:/usr/local/etc/haproxy:ro`,
        await haproxyImage(bases.RUNTIME_IMAGE), 'haproxy', '-c', '-f', '/usr/local/etc/haproxy/haproxy.cfg'])
      assert.equal(res.code, 0, res.stdout + res.stderr)
    })

    test('when brought up, then the migration has run to completion before the first instance started', async () => {
      const migrate = await inspect(await containerOf('migrate'))
      const api = await inspect(instances[0]?.name as string)
      assert.equal(migrate.State.Status, 'exited')
      assert.equal(migrate.State.ExitCode, 0)
      assert.ok(Date.parse(migrate.State.FinishedAt) <= Date.parse(api.State.StartedAt),
        `migrate finished at ${migrate.State.FinishedAt}, api started at ${api.State.StartedAt}`)
    })

    test('when 200 requests of one free key go through the balancer, then exactly 60 are served, by all three instances', async () => {
      const key = await petstore('keys', 'create', '--plan', 'free', '--name', 'compose')
      const before = await Promise.all(instances.map(({ port }) => listings(port)))
      await awayFromMinuteBoundary(40)
      const statuses: number[] = []
      await Promise.all(Array.from({ length: 10 }, async () => {
        for (let i = 0; i < 20; i++) {
          const res = await fetch(`${lb}/v1/inventory`, { headers: { authorization: `Bearer ${key}` } })
          await res.arrayBuffer()
          statuses.push(res.status)
        }
      }))
      assert.deepEqual(tally(statuses), { 200: 60, 429: 140 })
      const served = (await Promise.all(instances.map(({ port }) => listings(port)))).map((n, i) => n - (before[i] as number))
      assert.equal(served.reduce((a, b) => a + b, 0), 200, `answers by instance: ${served.join(', ')}`)
      assert.ok(served.every((n) => n > 0), `every instance answered some: ${served.join(', ')}`)
    })

    test('when every instance is restarted in turn under reads and writes, then every request is answered 2xx and every acknowledged adjustment is applied once', async () => {
      const key = await petstore('keys', 'create', '--plan', 'enterprise', '--per-minute', '1000000', '--per-day', '10000000', '--name', 'rolling')
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
      const start = await (await fetch(`${lb}/v1/inventory/2`, { headers })).json() as { quantity: number }

      let stopping = false
      const failures: string[] = []
      let acknowledged = 0
      let reads = 0
      const client = async (write: boolean): Promise<void> => {
        while (!stopping) {
          try {
            const res = write
              ? await fetch(`${lb}/v1/inventory/2/adjustments`, { method: 'POST', headers, body: '{"delta": 1, "reason": "return"}' })
              : await fetch(`${lb}/v1/inventory`, { headers })
            const text = await res.text()
            if (res.status >= 200 && res.status < 300 && write) acknowledged++
            else if (res.status >= 200 && res.status < 300) reads++
            else failures.push(`${write ? 'POST' : 'GET'} ${res.status} ${text.slice(0, 200)}`)
          } catch (error) {
            failures.push(`${write ? 'POST' : 'GET'}: ${String(error)}`)
          }
        }
      }
      const clients = [client(false), client(false), client(true), client(true)]
      for (const { name, port } of instances) {
        await docker(['restart', '--time', '20', name], { timeoutMs: 60_000 })
        await waitForStatus(`http://127.0.0.1:${port}/readyz`, 60_000)
        await sleep(BALANCER_RISE_MS)
      }
      stopping = true
      await Promise.all(clients)

      assert.deepEqual(tally(failures), {}, `${failures.length} failed requests`)
      assert.ok(reads > 100 && acknowledged > 100, `reads ${reads}, adjustments ${acknowledged}`)
      const end = await (await fetch(`${lb}/v1/inventory/2`, { headers })).json() as { quantity: number }
      assert.equal(end.quantity, start.quantity + acknowledged)
      for (const { name } of instances) assert.match(await docker(['logs', name]), /draining/)
    })

    /** listInventory answers the instance on `port` has counted (its own /metrics). */
    async function listings (port: number): Promise<number> {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()
      let total = 0
      for (const match of text.matchAll(/^petstore_http_requests_total\{[^}]*operation="listInventory"[^}]*\} (\d+)$/gm)) total += Number(match[1])
      return total
    }
  })
}

function tally (statuses: ReadonlyArray<number | string>): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
  return counts
}
