/**
 * The container tests' helpers: a real Docker engine (with CI=true a missing engine fails the tests, elsewhere they
 * are skipped), the image built from the repository's Dockerfile on stand-ins of the official base images (these
 * machines reach no container registry: test/container/stand-in-base.sh), and containers that are removed after
 * their test. Every container uses host networking, the only network the test machines give containers: they reach
 * the local PostgreSQL and Redis on 127.0.0.1, and the tests reach them on the ports they are told to listen on.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { requireService } from '../helpers/services.js'

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The image the tests build (never the tag a user builds, petstore-inventory:1.0.0). */
export const TEST_IMAGE = 'petstore-inventory:test'

export interface RunResult { code: number, stdout: string, stderr: string }

/** Runs a command to completion (argument array, no shell); never throws for a non-zero exit. */
export function command (file: string, args: readonly string[], options: { timeoutMs?: number, input?: string, cwd?: string, env?: NodeJS.ProcessEnv } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { timeout: options.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024, cwd: options.cwd ?? ROOT, env: options.env ?? process.env },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null
        if (code === null) reject(new Error(`${file} ${args.join(' ')}: ${error?.message ?? 'failed'}\n${stderr}`))
        else resolve({ code, stdout, stderr })
      })
    if (options.input !== undefined) child.stdin?.end(options.input)
  })
}

/** Runs `docker ARGS`; throws with Docker's message unless it exits 0. Returns stdout. */
export async function docker (args: readonly string[], options: { timeoutMs?: number, input?: string } = {}): Promise<string> {
  const res = await command('docker', args, options)
  if (res.code !== 0) throw new Error(`docker ${args.join(' ')} exited ${res.code}: ${res.stderr.trim()}`)
  return res.stdout
}

export async function dockerReachable (): Promise<boolean> {
  return await command('docker', ['info', '--format', '{{.ServerVersion}}'], { timeoutMs: 20_000 }).then((res) => res.code === 0, () => false)
}

/** See requireService: the container tests fail in CI without a Docker engine and are skipped elsewhere. */
export function requireDocker (what: string): Promise<boolean> {
  return requireService('Docker', process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock', dockerReachable, what, 'DOCKER_HOST')
}

/**
 * NODE_IMAGE: the Node.js image the Dockerfile is built on (its one base unless told otherwise); RUNTIME_IMAGE: the
 * plain Debian of the same release, for the builds that name a runtime base of their own and for the containers
 * that stand in for other services.
 */
export interface BaseImages { NODE_IMAGE: string, RUNTIME_IMAGE: string }

/**
 * The base images the Dockerfile is built on: PETSTORE_NODE_IMAGE and PETSTORE_RUNTIME_IMAGE when given (the official
 * images, where a registry is reachable), else the stand-ins, built once and then reused by tag.
 */
export async function baseImages (): Promise<BaseImages> {
  const given = { NODE_IMAGE: process.env.PETSTORE_NODE_IMAGE, RUNTIME_IMAGE: process.env.PETSTORE_RUNTIME_IMAGE }
  if (given.NODE_IMAGE !== undefined && given.RUNTIME_IMAGE !== undefined) return given as BaseImages
  const res = await command('bash', [join(ROOT, 'test/container/stand-in-base.sh'), '24'], { timeoutMs: 15 * 60_000 })
  if (res.code !== 0) throw new Error(`test/container/stand-in-base.sh failed: ${res.stderr}`)
  const line = (name: string): string => {
    const value = new RegExp(`^${name}=(.+)$`, 'm').exec(res.stdout)?.[1]
    if (value === undefined) throw new Error(`stand-in-base.sh printed no ${name}: ${res.stdout}`)
    return value
  }
  return { NODE_IMAGE: line('NODE_IMAGE'), RUNTIME_IMAGE: line('RUNTIME_IMAGE') }
}

/** `docker build` of the repository's Dockerfile with these build arguments; never throws for a failed build. */
export async function build (tag: string, buildArgs: Record<string, string>): Promise<RunResult> {
  return await command('docker', ['build', '--network', 'host', ...Object.entries(buildArgs).flatMap(([name, value]) => ['--build-arg', `${name}=${value}`]),
    '--tag', tag, ROOT], { timeoutMs: 15 * 60_000 })
}

/**
 * Builds the repository's Dockerfile as TEST_IMAGE, given NODE_IMAGE alone as a user builds it on another Node line
 * (Docker's layer cache makes a second build of the same sources quick).
 */
export async function buildImage (): Promise<string> {
  const bases = await baseImages()
  const res = await build(TEST_IMAGE, { NODE_IMAGE: bases.NODE_IMAGE })
  if (res.code !== 0) throw new Error(`docker build exited ${res.code}: ${res.stderr.trim()}`)
  return TEST_IMAGE
}

/** A name no other test run uses, for containers and volumes. */
export function uniqueName (what: string): string {
  return `petstore-test-${what}-${randomBytes(4).toString('hex')}`
}

/** `docker run --detach --network host ARGS`; the container is removed (with its anonymous volumes) after the test. */
export async function runContainer (t: TestContext, name: string, args: readonly string[]): Promise<string> {
  t.after(() => docker(['rm', '--force', '--volumes', name]).catch(() => {}))
  await docker(['run', '--detach', '--name', name, '--network', 'host', ...args])
  return name
}

/** A named volume, removed after the test. */
export async function volume (t: TestContext, what: string): Promise<string> {
  const name = uniqueName(what)
  await docker(['volume', 'create', name])
  t.after(async () => {
    // After the test's containers: t.after hooks run in order, so wait until nothing uses it.
    for (let i = 0; i < 20; i++) {
      if (await command('docker', ['volume', 'rm', name]).then((res) => res.code === 0, () => false)) return
      await sleep(500)
    }
  })
  return name
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs` with what it waited for. */
export async function waitFor<T> (what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  while (Date.now() < deadline) {
    try {
      const value = await check()
      if (value !== undefined) return value
    } catch (error) {
      last = error
    }
    await sleep(200)
  }
  throw new Error(`${what} did not happen within ${timeoutMs} ms${last === undefined ? '' : `: ${String(last)}`}`)
}

/** Waits until GET `url` answers `status` (200 by default). */
export function waitForStatus (url: string, timeoutMs: number, status = 200): Promise<true> {
  return waitFor(`GET ${url} answering ${status}`, timeoutMs, async () =>
    (await fetch(url, { signal: AbortSignal.timeout(2000) })).status === status ? true : undefined)
}

/** What `docker inspect` says of one container. */
export async function inspect (name: string): Promise<{ State: { Status: string, ExitCode: number, StartedAt: string, FinishedAt: string, Health?: { Status: string } }, Config: { User: string } }> {
  return JSON.parse(await docker(['inspect', '--type', 'container', name]))[0]
}
