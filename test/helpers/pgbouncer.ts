/**
 * A private PgBouncer in transaction mode (pool_mode = transaction) in front of the test PostgreSQL, for tests that
 * run the store, or whole servers, through a pooler. Each one has its own directory, configuration and free port;
 * any database of the test server can be reached through it (a `*` fallback entry), so databases made by
 * tempPostgresDatabase work as they are. The rule of ./services.ts holds: with CI=true a missing pgbouncer or one
 * that does not start is a failing test; elsewhere the tests are skipped with a message.
 *
 * PgBouncer refuses to run as root: as root, it runs as PGBOUNCER_USER (default postgres, the user the PostgreSQL
 * package creates), and its directory is handed to that user. PGBOUNCER_BIN names the binary (default: pgbouncer
 * on PATH, /usr/sbin/pgbouncer on Debian).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { accessSync, chownSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { after, test, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import { freePort } from './net.js'
import { POSTGRES_URL } from './postgres.js'

export interface PgBouncer {
  /** The port it listens on (127.0.0.1). */
  readonly port: number
  /**
   * The connection URL of a database through this PgBouncer: `database` is a name, or a URL of the test server
   * (tempPostgresDatabase's) whose database is meant. The user (and password) are the test server's.
   */
  url: (database: string) => string
  /** What it has logged (its last 16 KiB): for a failing test's message. */
  log: () => string
  /** Shuts it down at once (SIGTERM: clients are disconnected) and removes its directory. Safe to call twice. */
  stop: () => Promise<void>
  /** Kills it (SIGKILL), as a crashed pooler would end; stop() still removes its directory. */
  kill: () => Promise<void>
}

export interface PgBouncerOptions {
  /** Server connections per database and user (default_pool_size): fewer than the clients' is the point of a pooler. Default 20. */
  poolSize?: number
  /** Client connections it accepts in all (max_client_conn). Default 400. */
  maxClients?: number
}

/** Why a PgBouncer could not be had: no binary, no user to run it as, or it did not start. */
export class PgBouncerUnavailable extends Error {}

const READY_TIMEOUT_MS = 10_000
const LOG_LIMIT = 16_384

/** The pgbouncer binary: PGBOUNCER_BIN, else pgbouncer on PATH or in the sbin directories (Debian: /usr/sbin). */
export function pgbouncerBinary (): string | null {
  const named = process.env.PGBOUNCER_BIN
  const candidates = named !== undefined && named !== ''
    ? [named]
    : [...(process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== ''), '/usr/sbin', '/usr/local/sbin'].map((dir) => join(dir, 'pgbouncer'))
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // Not there, or not executable: the next candidate.
    }
  }
  return null
}

/** As root: the user PgBouncer runs as, and its ids. Otherwise null (it runs as this process's user). */
function runAs (): { name: string, uid: number, gid: number } | null {
  if (process.getuid?.() !== 0) return null
  const name = process.env.PGBOUNCER_USER ?? 'postgres'
  try {
    const id = (flag: string): number => Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim())
    return { name, uid: id('-u'), gid: id('-g') }
  } catch {
    throw new PgBouncerUnavailable(`pgbouncer refuses to run as root, and there is no user "${name}" to run it as (set PGBOUNCER_USER)`)
  }
}

/** A value for pgbouncer.ini's quoted userlist (doubled quotes, as the file format wants). */
function quoted (text: string): string {
  return `"${text.replaceAll('"', '""')}"`
}

