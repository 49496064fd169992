/**
 * Test helpers: an app on a temporary SQLite store, keys, and inject() shortcuts. Each test builds its own
 * app and data; nothing is shared between tests.
 */
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { buildApp } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { createKey } from '../../src/access/keys.js'
import type { PetImport, Order, Plan } from '../../src/model.js'
import { SqliteStore } from '../../src/store/sqlite-store.js'
import type { SqliteOptions } from '../../src/store/sqlite/database.js'
import type { Store } from '../../src/store/store.js'
import { importData } from '../../src/domain/import.js'

export function tempDir (t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A migrated store on a temporary file; `options`: a serving store's (its writer thread, say). */
export async function tempStore (t: TestContext, options: SqliteOptions = {}): Promise<SqliteStore> {
  const store = new SqliteStore(join(tempDir(t), 'test.db'), options)
  await store.schema.migrate()
  t.after(() => store.close())
  return store
}

/** A migrated store on a temporary file whose writes run on its writer thread, as a serving process's do. */
export const tempThreadedStore = (t: TestContext): Promise<SqliteStore> => tempStore(t, { writerThread: true })

export interface TestApp {
  app: FastifyInstance
  store: Store
  config: Config
  /** A valid free-plan key. */
  key: string
  /** Moves the injected clock. */
  clock: { now: number }
  request: (options: InjectOptions) => Promise<LightMyRequestResponse>
}

export async function testApp (t: TestContext, env: Record<string, string> = {}, data?: { pets?: PetImport[], orders?: Order[] }): Promise<TestApp> {
  const store = await tempStore(t)
  if (data !== undefined) await importData(store, { pets: data.pets ?? [], orders: data.orders ?? [] })
  const config = loadConfig({ AUTH_CACHE_TTL_MS: '0', ...env })
  const clock = { now: Date.parse('2026-11-22T12:00:00Z') }
  const app = await buildApp(config, { store, logger: false, clock: () => clock.now })
  t.after(() => app.close())
  const key = await newKey(store)
  const request = (options: InjectOptions) => app.inject(options)
  return { app, store, config, key, clock, request }
}

/** A key on a plan; enterprise keys get generous limits unless given their own. */
export async function newKey (store: Store, plan: Plan = 'free', enterprise: { perMinute: number, perDay: number } = { perMinute: 100_000, perDay: 1_000_000 }): Promise<string> {
  const limits = plan === 'enterprise' ? enterprise : { perMinute: null, perDay: null }
  const { key } = await createKey(store, 'production', { plan, name: 'test', ...limits })
  return key
}

export const auth = (key: string) => ({ authorization: `Bearer ${key}` })

export function pet (id: bigint | number, overrides: Partial<PetImport> = {}): PetImport {
  return { id: BigInt(id), name: `pet ${id}`, status: 'available', quantity: 1, ...overrides }
}

export function order (id: bigint | number, overrides: Partial<Order> = {}): Order {
  return { id: BigInt(id), petId: 1n, quantity: 1, shipDate: '2026-11-20T10:00:00Z', status: 'placed', complete: false, ...overrides }
}
