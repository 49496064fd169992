/**
 * The CLI's usage texts: one entry per command, from which both `petstore help` (every command) and a command's own
 * `--help` are made, so the two cannot disagree.
 */
import { PLANS } from '../model.js'
import { UsageError } from './common.js'

interface CommandHelp {
  /** The command and its arguments, as typed (lines after the first are continuations). */
  readonly synopsis: string
  /** What it does, in lines of at most 72 characters. */
  readonly text: string
}

const COMMANDS: ReadonlyArray<readonly [name: string, help: CommandHelp]> = [
  ['serve', {
    synopsis: 'serve [--seed-demo] [--workers N]',
    text: `Run the HTTP API. A SQLite file is migrated at start (after a backup
copy); PostgreSQL must be migrated first (petstore migrate). --seed-demo
imports the demo data set when the store is empty. --workers runs N
processes on the port (node:cluster); above 1 it needs REDIS_URL.`
  }],
  ['health', {
    synopsis: 'health [--ready]',
    text: `Ask the server running on this host (HOST, PORT) whether it is alive
(GET /healthz) or, with --ready, ready to serve (GET /readyz); exit 0
when it answers 200, 1 otherwise. For container health checks.`
  }],
  ['migrate', {
    synopsis: 'migrate [--restored]',
    text: `Bring the store's schema up to this release's (the only command that
changes a schema; a SQLite file is copied next to itself first), and
start a new store epoch when the store was restored (detected; with
--restored, in any case: run it once after a restore by other means,
before the service starts). A store holding a table, index, trigger or
view its migrations did not make is refused, naming it (exit 2).`
  }],
  ['backup', {
    synopsis: 'backup FILE [--force] [--json]',
    text: `Copy the SQLite store to FILE while the service runs (SQLite's online
backup), check the copy (integrity check, schema version, schema objects
exactly the migrations') and print what it holds. An existing FILE is refused unless --force. PostgreSQL
is backed up with pg_dump or point-in-time recovery (exit 2 here).`
  }],
  ['restore', {
    synopsis: 'restore FILE [--json]',
    text: `Replace the SQLite store with the backup FILE, once it passes the
same checks (an older schema is migrated at the next start; a newer one
is refused). Refused while a server or command has the store open; the
replaced file is kept beside it (<file>.before-restore-<time>).`
  }],
  ['import', {
    synopsis: 'import FILE [--progress | --no-progress]',
    text: `Load pets and orders from a JSON file (all or nothing). The file is
streamed; progress shows on stderr when it is a terminal (--progress:
always, --no-progress: never).`
  }],
  ['inventory history', {
    synopsis: 'inventory history PETID [--json] [--limit N]',
    text: `The stock ledger of one pet: every change with time, reason, previous
and new quantity, the status an import set, key id, request id,
reference and note (newest N, default 100). Reasons: arrival, return,
adjustment, sale, loss, recount, and import for imports.`
  }],
  ['inventory reorder-point', {
    synopsis: 'inventory reorder-point PETID [N | --clear] [--json]',
    text: `Set the reorder point of one pet to N (0 to 1,000,000,000), remove it
(--clear), or show it (neither). At or below its point a pet is low: one
inventory.low_stock event is recorded when its stock falls there (or a
point is set at or above it), none again until it has risen above it.`
  }],
  ['keys create', {
    synopsis: `keys create --plan PLAN [--name TEXT] [--per-minute N --per-day N] [--scope read|storefront|write]
            [--expires-in DURATION | --expires-at TIME] [--json]`,
    text: `Create an API key; prints the key once. PLAN: ${PLANS.join(', ')}.
Enterprise keys need --per-minute and --per-day. --scope read: read
operations only; storefront: reads, holds and orders, never a stock
write or webhooks; write (the default): every operation. DURATION: a
number and s, m, h or d (90d, 12h); TIME: RFC 3339 (2027-03-01T00:00:00Z).`
  }],
  ['keys rotate', {
    synopsis: 'keys rotate ID [--overlap DURATION] [--expires-in DURATION | --expires-at TIME] [--json]',
    text: `Replace a key: prints a new key with the same name, plan, limits, scope
and quota; the old key keeps working for the overlap (default 24h, 0:
none), then only the new one does. The new key never expires unless
given --expires-in or --expires-at (after the overlap).`
  }],
  ['keys list', {
    synopsis: 'keys list [--json]',
    text: `List keys in 100 columns: id, name, plan, scope, status, this minute's
and today's requests against the limits (with REDIS_URL; the in-process
limiter counts inside the server), last use. --json: every field (limits,
expiry, revocation, rotation, bans, usage with reset times). Never the keys.`
  }],
  ['keys show', {
    synopsis: 'keys show ID [--json]',
    text: `One key in full: every field of keys list --json, its quota's current
windows (used and limit per minute and per day, reset times; with
REDIS_URL) and its ban, if any.`
  }],
  ['keys find', {
    synopsis: 'keys find [--json]',
    text: `Which key is this? Reads the key from standard input (never from the
command line; on a terminal it is typed without echo), hashes it here as
the store does and prints the key's id, name, plan, scope and status,
never the key. Exit 1 when no key of this store matches.`
  }],
  ['keys revoke', {
    synopsis: 'keys revoke ID',
    text: 'Revoke a key.'
  }],
  ['keys unban', {
    synopsis: 'keys unban ID',
    text: 'Lift a key\'s ban (bans are imposed on keys that keep sending after 429).'
  }],
  ['webhooks list', {
    synopsis: 'webhooks list [--json]',
    text: `List every webhook subscription: id, quota, URL, state, why disabled,
undelivered events and the age of the oldest (never the secrets).`
  }],
  ['webhooks disable', {
    synopsis: 'webhooks disable ID [--reason TEXT]',
    text: `Stop deliveries to a subscription (events are still recorded for it,
and delivered once it is enabled again).`
  }],
  ['webhooks enable', {
    synopsis: 'webhooks enable ID',
    text: `Resume deliveries to a subscription (it delivers what was committed
meanwhile, and starts its failure run over).`
  }]
]

