/**
 * The client as an app gets it: `npm pack` in client/, the tarball installed offline into a scratch project outside the
 * repository, and from there a script calling a running service (the built `petstore serve`) and a type-check against
 * the shipped declarations. Needs `npm run build` first, like the CLI tests.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { cpSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { tempDir } from '../helpers/app.js'
import { cliFor, startServe } from '../cli/run.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
const BIG = '9007199254740993' // 2^53 + 1, one of the demo pets

interface PackResult { filename: string, files: Array<{ path: string }> }

/**
 * Packs a copy of client/ (its sources and the repository's tsconfig.json, which its own extends): the tarball is
 * what `npm pack` in client/ makes, its prepack build included, and the repository's client/dist, which other tests
 * import, is not rewritten under them.
 */
async function pack (dir: string): Promise<string> {
  const source = join(dir, 'checkout')
  cpSync(join(ROOT, 'client'), join(source, 'client'), { recursive: true, filter: (path) => !path.startsWith(join(ROOT, 'client', 'dist')) })
  cpSync(join(ROOT, 'tsconfig.json'), join(source, 'tsconfig.json'))
  // Where npm run finds tsc, as it does from client/ in the repository (the bin directories of every parent).
  symlinkSync(join(ROOT, 'node_modules'), join(source, 'node_modules'), 'dir')
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: join(source, 'client') })
  const [result] = JSON.parse(stdout) as PackResult[]
  assert.ok(result !== undefined)
  assert.deepEqual(readdirSync(join(source, 'client')).filter((name) => name.endsWith('.tgz')), [], 'the checkout is left as it was')
  return join(dir, result.filename)
}

/** The files of a tarball, by path inside its package/ directory, as text. */
async function unpacked (tarball: string, dir: string): Promise<Map<string, string>> {
  const into = join(dir, 'unpacked')
  mkdirSync(into)
  await run('tar', ['-xzf', tarball, '-C', into])
  const files = new Map<string, string>()
  for (const entry of readdirSync(join(into, 'package'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    files.set(path.slice(join(into, 'package').length + 1), readFileSync(path, 'utf8'))
  }
  return files
}

const SCRIPT = `
import { createClient, PetstoreError } from '@petstore/inventory-client'

const petstore = createClient({ baseUrl: process.env.PETSTORE_URL, apiKey: process.env.PETSTORE_KEY })
const entries = []
for await (const item of petstore.allInventory({ limit: 4 })) entries.push([String(item.petId), typeof item.petId, item.quantity])
const updated = await petstore.updateInventory(${BIG}n, { quantity: 7, reason: 'arrival' })
let missing
try {
  await petstore.getInventoryItem(424242)
} catch (error) {
  missing = error instanceof PetstoreError ? error.code : String(error)
}
console.log(JSON.stringify({ entries, updated: [String(updated.data.petId), updated.data.quantity, updated.replayed], missing }))
`

// Compiles only if the declarations are there and say what the client does: each @ts-expect-error must meet an error.
const CHECKED = `
import { createClient, PetstoreError, type InventoryItem, type RateLimitedEvent } from '@petstore/inventory-client'

declare const apiKey: string
const petstore = createClient({
  baseUrl: 'http://127.0.0.1:8080',
  apiKey,
  onRateLimited: (event: RateLimitedEvent) => event.waitMs <= 5_000 && event.operation !== 'batchUpdateInventory'
})

export async function stockValue (): Promise<bigint> {
  let sum = 0n
  for await (const item of petstore.allInventory({ limit: 100 })) {
    const id: bigint = item.petId
    const quantity: number = item.quantity
    sum += id * BigInt(quantity)
  }
  return sum
}

export async function restock (petId: bigint): Promise<InventoryItem> {
  try {
    return (await petstore.updateInventory(petId, { quantity: 5, reason: 'arrival' })).data
  } catch (error) {
    if (error instanceof PetstoreError && error.code === 'rate_limited') throw new Error(\`try again in \${error.retryAfterSeconds} s\`)
    throw error
  }
}

export async function wrong (): Promise<void> {
  // @ts-expect-error: a quantity is a number
  await petstore.updateInventory(1n, { quantity: '5' })
  // @ts-expect-error: the page's cursor is text
  await petstore.listInventoryPage({ cursor: 5 })
}

// @ts-expect-error: sold_out is no error code of the API
export const never = (error: PetstoreError): boolean => error.code === 'sold_out'
`

test('when the client is packed, then the tarball holds the built client, its declarations and a package.json without dependencies, and no server code', async (t) => {
  const dir = tempDir(t)
  const tarball = await pack(dir)
  assert.match(tarball, /petstore-inventory-client-1\.0\.0\.tgz$/)
  const files = await unpacked(tarball, dir)
  const modules = readdirSync(join(ROOT, 'client')).filter((name) => name.endsWith('.ts')).map((name) => name.slice(0, -3))
  const expected = ['README.md', 'package.json', ...modules.flatMap((name) => [`dist/${name}.js`, `dist/${name}.d.ts`, ...(name === 'schema' ? [] : [`dist/${name}.js.map`])])]
  assert.deepEqual([...files.keys()].sort(), expected.sort())

  const manifest = JSON.parse(files.get('package.json') ?? '{}') as Record<string, unknown>
  assert.deepEqual([manifest.name, manifest.version, manifest.type], ['@petstore/inventory-client', '1.0.0', 'module'])
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'bundleDependencies']) {
    assert.equal(manifest[field], undefined, `no ${field}`)
  }
  const server = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  for (const name of Object.keys(server.dependencies)) {
    for (const [path, text] of files) assert.ok(!text.includes(`'${name}'`) && !text.includes(`"${name}"`), `${path} names the server's dependency ${name}`)
  }
  // Every import of the shipped code is one of its own files.
  for (const [path, text] of files) {
    if (!path.endsWith('.js') && !path.endsWith('.d.ts')) continue
    for (const [, specifier] of text.matchAll(/\bfrom\s+'([^']+)'/g)) assert.match(specifier ?? '', /^\.\/[a-z0-9-]+\.js$/, `${path} imports ${specifier}`)
  }
})

