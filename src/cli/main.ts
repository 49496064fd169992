/**
 * The operator CLI: `petstore <command>`. A thin layer over the same domain and store as the server.
 * Machine output goes to stdout, messages and errors to stderr. Exit codes: 0 ok, 1 failed, 2 usage or
 * configuration error.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { ConfigError, loadConfig, type Config } from '../config.js'
import { isRfc3339DateTime } from '../datetime.js'
import { isBanned } from '../access/bans.js'
import { stockHistory } from '../domain/inventory.js'
import { createKey, KeyInputError, MAX_KEY_LIFETIME_MS, revokeKey, rotateKey, RotationError, unbanKey } from '../access/keys.js'
import { ImportError } from '../domain/import.js'
import { isExpired, KEY_SCOPES, limitsOf, PLANS, type ApiKeyRecord, type KeyScope, type Plan, type PlanTable } from '../domain/model.js'
import { isWorker, leaveCluster, runPrimary, WORKERS_NEED_REDIS } from '../cluster.js'
import { Lifecycle } from '../lifecycle.js'
import { closeOnSignals, startServer } from '../server.js'
import { stopTracing } from '../tracing/spans.js'
import { importFile } from './import.js'
import { parseInt64 } from '../int64.js'
import { SchemaError } from '../store/migrations.js'
import { migrateStore, openStore, readyForUse } from '../store/open.js'
import type { Store } from '../store/types.js'
import { historyJson, historyTable } from './history.js'
import { defaultIo, type Io } from './io.js'
import { table } from './table.js'

const USAGE = `Usage: petstore <command> [options]

Commands:
  serve [--seed-demo] [--workers N]
                                 Run the HTTP API. A SQLite file is migrated at start (after a backup
                                 copy); PostgreSQL must be migrated first (petstore migrate). --seed-demo
                                 imports the demo data set when the store is empty. --workers runs N
                                 processes on the port (node:cluster); above 1 it needs REDIS_URL.
  health [--ready]               Ask the server running on this host (HOST, PORT) whether it is alive
                                 (GET /healthz) or, with --ready, ready to serve (GET /readyz); exit 0
                                 when it answers 200, 1 otherwise. For container health checks.
  migrate                        Bring the store's schema up to this release's (the only command that
                                 changes a schema; a SQLite file is copied next to itself first).
  import FILE [--progress | --no-progress]
                                 Load pets and orders from a JSON file (all or nothing). The file is
                                 streamed; progress shows on stderr when it is a terminal (--progress:
                                 always, --no-progress: never).
  keys create --plan PLAN [--name TEXT] [--per-minute N --per-day N] [--scope read|write]
              [--expires-in DURATION | --expires-at TIME] [--json]
                                 Create an API key; prints the key once. PLAN: ${PLANS.join(', ')}.
                                 Enterprise keys need --per-minute and --per-day. --scope read: read
                                 operations only; write (the default): every operation. DURATION: a
                                 number and s, m, h or d (90d, 12h); TIME: RFC 3339 (2027-03-01T00:00:00Z).
  keys rotate ID [--overlap DURATION] [--expires-in DURATION | --expires-at TIME] [--json]
                                 Replace a key: prints a new key with the same name, plan, limits, scope
                                 and quota; the old key keeps working for the overlap (default 24h, 0:
                                 none), then only the new one does. The new key never expires unless
                                 given --expires-in or --expires-at (after the overlap).
  inventory history PETID [--json] [--limit N]
                                 The stock ledger of one pet: every change with time, reason, previous
                                 and new quantity, the status an import set, key id, request id and
                                 note (newest N, default 100).
  keys list [--json]             List keys with scope, limits, expiry, last use, last use of a deprecated
                                 operation, revocation and bans (never the keys themselves).
  keys revoke ID                 Revoke a key.
  keys unban ID                  Lift a key's ban (bans are imposed on keys that keep sending after 429).
  webhooks list [--json]         List every webhook subscription: id, quota, URL, state, why disabled,
                                 undelivered events and the age of the oldest (never the secrets).
  webhooks disable ID [--reason TEXT]
  webhooks enable ID             Stop or resume deliveries to a subscription (enabling delivers what
                                 was committed meanwhile, and starts its failure run over).

Configuration comes from the environment (see README): DATABASE_URL, PORT, HOST, LOG_LEVEL, PETSTORE_ENV, ...
`

class UsageError extends Error {}

/** How `keys create` names the fields of a key. */
const KEY_FLAGS = { perMinute: '--per-minute', perDay: '--per-day', name: '--name', expiresAt: '--expires-in/--expires-at', overlap: '--overlap' } as const