const HELP: ReadonlyMap<string, CommandHelp> = new Map(COMMANDS)

/** The commands that only group subcommands (`keys create`, ...). */
export const GROUPS: ReadonlySet<string> = new Set(COMMANDS.flatMap(([name]) => name.includes(' ') ? [name.split(' ')[0] as string] : []))

const COLUMN = 33

/** One command in the list: its synopsis, then its text in a column (beside a short synopsis, below a long one). */
function entry ({ synopsis, text }: CommandHelp): string {
  const lines = text.split('\n')
  const head = `  ${synopsis}`
  if (!synopsis.includes('\n') && head.length < COLUMN - 1) {
    return [head.padEnd(COLUMN) + lines[0], ...lines.slice(1).map((line) => ' '.repeat(COLUMN) + line)].join('\n') + '\n'
  }
  const synopsisLines = head.split('\n').map((line, i) => i === 0 ? line : `  ${line}`)
  return [...synopsisLines, ...lines.map((line) => ' '.repeat(COLUMN) + line)].join('\n') + '\n'
}

/** Every command: what `petstore help` prints. */
export const USAGE = `Usage: petstore <command> [options]

Commands:
${COMMANDS.map(([, help]) => entry(help)).join('')}
Every command takes --help. petstore --version (or -v) prints the release.
Configuration comes from the environment (see docs/configuration.md): DATABASE_URL, PORT, HOST, LOG_LEVEL, PETSTORE_ENV, ...
`

const PREFIX = 'Usage: petstore '

/** The help of one command (`keys list`), of a group (`keys`: its subcommands), or null when there is no such command. */
export function helpOf (name: string): string | null {
  const help = HELP.get(name)
  if (help !== undefined) return `${PREFIX}${help.synopsis.replaceAll('\n', `\n${' '.repeat(PREFIX.length)}`)}\n\n${help.text}\n`
  if (!GROUPS.has(name)) return null
  return `Usage: petstore ${name} <subcommand> [options]\n\nSubcommands:\n${COMMANDS.filter(([command]) => command.startsWith(`${name} `)).map(([, help]) => entry(help)).join('')}`
}

/**
 * The help asked for by `argv`, or null when none was: `--help` or `-h` anywhere before `--` (after the command
 * name, and the subcommand's for a group), or `petstore help COMMAND...`. The command named is the longest known one
 * the arguments begin with (`keys list --help`: keys list; `keys --help`: keys); an unknown one is a UsageError.
 */
export function helpFor (argv: readonly string[]): string | null {
  const end = argv.indexOf('--')
  const before = end === -1 ? argv : argv.slice(0, end)
  const words = argv[0] === 'help' ? argv.slice(1) : before.includes('--help') || before.includes('-h') ? before : null
  if (words === null) return null
  const [first, second] = words
  if (first === undefined) return USAGE
  const help = helpOf(`${first} ${second ?? ''}`) ?? helpOf(first)
  // An option before any command (petstore -h --json) asks for the whole usage; an unknown command is an error, as
  // without --help.
  if (help === null && !first.startsWith('-')) throw new UsageError(`unknown command "${first}"`)
  return help ?? USAGE
}
