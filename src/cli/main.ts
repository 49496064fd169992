/**
 * The operator CLI: `petstore <command>`. A thin layer over the same domain and store as the server.
 * Machine output goes to stdout, messages and errors to stderr. Exit codes: 0 ok, 1 failed, 2 usage or
 * configuration error.
 *
 * What only one command needs (the server and the cluster for `serve`, the streamed import, backups) is imported by
 * that command when it runs: every other command starts without loading the app (a `keys list` in about a third of
 * the time).
 */
import { loadConfig, type Config } from '../config.js'
import { ConfigError } from '../errors.js'
import { KeyInputError, RotationError } from '../access/keys.js'
import { stockHistory } from '../domain/inventory.js'
import { switchWebhook } from '../domain/webhooks.js'
import { parseInt64 } from '../int64.js'
import { SchemaError } from '../store/migrations.js'
import { epochNotice, migrateStore, openStore } from '../store/open.js'
import { VERSION } from '../version.js'
import { parse, positiveInteger, UsageError, withStore } from './common.js'
import { helpFor, USAGE } from './help.js'
import { historyJson, historyTable } from './history.js'
import { defaultIo, type Clock, type Io } from './io.js'
import { KEY_FLAGS, keysCommand } from './keys.js'
import { reorderPointCommand } from './reorder-point.js'
import { table } from './table.js'

async function webhooksCommand (args: string[], config: Config, io: Io, clock: Clock): Promise<number> {
  const [sub, ...rest] = args
  switch (sub) {
    case 'list': {
      const { values } = parse(rest, { json: { type: 'boolean' } }, 0)
      const now = clock()
      const [list, backlog] = await withStore(config, 'read', async (store) => await Promise.all([store.webhooks.listWebhooks(null), store.webhooks.webhookBacklog()]))
      const pending = new Map(backlog.map((row) => [row.webhookId, row]))
      const rows = list.map((webhook) => {
        const queue = pending.get(webhook.id)
        return {
          id: webhook.id,
          quota: webhook.quotaId,
          url: webhook.url,
          events: webhook.events,
          description: webhook.description,
          enabled: webhook.enabled,
          disabledReason: webhook.disabledReason,
          failures: webhook.failures,
          pending: queue?.pending ?? 0,
          oldestPendingSeconds: queue?.oldest == null ? null : Math.max(0, Math.round((now - queue.oldest.getTime()) / 1000)),
          createdAt: webhook.createdAt.toISOString()
        }
      })
      io.stdout(values.json === true
        ? JSON.stringify(rows) + '\n'
        : table(['ID', 'QUOTA', 'URL', 'STATE', 'PENDING', 'OLDEST', 'FAILURES', 'REASON'], rows.map((row) => [
          row.id, row.quota, row.url, row.enabled ? 'enabled' : 'disabled', String(row.pending),
          row.oldestPendingSeconds === null ? '-' : `${row.oldestPendingSeconds}s`, String(row.failures), row.disabledReason ?? ''
        ])))
      return 0
    }
    case 'disable':
    case 'enable': {
      const { values, positionals } = parse(rest, sub === 'disable' ? { reason: { type: 'string' } } : {}, 1)
      const id = positionals[0] as string
      const enabled = sub === 'enable'
      const state = enabled ? { enabled } : { enabled, ...(typeof values.reason === 'string' ? { reason: values.reason } : {}) }
      const updated = await withStore(config, 'write', (store) => switchWebhook(store, id, state, clock))
      if (updated === null) {
        io.stderr(`petstore: no webhook subscription with id ${id}\n`)
        return 1
      }
      io.stderr(`${enabled ? 'Enabled' : 'Disabled'} ${id}${enabled ? ': pending and new events are delivered again' : ''}.\n`)
      return 0
    }
    default:
      throw new UsageError('webhooks needs a subcommand: list, disable or enable')
  }
}

