/**
 * `npm run bench:import`: times `petstore import` of a generated file of 100,000 pets (BENCH_IMPORT_PETS) on a
 * fresh SQLite file and, when reachable, a fresh PostgreSQL database (BENCH_POSTGRES_URL), BENCH_IMPORT_ROUNDS
 * times each (default 3); prints the median wall time of the whole command, records/s and the largest peak RSS
 * of the CLI process. Temporary files and scratch databases are removed again, also on failure or Ctrl+C.
 */
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createWriteStream, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { once } from 'node:events'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { finished } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import { adminQuery, postgresReachable } from '../test/helpers/postgres.js'
import { Cleanup, cleanupOnSignals, median, memoryMb, ROOT, startCommand } from './support.js'

const BIN = join(ROOT, 'bin/petstore.js')
const STATUSES = ['available', 'pending', 'sold'] as const
const CATEGORIES = ['Dogs', 'Cats', 'Fish', 'Birds', 'Rabbits', 'Reptiles']
const TAGS = ['friendly', 'vaccinated', 'young', 'senior', 'house-trained', 'playful']
/** 2^53 + 1: the first integer a double cannot hold. */
export const ABOVE_2_53 = 9007199254740993n

/** The id of pet number i (0-based): 1, 2, 3, ... except that every 10,000th id lies above 2^53. */
export function benchPetId (i: number): bigint {
  return i % 10_000 === 9_999 ? ABOVE_2_53 + BigInt(i) : BigInt(i + 1)
}

/** One realistic pet as JSON text: every field of the import format, a varying number of tags and photos. */
export function benchPetJson (i: number): string {
  const id = benchPetId(i)
  const tags = Array.from({ length: i % 4 }, (_, k) => {
    const t = (i + k) % TAGS.length
    return `{"id":${t + 1},"name":"${TAGS[t] as string}"}`
  })
  const photos = Array.from({ length: i % 3 }, (_, k) => `"https://images.petstore.example/pets/${id}/${k}.jpg"`)
  const c = i % CATEGORIES.length
  return `{"id":${id},"name":"Pet ${i}","status":"${STATUSES[i % 3] as string}","quantity":${i % 50},` +
    `"category":{"id":${c + 1},"name":"${CATEGORIES[c] as string}"},"tags":[${tags.join(',')}],"photoUrls":[${photos.join(',')}]}`
}

/** Writes `{"pets": [...]}` with `count` pets to `path`, streaming, one pet a line. */
export async function writePetsFile (path: string, count: number): Promise<void> {
  const out = createWriteStream(path)
  out.write('{"pets": [\n')
  for (let i = 0; i < count; i++) {
    if (!out.write(benchPetJson(i) + (i === count - 1 ? '\n' : ',\n'))) await once(out, 'drain')
  }
  out.end(']}\n')
  await finished(out)
}

interface Run { seconds: number, peakRssMb: number | null, stderr: string }

const hasGnuTime = spawnSync('/usr/bin/time', ['-f', '%M', 'true'], { encoding: 'utf8' }).status === 0

/**
 * Runs `petstore import FILE`. Peak RSS comes from GNU time (the kernel's own maximum) when installed, else
 * from sampling VmHWM, which can miss a peak in the last moments of the process.
 */
async function runImport (file: string, databaseUrl: string): Promise<Run> {
  const rssFile = `${file}.rss`
  const argv = [process.execPath, BIN, 'import', file]
  const proc = startCommand(hasGnuTime ? ['/usr/bin/time', '-o', rssFile, '-f', '%M', ...argv] : argv, { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' })
  const started = process.hrtime.bigint()
  let sampled: number | null = null
  const sampler = setInterval(() => { sampled = memoryMb(proc.pid, 'VmHWM') ?? sampled }, 50)
  const { code, signal } = await proc.exited
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  clearInterval(sampler)
  const { stderr } = proc.output()
  if (code !== 0) throw new Error(`petstore import failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`)
  let peakRssMb: number | null = sampled
  if (hasGnuTime) {
    peakRssMb = Number(readFileSync(rssFile, 'utf8').trim().split('\n').at(-1)) / 1024
  }
  return { seconds, peakRssMb, stderr }
}

function report (store: string, pets: number, runs: Run[]): void {
  const seconds = median(runs.map((r) => r.seconds))
  const peaks = runs.flatMap((r) => r.peakRssMb === null ? [] : [r.peakRssMb])
  const rss = peaks.length === 0 ? '-' : `${Math.max(...peaks).toFixed(0)} MB`
  console.log(`${store.padEnd(10)}  ${seconds.toFixed(2).padStart(6)} s  ${Math.round(pets / seconds).toLocaleString('en-US').padStart(9)} records/s  ` +
    `peak RSS ${rss}  (runs: ${runs.map((r) => r.seconds.toFixed(2)).join(', ')} s)`)
}

async function main (): Promise<void> {
  const pets = Number(process.env.BENCH_IMPORT_PETS ?? 100_000)
  if (!Number.isInteger(pets) || pets <= 0) throw new Error('BENCH_IMPORT_PETS must be a positive integer')
  const rounds = Number(process.env.BENCH_IMPORT_ROUNDS ?? 3)
  if (!Number.isInteger(rounds) || rounds <= 0) throw new Error('BENCH_IMPORT_ROUNDS must be a positive integer')
  const postgresUrl = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  cleanupOnSignals()
  await Cleanup.scope(async (cleanup) => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-import-'))
    cleanup.defer(() => rmSync(dir, { recursive: true, force: true }))
    const file = join(dir, 'pets.json')
    await writePetsFile(file, pets)
    console.log(`${pets.toLocaleString('en-US')} pets, ${(statSync(file).size / 1e6).toFixed(1)} MB; node ${process.version}, ${cpus().length} CPU(s): ${cpus()[0]?.model ?? '?'}`)

    const sqlite: Run[] = []
    for (let round = 0; round < rounds; round++) {
      const db = join(dir, `petstore-${round}.db`)
      sqlite.push(await runImport(file, db))
      for (const suffix of ['', '-wal', '-shm']) rmSync(db + suffix, { force: true })
    }
    report('sqlite', pets, sqlite)

    if (!await postgresReachable(postgresUrl)) {
      console.log(`postgres    skipped: ${postgresUrl} is not reachable`)
      return
    }
    const runs: Run[] = []
    for (let round = 0; round < rounds; round++) {
      const database = `petstore_bench_import_${randomBytes(4).toString('hex')}`
      await adminQuery(`CREATE DATABASE ${database}`, postgresUrl)
      const drop = (): Promise<void> => adminQuery(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`, postgresUrl)
      cleanup.defer(drop)
      const url = new URL(postgresUrl)
      url.pathname = `/${database}`
      runs.push(await runImport(file, url.toString()))
      await drop()
    }
    report('postgres', pets, runs)
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(`bench:import: ${(error as Error).message}`)
    process.exitCode = 1
  })
}