test('when an app installs the tarball offline, then it needs nothing else, and its script and its types work against a running service', async (t) => {
  const dir = tempDir(t)
  const tarball = await pack(dir)
  const app = join(dir, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }))
  // Offline and with an empty cache: the install can use nothing but the tarball.
  await run('npm', ['install', '--offline', '--cache', join(dir, 'npm-cache'), '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: app })
  const installed = readdirSync(join(app, 'node_modules')).filter((name) => !name.startsWith('.'))
  assert.deepEqual(installed, ['@petstore'])
  assert.deepEqual(readdirSync(join(app, 'node_modules', '@petstore')), ['inventory-client'])

  const cli = cliFor(t)
  const { base } = await startServe(cli, ['--seed-demo'])
  const created = await cli.run(['keys', 'create', '--plan', 'free'])
  assert.equal(created.code, 0, created.stderr)
  writeFileSync(join(app, 'main.mjs'), SCRIPT)
  const { stdout } = await run(process.execPath, ['main.mjs'], { cwd: app, env: { PATH: process.env.PATH ?? '', PETSTORE_URL: base, PETSTORE_KEY: created.stdout.trim() } })
  const result = JSON.parse(stdout) as { entries: Array<[string, string, number]>, updated: [string, number, boolean], missing: string }
  assert.equal(result.entries.length, 6, 'the demo inventory, in two pages')
  assert.deepEqual(result.entries.at(-1), [BIG, 'bigint', 1])
  assert.ok(result.entries.every(([, type]) => type === 'bigint'))
  assert.deepEqual(result.updated, [BIG, 7, false])
  assert.equal(result.missing, 'not_found')

  writeFileSync(join(app, 'check.ts'), CHECKED)
  const strict = { strict: true, noEmit: true, skipLibCheck: false, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext' }
  // A browser-like app (the DOM library, no @types/node) and a Node.js app (@types/node, no DOM): both type-check.
  for (const [name, options] of Object.entries({
    dom: { lib: ['ES2023', 'DOM', 'DOM.AsyncIterable'], types: [] },
    node: { lib: ['ES2023'], types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')] }
  })) {
    writeFileSync(join(app, `tsconfig.${name}.json`), JSON.stringify({ compilerOptions: { ...strict, ...options }, files: ['check.ts'] }))
    const checked = await run(process.execPath, [TSC, '-p', `tsconfig.${name}.json`], { cwd: app }).then(() => '', (error: { stdout?: string }) => error.stdout ?? String(error))
    assert.equal(checked, '', `${name}: ${checked}`)
  }
})