const DURATION_UNITS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** A duration such as 90d, 12h, 30m or 45s, in milliseconds (at most ten years); 0 only where `zero` allows it. */
function duration (flag: string, text: string, zero: boolean): number {
  if (zero && text === '0') return 0
  const match = /^([0-9]{1,6})([smhd])$/.exec(text)
  const ms = match === null ? Number.NaN : Number(match[1]) * (DURATION_UNITS[match[2] as string] as number)
  if (Number.isNaN(ms) || ms > MAX_KEY_LIFETIME_MS || (ms === 0 && !zero)) {
    throw new UsageError(`${flag} must be a ${zero ? '' : 'positive '}number followed by s, m, h or d (e.g. 90d, 12h), at most 3650d`)
  }
  return ms
}

/** When a key made now should expire, from --expires-in or --expires-at (RFC 3339, with a time zone); null: never. */
function expiry (values: Record<string, string | boolean | undefined>, now: Date): Date | null {
  const inText = values['expires-in']
  const atText = values['expires-at']
  if (inText !== undefined && atText !== undefined) throw new UsageError('use either --expires-in or --expires-at')
  if (typeof inText === 'string') return new Date(now.getTime() + duration('--expires-in', inText, false))
  if (typeof atText !== 'string') return null
  const at = isRfc3339DateTime(atText) ? new Date(atText) : new Date(Number.NaN)
  if (Number.isNaN(at.getTime())) throw new UsageError('--expires-at must be an RFC 3339 time with a time zone, e.g. 2027-03-01T00:00:00Z')
  // Whether it lies ahead, and not too far, is the key rules' to say (KeyInputError, named by KEY_FLAGS).
  return at
}

const EXPIRY_OPTIONS = { 'expires-in': { type: 'string' }, 'expires-at': { type: 'string' } } as const