/** Starts a PgBouncer on a free port and waits until it serves; throws PgBouncerUnavailable when it cannot. */
async function launch (options: PgBouncerOptions): Promise<PgBouncer> {
  const binary = pgbouncerBinary()
  if (binary === null) {
    throw new PgBouncerUnavailable('no pgbouncer binary (install it: apt-get install -y pgbouncer; or set PGBOUNCER_BIN)')
  }
  const user = runAs()
  const server = new URL(POSTGRES_URL)
  const login = decodeURIComponent(server.username === '' ? 'postgres' : server.username)
  const password = decodeURIComponent(server.password)
  // A port taken between freePort() and the bind is the one failure worth another try.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const dir = mkdtempSync(join(tmpdir(), 'petstore-pgbouncer-'))
    const ini = join(dir, 'pgbouncer.ini')
    writeFileSync(ini, [
      '[databases]',
      // The fallback entry: every database name a client asks for, on the test server, as the client's user.
      `* = host=${server.hostname.replace(/^\[|\]$/g, '')} port=${server.port === '' ? '5432' : server.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      // No Unix socket: it would clash with another PgBouncer's (or the system's) in the same directory.
      'unix_socket_dir =',
      'pool_mode = transaction',
      // Clients are not checked (the test server trusts them anyway); the user list gives the password, if the
      // test server wants one, for PgBouncer's own logins.
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `default_pool_size = ${options.poolSize ?? 20}`,
      `max_client_conn = ${options.maxClients ?? 400}`,
      // Idle server connections of finished tests go soon, so the test server's max_connections is not used up.
      'server_idle_timeout = 5',
      'log_connections = 0',
      'log_disconnections = 0',
      ''
    ].join('\n'))
    writeFileSync(join(dir, 'userlist.txt'), `${quoted(login)} ${quoted(password)}\n`)
    if (user !== null) {
      for (const path of [dir, ini, join(dir, 'userlist.txt')]) chownSync(path, user.uid, user.gid)
    }
    const child = spawn(binary, [ini], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(user === null ? {} : { uid: user.uid, gid: user.gid })
    })
    let log = ''
    const keep = (chunk: string): void => { log = (log + chunk).slice(-LOG_LIMIT) }
    child.stdout?.setEncoding('utf8').on('data', keep)
    child.stderr?.setEncoding('utf8').on('data', keep)
    const exited = new Promise<void>((resolve) => {
      child.on('error', (error) => { keep(`\n${error.message}\n`); resolve() })
      child.on('exit', () => resolve())
    })
    const bouncer = handle(child, exited, dir, port, login, password, () => log)
    try {
      await ready(bouncer, exited)
      return bouncer
    } catch (error) {
      await bouncer.stop()
      if (attempt < 3 && /Address already in use/i.test(log)) continue
      throw new PgBouncerUnavailable(`pgbouncer did not start: ${(error as Error).message}\n${log}`)
    }
  }
}

function handle (child: ChildProcess, exited: Promise<void>, dir: string, port: number, login: string, password: string, log: () => string): PgBouncer {
  const running = (): boolean => child.exitCode === null && child.signalCode === null && child.pid !== undefined
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    if (running()) child.kill(signal)
    const timer = setTimeout(() => { if (running()) child.kill('SIGKILL') }, 5000)
    await exited
    clearTimeout(timer)
  }
  // A test process that ends without stop() (a crash, a forgotten cleanup) leaves no pgbouncer running.
  const onExit = (): void => {
    if (running()) child.kill('SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', onExit)
  return {
    port,
    url (database) {
      const name = /^postgres(ql)?:\/\//i.test(database) ? decodeURIComponent(new URL(database).pathname.slice(1)) : database
      const url = new URL(`postgres://127.0.0.1:${port}/`)
      url.username = encodeURIComponent(login)
      url.password = encodeURIComponent(password)
      url.pathname = `/${encodeURIComponent(name)}`
      return url.toString()
    },
    log,
    async stop () {
      await end('SIGTERM')
      process.removeListener('exit', onExit)
      rmSync(dir, { recursive: true, force: true })
    },
    async kill () {
      await end('SIGKILL')
    }
  }
}

/** Waits until a query through it reaches the test server (so the fallback entry works, not only the port). */
async function ready (bouncer: PgBouncer, exited: Promise<void>): Promise<void> {
  let gone = false
  void exited.then(() => { gone = true })
  const database = decodeURIComponent(new URL(POSTGRES_URL).pathname.slice(1)) || 'postgres'
  const deadline = Date.now() + READY_TIMEOUT_MS
  let last: unknown = null
  while (Date.now() < deadline) {
    if (gone) throw new Error('it exited')
    const client = new pg.Client({ connectionString: bouncer.url(database), connectionTimeoutMillis: 1000 })
    client.on('error', () => {})
    try {
      await client.connect()
      await client.query('SELECT 1')
      return
    } catch (error) {
      last = error
    } finally {
      await client.end().catch(() => {})
    }
    await sleep(50)
  }
  throw new Error(`no answer through it within ${READY_TIMEOUT_MS} ms (last: ${last instanceof Error ? last.message : String(last)})`)
}

/**
 * Starts a PgBouncer for one test (stopped after it) or, without `t`, for the caller to stop. When none can be
 * started: with `t` and CI=true the test fails; with `t` elsewhere the test is skipped with the reason and null
 * returned (the test should return); without `t`, PgBouncerUnavailable is thrown.
 */
export async function startPgBouncer (t: TestContext, options?: PgBouncerOptions): Promise<PgBouncer | null>
export async function startPgBouncer (t?: undefined, options?: PgBouncerOptions): Promise<PgBouncer>
export async function startPgBouncer (t?: TestContext, options: PgBouncerOptions = {}): Promise<PgBouncer | null> {
  let bouncer: PgBouncer
  try {
    bouncer = await launch(options)
  } catch (error) {
    if (t === undefined || process.env.CI === 'true' || !(error instanceof PgBouncerUnavailable)) throw error
    console.warn(`PgBouncer unavailable: ${error.message}`)
    t.skip(`PgBouncer unavailable: ${error.message.split('\n')[0] ?? ''}`)
    return null
  }
  t?.after(() => bouncer.stop())
  return bouncer
}

/**
 * For a test file: one PgBouncer for all its tests, stopped when the file's tests are done; or, when none can be
 * started, what stands in for the tests (a failing test with CI=true, a skipped one elsewhere) and null.
 */
export async function requirePgBouncer (what: string, options: PgBouncerOptions = {}): Promise<PgBouncer | null> {
  try {
    const bouncer = await launch(options)
    after(() => bouncer.stop())
    return bouncer
  } catch (error) {
    if (!(error instanceof PgBouncerUnavailable)) throw error
    const reason = error.message
    if (process.env.CI === 'true') {
      test(`${what} need PgBouncer`, () => {
        throw new Error(`PgBouncer unavailable, and CI=true requires these tests to run: ${reason}`)
      })
    } else {
      console.warn(`PgBouncer unavailable: skipping ${what}: ${reason}`)
      test(what, { skip: `PgBouncer unavailable: ${reason.split('\n')[0] ?? ''}` }, () => {})
    }
    return null
  }
}
