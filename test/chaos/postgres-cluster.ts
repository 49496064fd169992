/**
 * A private PostgreSQL cluster that the run may stop and start: initdb from the installed server binaries
 * (/usr/lib/postgresql/<version>/bin, or POSTGRES_BIN) into a temporary directory, on a free port. PostgreSQL
 * refuses to run as root, so as root every command runs as the postgres user (`runuser -u postgres --`).
 */
import { execFile, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type Cleanup, freePort } from '../../bench/support.js'

const RUN_AS = 'postgres'
const run = promisify(execFile)

/** The directory of initdb and pg_ctl: POSTGRES_BIN, else the newest /usr/lib/postgresql/<version>/bin; null when none. */
export function postgresBinaries (): string | null {
  const named = process.env.POSTGRES_BIN
  if (named !== undefined && named !== '') return existsSync(join(named, 'initdb')) ? named : null
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))).sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? null : join(root, versions[0], 'bin')
}

function asRoot (): boolean {
  return process.getuid?.() === 0
}

/** Why a private cluster cannot be made here, or null. */
export function missingPostgresCluster (): string | null {
  if (postgresBinaries() === null) return 'no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin (or POSTGRES_BIN)'
  if (asRoot() && spawnSync('id', ['-u', RUN_AS]).status !== 0) return `running as root, and no ${RUN_AS} user to run PostgreSQL as`
  if (asRoot() && spawnSync('sh', ['-c', 'command -v runuser']).status !== 0) return 'running as root, and no runuser to run PostgreSQL as another user'
  return null
}

export interface PostgresCluster {
  /** The URL of its postgres database (user postgres, trust). */
  url: string
  /** Stops it: 'immediate' ends every process at once, as a crash would (the start then recovers from the WAL). */
  stop: (mode: 'fast' | 'immediate') => Promise<void>
  /** Starts it again; resolves once it accepts connections. */
  start: () => Promise<void>
}

/** Makes and starts a cluster in a temporary directory; the cleanup stops it and removes the directory. */
export async function startPostgresCluster (cleanup: Cleanup): Promise<PostgresCluster> {
  const bin = postgresBinaries() as string
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'petstore-chaos-pg-'))
  if (asRoot()) {
    const id = (flag: string): number => Number(spawnSync('id', [flag, RUN_AS], { encoding: 'utf8' }).stdout)
    chownSync(dir, id('-u'), id('-g'))
  }
  // Asynchronous, so that the clients keep sending while a command runs.
  const pg = async (command: string, args: string[]): Promise<void> => {
    const argv = asRoot() ? ['runuser', '-u', RUN_AS, '--', join(bin, command), ...args] : [join(bin, command), ...args]
    await run(argv[0] as string, argv.slice(1), { cwd: dir, timeout: 60_000 })
  }
  const data = join(dir, 'data')
  let running = false
  const stop = async (mode: 'fast' | 'immediate'): Promise<void> => {
    await pg('pg_ctl', ['stop', '-D', data, '-m', mode, '-w', '-t', '30'])
    running = false
  }
  const start = async (): Promise<void> => {
    // fsync off: the run kills processes, not machines; what a process wrote reaches the disk through the kernel.
    await pg('pg_ctl', ['start', '-D', data, '-w', '-t', '60', '-l', join(dir, 'log'),
      '-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100`])
    running = true
  }
  cleanup.defer(async () => {
    try {
      if (running) await stop('immediate')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
  await pg('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync'])
  await start()
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, stop, start }
}