function parse (args: string[], options: ParseArgsConfig['options'], positionals: number): { values: Record<string, string | boolean | undefined>, positionals: string[] } {
  let parsed
  try {
    parsed = parseArgs({ args, options, allowPositionals: positionals > 0, strict: true, tokens: true })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
  // parseArgs keeps the last of a repeated option: `--plan free --plan pro` would quietly mean pro.
  const seen = new Set<string>()
  for (const token of parsed.tokens as ReadonlyArray<{ kind: string, name?: string }>) {
    if (token.kind !== 'option' || token.name === undefined) continue
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once`)
    seen.add(token.name)
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 0 ? 'this command takes no arguments' : `expected ${positionals} argument(s)`)
  }
  return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals }
}

function positiveInteger (flag: string, text: string | boolean | undefined): number | null {
  if (text === undefined) return null
  if (typeof text !== 'string' || !/^[1-9][0-9]{0,9}$/.test(text) || Number(text) > 1_000_000_000) {
    throw new UsageError(`${flag} must be an integer from 1 to 1000000000`)
  }
  return Number(text)
}

/**
 * Runs `work` on the configured store. It never changes the schema of a store that has one (only `petstore
 * migrate` does): a store behind this release or ahead of it (for writes) is refused with a SchemaError.
 */
async function withStore<T> (config: Config, access: 'read' | 'write', work: (store: Store) => Promise<T>): Promise<T> {
  const store = openStore(config)
  try {
    await readyForUse(store, access)
    return await work(store)
  } finally {
    await store.close()
  }
}

function keyJson (key: ApiKeyRecord, plans: PlanTable, now = Date.now()): Record<string, unknown> {
  const limits = limitsOf(key, plans)
  const banned = isBanned(key.ban, now)
  return {
    id: key.id,
    name: key.name,
    plan: key.plan,
    perMinute: limits?.perMinute ?? null,
    perDay: limits?.perDay ?? null,
    scope: key.scope,
    createdAt: key.createdAt.toISOString(),
    expiresAt: key.expiresAt?.toISOString() ?? null,
    expired: isExpired(key, now),
    revokedAt: key.revokedAt?.toISOString() ?? null,
    replacedBy: key.replacedBy,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
    lastDeprecatedUseAt: key.lastDeprecatedUseAt?.toISOString() ?? null,
    /** The end of the ban in force, or null. */
    bannedUntil: banned ? key.ban?.until.toISOString() ?? null : null,
    lastBan: key.ban === null ? null : { since: key.ban.since.toISOString(), until: key.ban.until.toISOString(), seconds: key.ban.seconds }
  }
}

function keyTable (keys: ApiKeyRecord[], plans: PlanTable): string {
  const header = ['ID', 'NAME', 'PLAN', 'SCOPE', 'PER MINUTE', 'PER DAY', 'CREATED', 'EXPIRES', 'LAST USED', 'LAST DEPRECATED USE', 'REVOKED',
    'REPLACED BY', 'BANNED UNTIL']
  const rows = keys.map((k) => {
    const j = keyJson(k, plans)
    const expires = j.expiresAt === null ? '-' : `${String(j.expiresAt)}${j.expired === true ? ' (expired)' : ''}`
    return [k.id, k.name ?? '-', k.plan, k.scope, String(j.perMinute ?? '-'), String(j.perDay ?? '-'), String(j.createdAt), expires,
      String(j.lastUsedAt ?? '-'), String(j.lastDeprecatedUseAt ?? '-'), String(j.revokedAt ?? '-'), k.replacedBy ?? '-', String(j.bannedUntil ?? '-')]
  })
  return table(header, rows)
}

/** `keys revoke ID` and `keys unban ID`: one store change by key id; exit 1 when no key has the id. */
async function changeKey (
  args: string[], config: Config, io: Io,
  change: (store: Store, id: string) => Promise<boolean>, done: (id: string, cacheSeconds: number) => string
): Promise<number> {
  const { positionals } = parse(args, {}, 1)
  const id = positionals[0] as string
  if (!await withStore(config, 'write', (store) => change(store, id))) {
    io.stderr(`petstore: no key with id ${id}\n`)
    return 1
  }
  io.stderr(done(id, config.authCacheTtlMs / 1000) + '\n')
  return 0
}

async function keys (args: string[], config: Config, io: Io): Promise<number> {
  const [sub, ...rest] = args
  switch (sub) {
    case 'create': {
      const { values } = parse(rest, {
        plan: { type: 'string' }, name: { type: 'string' }, 'per-minute': { type: 'string' }, 'per-day': { type: 'string' }, json: { type: 'boolean' },
        scope: { type: 'string' }, ...EXPIRY_OPTIONS
      }, 0)
      const plan = values.plan
      if (typeof plan !== 'string') throw new UsageError(`--plan is required: one of ${PLANS.join(', ')}`)
      if (!(PLANS as readonly string[]).includes(plan)) {
        throw new UsageError(`unknown plan "${plan}": use one of ${PLANS.join(', ')}`)
      }
      const scope = values.scope ?? 'write'
      if (typeof scope !== 'string' || !(KEY_SCOPES as readonly string[]).includes(scope)) throw new UsageError(`--scope must be one of ${KEY_SCOPES.join(', ')}`)
      const now = new Date()
      const input = {
        plan: plan as Plan,
        name: typeof values.name === 'string' ? values.name : null,
        perMinute: positiveInteger('--per-minute', values['per-minute']),
        perDay: positiveInteger('--per-day', values['per-day']),
        scope: scope as KeyScope,
        expiresAt: expiry(values, now)
      }
      const { record, key } = await withStore(config, 'write', (store) => createKey(store, config.environment, input, now))
      io.stdout(values.json === true ? JSON.stringify({ ...keyJson(record, config.rateLimits.plans), key }) + '\n' : key + '\n')
      const expires = record.expiresAt === null ? '' : `, expires ${record.expiresAt.toISOString()}`
      io.stderr(`Created ${record.id} (${record.plan}, scope ${record.scope}${expires}). The key is shown only now: store it safely.\n`)
      return 0
    }
    case 'rotate': {
      const { values, positionals } = parse(rest, { overlap: { type: 'string' }, json: { type: 'boolean' }, ...EXPIRY_OPTIONS }, 1)
      const id = positionals[0] as string
      const now = new Date()
      const overlapMs = typeof values.overlap === 'string' ? duration('--overlap', values.overlap, true) : 86_400_000
      const expiresAt = expiry(values, now)
      const rotated = await withStore(config, 'write', (store) => rotateKey(store, config.environment, id, { overlapMs, expiresAt }, now))
      const { record, key, previousEndsAt } = rotated
      io.stdout(values.json === true
        ? JSON.stringify({ ...keyJson(record, config.rateLimits.plans), key, replaces: id, replacedKeyExpiresAt: previousEndsAt.toISOString() }) + '\n'
        : key + '\n')
      io.stderr(`Created ${record.id} to replace ${id} (same plan, limits, scope and quota). ${id} stops working at ` +
        `${previousEndsAt.toISOString()}${overlapMs === 0 ? ' (now; running servers refuse it within ' + String(config.authCacheTtlMs / 1000) + ' s)' : ''}. ` +
        'The key is shown only now: store it safely.\n')
      return 0
    }
    case 'list': {
      const { values } = parse(rest, { json: { type: 'boolean' } }, 0)
      const list = await withStore(config, 'read', (store) => store.listApiKeys())
      io.stdout(values.json === true ? JSON.stringify(list.map((k) => keyJson(k, config.rateLimits.plans))) + '\n' : keyTable(list, config.rateLimits.plans))
      return 0
    }
    case 'revoke':
      return await changeKey(rest, config, io, (store, id) => revokeKey(store, id),
        (id, seconds) => `Revoked ${id}. Running servers stop accepting it within ${seconds} s.`)
    case 'unban':
      return await changeKey(rest, config, io, (store, id) => unbanKey(store, id),
        (id, seconds) => `Lifted any ban of ${id}. Running servers accept it again within ${seconds} s.`)
    default:
      throw new UsageError('keys needs a subcommand: create, list, rotate, revoke or unban')
  }
}

async function webhooksCommand (args: string[], config: Config, io: Io): Promise<number> {
  const [sub, ...rest] = args
  switch (sub) {
    case 'list': {
      const { values } = parse(rest, { json: { type: 'boolean' } }, 0)
      const now = Date.now()
      const [list, backlog] = await withStore(config, 'read', async (store) => await Promise.all([store.listWebhooks(null), store.webhookBacklog()]))
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
      const reason = typeof values.reason === 'string' ? values.reason : 'Disabled by the operator.'
      const updated = await withStore(config, 'write', (store) => store.updateWebhook(id, enabled ? { enabled } : { enabled, disabledReason: reason }, new Date()))
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

async function inventory (args: string[], config: Config, io: Io): Promise<number> {
  const [sub, ...rest] = args
  if (sub !== 'history') throw new UsageError('inventory needs a subcommand: history')
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

async function run (argv: string[], io: Io): Promise<number> {
  const [command, ...args] = argv
  if (command === undefined) {
    // A usage error: the usage is a message, so it goes to stderr (stdout stays for machine output).
    io.stderr(USAGE)
    return 2
  }
  if (command === 'help' || command === '--help' || command === '-h') {
    io.stdout(USAGE)
    return 0
  }
  const config = loadConfig(io.env)
  switch (command) {
    case 'serve': {
      const { values } = parse(args, { 'seed-demo': { type: 'boolean' }, workers: { type: 'string' } }, 0)
      const workers = positiveInteger('--workers', values.workers) ?? 1
      const seedDemo = values['seed-demo'] === true
      if (workers > 1 && config.redis === null) throw new ConfigError(WORKERS_NEED_REDIS)
      if (workers > 1 && !isWorker()) return await runPrimary(config, workers, { seedDemo })
      // A single instance, or one worker of a cluster (the primary has migrated and seeded already).
      const lifecycle = new Lifecycle()
      const app = await startServer(config, { seedDemo: seedDemo && !isWorker(), lifecycle }).catch((error: unknown) => {
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
      parse(args, {}, 0)
      const store = openStore(config)
      const { applied, from, to, backup } = await migrateStore(store, config.databaseUrl).finally(() => store.close())
      if (applied === 0) io.stderr(`The store schema is up to date (version ${to}).\n`)
      else io.stderr(`Applied ${applied} migration(s): version ${from} to ${to}.${backup === null ? '' : ` The file as it was is at ${backup}.`}\n`)
      return 0
    }
    case 'import': {
      // The streamed import and its progress line live in ./import.ts.
      const { values, positionals } = parse(args, { progress: { type: 'boolean' }, 'no-progress': { type: 'boolean' } }, 1)
      if (values.progress === true && values['no-progress'] === true) throw new UsageError('use either --progress or --no-progress')
      const showProgress = values.progress === true || (values['no-progress'] !== true && io.stderrIsTTY === true)
      return await importFile(positionals[0] as string, io, (work) => withStore(config, 'write', work), showProgress)
    }
    case 'keys':
      return await keys(args, config, io)
    case 'inventory':
      return await inventory(args, config, io)
    case 'webhooks':
      return await webhooksCommand(args, config, io)
    default:
      throw new UsageError(`unknown command "${command}"`)
  }
}

/** Runs one CLI invocation; returns the process exit code. */
export async function main (argv: string[], io: Io = defaultIo): Promise<number> {
  try {
    return await run(argv, io)
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`petstore: ${error.message}\nRun "petstore help" for usage.\n`)
      return 2
    }
    if (error instanceof ConfigError) {
      io.stderr(`petstore: invalid configuration: ${error.message}\n`)
      return 2
    }
    if (error instanceof ImportError) {
      io.stderr(`petstore: import rejected, nothing was imported: ${error.message}\n`)
      return 1
    }
    if (error instanceof SchemaError) {
      io.stderr(`petstore: ${error.message}\n`)
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