async function inventory (args: string[], config: Config, io: Io, clock: Clock): Promise<number> {
  const [sub, ...rest] = args
  if (sub === 'reorder-point') return await reorderPointCommand(rest, config, io, clock)
  if (sub !== 'history') throw new UsageError('inventory needs a subcommand: history or reorder-point')
  const { values, positionals } = parse(rest, { json: { type: 'boolean' }, limit: { type: 'string' } }, 1)
  const petId = parseInt64(positionals[0] as string)
  if (petId === null) throw new UsageError('PETID must be an integer from -9223372036854775808 to 9223372036854775807')
  const limit = positiveInteger('--limit', values.limit) ?? 100
  // One more than asked, to tell whether older changes were left out.
  const entries = await withStore(config, 'read', (store) => stockHistory(store, petId, limit + 1))
  if (entries === null) {
    io.stderr(`petstore: pet ${petId} has no stock entry and no recorded stock changes\n`)
    return 1
  }
  const shown = entries.slice(-limit)
  io.stdout(values.json === true ? historyJson(shown) : historyTable(shown))
  if (entries.length > limit) io.stderr(`Showing the newest ${limit} changes; older ones exist (use --limit).\n`)
  return 0
}

/** How long `petstore health` waits for an answer: a container health check's own timeout is longer. */
const HEALTH_TIMEOUT_MS = 3000

/**
 * `petstore health`: GET `path` of the server this configuration describes, from the same host; 0 when it answers
 * 200. It needs no tool but Node, so a slim image's HEALTHCHECK can use it.
 */
