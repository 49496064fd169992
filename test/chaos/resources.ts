/**
 * The private resources a fault may take on this machine's shared servers (a database of its own on the local
 * PostgreSQL, a key prefix of its own on the local Redis, removed by the fault's cleanup), and the checks of what a
 * fault needs.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Cleanup } from '../../bench/support.js'
import { hasRedisServer } from '../helpers/redis-servers.js'
import { POSTGRES_URL, postgresReachable, tempPostgresDatabase } from '../helpers/postgres.js'
import { cleanRedis, REDIS_URL, redisReachable } from '../ratelimit/redis-env.js'

export { REDIS_URL }

/** Why the local PostgreSQL (POSTGRES_TEST_URL) cannot be used, or null. */
export async function missingPostgres (): Promise<string | null> {
  return await postgresReachable() ? null : `PostgreSQL not reachable at ${POSTGRES_URL.replace(/\/\/[^@/]*@/, '//')} (POSTGRES_TEST_URL)`
}

/** Why the local Redis (REDIS_TEST_URL) cannot be used, or null. */
export async function missingRedis (): Promise<string | null> {
  return await redisReachable() ? null : `Redis not reachable at ${REDIS_URL} (REDIS_TEST_URL)`
}

/** Why private Redis servers (redis-server, redis-cli) cannot be started, or null. */
export function missingRedisServer (): string | null {
  return hasRedisServer() ? null : 'no redis-server and redis-cli on PATH'
}

/** The first reason of several checks, or null when none has one. */
export async function firstMissing (...checks: Array<() => Promise<string | null> | string | null>): Promise<string | null> {
  for (const check of checks) {
    const reason = await check()
    if (reason !== null) return reason
  }
  return null
}

/** A database of its own on the local PostgreSQL, dropped (connections and all) by the cleanup; its URL. */
export async function privateDatabase (cleanup: Cleanup): Promise<string> {
  return await tempPostgresDatabase({ after: (drop) => cleanup.defer(async () => { await drop() }) })
}

/** The database name of a URL made by privateDatabase. */
export function databaseName (url: string): string {
  return new URL(url).pathname.slice(1)
}

/** A key prefix of its own on the local Redis, whose keys the cleanup deletes. */
export function privatePrefix (cleanup: Cleanup): string {
  const prefix = `chaos:${randomUUID()}:`
  cleanup.defer(() => cleanRedis(prefix, REDIS_URL))
  return prefix
}

/** A tmpfs of `size` (e.g. '16m') mounted on a new directory, unmounted and removed by the cleanup; null when mounting fails. */
export function smallDisk (cleanup: Cleanup | null, size: string): string | null {
  const dir = join('/tmp', `petstore-chaos-disk-${process.pid}-${randomBytes(4).toString('hex')}`)
  mkdirSync(dir, { recursive: true })
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' })
  } catch {
    rmSync(dir, { recursive: true, force: true })
    return null
  }
  const remove = (): void => {
    execFileSync('umount', ['-l', dir], { stdio: 'ignore' })
    rmSync(dir, { recursive: true, force: true })
  }
  if (cleanup === null) remove()
  else cleanup.defer(remove)
  return dir
}

/** Why a small disk cannot be mounted here (not root, no mount, a container without the capability), or null. */
export function missingMount (): string | null {
  return smallDisk(null, '1m') === null ? 'cannot mount a tmpfs here (mount -t tmpfs needs root and the capability)' : null
}