async function health (config: Config, path: '/healthz' | '/readyz', io: Io): Promise<number> {
  if (config.port === 0) throw new UsageError('health needs the port the server listens on: PORT is 0 (any free port)')
  // An unspecified bind address accepts connections on loopback.
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${config.port}${path}`
  let answer: Response
  try {
    answer = await fetch(url, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) })
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name
    io.stderr(`petstore: GET ${url} failed: ${cause}\n`)
    return 1
  }
  const body = await answer.text()
  if (answer.status !== 200) {
    let message = body.slice(0, 300)
    try { message = String((JSON.parse(body) as { message?: unknown }).message ?? message) } catch { /* not JSON: shown as it came */ }
    io.stderr(`petstore: GET ${url} answered ${answer.status}: ${message}\n`)
    return 1
  }
  io.stdout(`${body}\n`)
  return 0
}

async function run (argv: string[], io: Io, clock: Clock): Promise<number> {
  const [command, ...args] = argv
  if (command === undefined) {
    // A usage error: the usage is a message, so it goes to stderr (stdout stays for machine output).
    io.stderr(USAGE)
    return 2
  }
  // -v as node and npm spell it, -V as commander-based CLIs do: nothing else here takes either.
  if (command === '--version' || command === '-v' || command === '-V') {
    io.stdout(`${VERSION}\n`)
    return 0
  }
  // Before the configuration is read: help works whatever the environment holds.
  const help = helpFor(argv)
  if (help !== null) {
    io.stdout(help)
    return 0
  }
  const config = loadConfig(io.env)
  switch (command) {
    case 'serve': {
      const { values } = parse(args, { 'seed-demo': { type: 'boolean' }, workers: { type: 'string' } }, 0)
      const workers = positiveInteger('--workers', values.workers) ?? 1
      const seedDemo = values['seed-demo'] === true
      const [{ isWorker, leaveCluster, runPrimary, WORKERS_NEED_REDIS }, { Lifecycle }, { closeOnSignals, startServer }, { stopTracing }] = await Promise.all([
        import('../cluster.js'), import('../lifecycle.js'), import('../server.js'), import('../tracing/spans.js')
      ])
      if (workers > 1 && config.redis === null) throw new ConfigError(WORKERS_NEED_REDIS)
      if (workers > 1 && !isWorker()) {
        // The primary serves no request: its workers trace (each started its own tracing), so it lets go of its own
        // (the export thread and its exporter) before it forks.
        await stopTracing()
        return await runPrimary(config, workers, { seedDemo, command: io.command })
      }
      // A single instance, or one worker of a cluster (the primary has migrated and seeded already).
      const lifecycle = new Lifecycle()
      const app = await startServer(config, { seedDemo: seedDemo && !isWorker(), lifecycle, command: io.command }).catch((error: unknown) => {
        // A worker that cannot start lets go of the IPC channel, so it exits with its code for the primary to see.
        if (isWorker()) leaveCluster()
        throw error
      })
      await closeOnSignals(app, lifecycle, { drainMs: config.shutdownDrainMs, deadlineMs: config.shutdownTimeoutMs })
      // The spans of the last requests leave before the process does (nothing to do when it does not trace).
      await stopTracing().catch((error: unknown) => { app.log.warn({ err: error }, 'tracing did not stop cleanly: the last spans may be lost') })
      if (isWorker()) leaveCluster()
      return 0
    }
    case 'health': {
      const { values } = parse(args, { ready: { type: 'boolean' } }, 0)
      return await health(config, values.ready === true ? '/readyz' : '/healthz', io)
    }
    case 'migrate': {
      const { values } = parse(args, { restored: { type: 'boolean' } }, 0)
      const store = await openStore(config)
      const { applied, from, to, backup, epoch, objectsUnchecked } = await migrateStore(store, config.databaseUrl, { restored: values.restored === true }).finally(() => store.close())
      if (objectsUnchecked !== undefined) io.stderr(`The schema's objects were not compared with what the migrations make: ${objectsUnchecked}.\n`)
      if (applied === 0) io.stderr(`The store schema is up to date (version ${to}).\n`)
      else io.stderr(`Applied ${applied} migration(s): version ${from} to ${to}.${backup === null ? '' : ` The file as it was is at ${backup}.`}\n`)
      const notice = epochNotice(epoch)
      if (notice !== null) io.stderr(`${notice}\n`)
      return 0
    }
    case 'backup':
      return await (await import('./backup.js')).backupCommand(args, config, io)
    case 'restore':
      return await (await import('./backup.js')).restoreCommand(args, config, io, clock)
    case 'import': {
      // The streamed import and its progress line live in ./import.ts.
      const { values, positionals } = parse(args, { progress: { type: 'boolean' }, 'no-progress': { type: 'boolean' } }, 1)
      if (values.progress === true && values['no-progress'] === true) throw new UsageError('use either --progress or --no-progress')
      const showProgress = values.progress === true || (values['no-progress'] !== true && io.stderrIsTTY === true)
      const { importFile } = await import('./import.js')
      return await importFile(positionals[0] as string, io, (work) => withStore(config, 'write', work), { showProgress, clock })
    }
    case 'keys':
      return await keysCommand(args, config, io, clock)
    case 'inventory':
      return await inventory(args, config, io, clock)
    case 'webhooks':
      return await webhooksCommand(args, config, io, clock)
    default:
      throw new UsageError(`unknown command "${command}"`)
  }
}

/**
 * Runs one CLI invocation; returns the process exit code. `clock` is where every command reads the time (a key's
 * creation and expiry, the ages and states shown, an import's ledger time, the name a restore keeps the old file
 * under): the system's, unless a test passes its own.
 */
export async function main (argv: string[], io: Io = defaultIo, clock: Clock = Date.now): Promise<number> {
  try {
    return await run(argv, io, clock)
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`petstore: ${error.message}\nRun "${io.command} help" for usage.\n`)
      return 2
    }
    if (error instanceof ConfigError) {
      io.stderr(`petstore: invalid configuration: ${error.message}\n`)
      return 2
    }
    if (error instanceof SchemaError) {
      io.stderr(`petstore: ${error.describe(io.command)}\n`)
      return 2
    }
    if (error instanceof KeyInputError) {
      io.stderr(`petstore: ${error.describe(KEY_FLAGS)}\n`)
      return 2
    }
    if (error instanceof RotationError) {
      io.stderr(`petstore: cannot rotate: ${error.message}\n`)
      return 1
    }
    io.stderr(`petstore: ${(error as Error).message}\n`)
    return 1
  }
}
