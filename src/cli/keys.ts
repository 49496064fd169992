/**
 * `petstore keys ...`: issuing, rotating, listing, showing, finding, revoking and unbanning API keys, over the key
 * rules of src/access/keys.ts and the store. Usage (a quota's current rate-limit windows) is read from the shared
 * limiter when there is one (Redis); the in-process limiter counts inside the serving process, out of this command's
 * reach (docs/cli.md, "Keys on an incident"; docs/adr/0005-rate-limits-two-fixed-windows.md).
 */
import type { Config, RateLimitConfig } from '../config.js'
import { isRfc3339DateTime } from '../datetime.js'
import { isBanned } from '../access/bans.js'
import { createKey, hashKey, MAX_KEY_LIFETIME_MS, revokeKey, rotateKey, unbanKey } from '../access/keys.js'
import { keyUsage, type KeyUsage, type WindowUsage } from '../access/usage.js'
import { isExpired, limitsOf, type PlanTable } from '../domain/rules.js'
import { KEY_SCOPES, PLANS, type ApiKeyRecord, type Ban, type KeyScope, type Plan } from '../model.js'
import { printable } from '../domain/text.js'
import type { Store } from '../store/store.js'
import { parse, positiveInteger, UsageError, withStore, type Values } from './common.js'
import type { Clock, Io } from './io.js'
import { table } from './table.js'

/** How `keys create` names the fields of a key. */
export const KEY_FLAGS = { perMinute: '--per-minute', perDay: '--per-day', name: '--name', expiresAt: '--expires-in/--expires-at', overlap: '--overlap' } as const

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
function expiry (values: Values, now: Date): Date | null {
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

export type KeyStatus = 'active' | 'banned' | 'expired' | 'revoked'

/** What a key can do now: revoked and expired keys are refused; a banned key until its ban ends. */
function keyStatus (key: ApiKeyRecord, now: number): KeyStatus {
  if (key.revokedAt !== null) return 'revoked'
  if (isExpired(key, now)) return 'expired'
  return isBanned(key.ban, now) ? 'banned' : 'active'
}

function keyJson (key: ApiKeyRecord, plans: PlanTable, now: number): Record<string, unknown> {
  const limits = limitsOf(key, plans)
  const banned = isBanned(key.ban, now)
  return {
    id: key.id,
    name: key.name,
    plan: key.plan,
    perMinute: limits?.perMinute ?? null,
    perDay: limits?.perDay ?? null,
    scope: key.scope,
    status: keyStatus(key, now),
    createdAt: key.createdAt.toISOString(),
    expiresAt: key.expiresAt?.toISOString() ?? null,
    expired: isExpired(key, now),
    revokedAt: key.revokedAt?.toISOString() ?? null,
    replacedBy: key.replacedBy,
    quotaId: key.quotaId,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
    lastDeprecatedUseAt: key.lastDeprecatedUseAt?.toISOString() ?? null,
    /** The end of the ban in force, or null. */
    bannedUntil: banned ? key.ban?.until.toISOString() ?? null : null,
    lastBan: key.ban === null ? null : { since: key.ban.since.toISOString(), until: key.ban.until.toISOString(), seconds: key.ban.seconds }
  }
}

const windowJson = (window: WindowUsage): Record<string, unknown> => ({ used: window.used, limit: window.limit, resetAt: window.resetAt.toISOString() })

/** A key with its usage: `usage` null where it cannot be read (the in-process limiter, Redis away) or does not apply. */
function keyUsageJson (key: ApiKeyRecord, plans: PlanTable, usage: KeyUsage | null, now: number): Record<string, unknown> {
  return { ...keyJson(key, plans, now), usage: usage === null ? null : { minute: windowJson(usage.minute), day: windowJson(usage.day) } }
}

/** How a usage source answers: the usage of each key asked for, or why there is none. */
interface Usages {
  of: (key: ApiKeyRecord) => KeyUsage | null
  /** Why usage is unknown, or null when it was read. */
  unavailable: string | null
}

const IN_PROCESS = 'the in-process rate limiter (REDIS_URL is not set) counts inside the serving process, out of this command\'s reach; ' +
  'GET /v1/rate_limit with a key shows its own'

/** How long `keys list` and `keys show` wait for Redis before they list without usage. */
const USAGE_WAIT_MS = 2000

/**
 * The current windows of the keys that can still be used (a revoked or expired key's quota is no longer spent), read
 * from the shared limiter's Redis without counting: from the same key prefix the servers count in.
 */
async function readUsages (config: Config, keys: readonly ApiKeyRecord[], now: number): Promise<Usages> {
  const limits: RateLimitConfig = config.rateLimits
  if (config.redis === null) return { of: () => null, unavailable: IN_PROCESS }
  const { connectLimiterRedis } = await import('../redis/connect.js')
  const { redis, check } = await connectLimiterRedis(config.redis, config.redisKeyPrefix, { check: 'ready', waitMs: USAGE_WAIT_MS })
  try {
    if (!check.usable) return { of: () => null, unavailable: `Redis at ${redis.where} cannot be reached (${check.reason})` }
    const live = keys.filter((key) => key.revokedAt === null && !isExpired(key, now))
    try {
      const read = new Map(await Promise.all(live.map(async (key) => [key.id, await keyUsage(redis.limiter, key, limits)] as const)))
      return { of: (key) => read.get(key.id) ?? null, unavailable: null }
    } catch (error) {
      return { of: () => null, unavailable: `Redis at ${redis.where} did not answer (${(error as Error).message})` }
    }
  } finally {
    redis.close()
  }
}

/** A count in at most four characters: exact below 10,000, then 10K, 250K, 1.2M, 1B. */
function compact (n: number): string {
  return n < 10_000 ? String(n) : new Intl.NumberFormat('en', { notation: 'compact', maximumSignificantDigits: 2 }).format(n)
}

/** "used/limit" for the table: "?" for what cannot be read, "-" for a key that can no longer spend. */
function usageCell (status: KeyStatus, usage: KeyUsage | null, limit: number | undefined, window: 'minute' | 'day'): string {
  if (status === 'revoked' || status === 'expired' || limit === undefined) return '-'
  return usage === null ? `?/${compact(limit)}` : `${compact(usage[window].used)}/${compact(usage[window].limit)}`
}

/** How long ago: "12s ago", "5m ago", "30h ago", "12d ago"; "never". */
function ago (at: Date | null, now: number): string {
  if (at === null) return 'never'
  const seconds = Math.max(0, Math.floor((now - at.getTime()) / 1000))
  if (seconds < 60) return `${seconds}s ago`
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`
  if (seconds < 172_800) return `${Math.floor(seconds / 3600)}h ago`
  return `${Math.floor(seconds / 86_400)}d ago`
}

/** The width `keys list` fits in: a terminal of 100 columns shows it without wrapping (--json has every field). */
const LIST_WIDTH = 100

/**
 * The keys as a table of at most LIST_WIDTH columns: the name gives way (cut) when the others need the room; the
 * other columns never exceed their widths (ids 20, plan 10, status 7, usage 9 with counts of at most four characters, last use 9).
 */
function keyTable (keys: readonly ApiKeyRecord[], plans: PlanTable, usages: Usages, now: number): string {
  const rows = keys.map((key) => {
    const status = keyStatus(key, now)
    const limits = limitsOf(key, plans) ?? undefined
    const usage = usages.of(key)
    return [key.id, key.name ?? '-', key.plan, key.scope, status, usageCell(status, usage, limits?.perMinute, 'minute'),
      usageCell(status, usage, limits?.perDay, 'day'), ago(key.lastUsedAt, now)]
  })
  return table(['ID', 'NAME', 'PLAN', 'SCOPE', 'STATUS', 'MINUTE', 'DAY', 'LAST USED'], rows, { width: LIST_WIDTH, shrink: 1 })
}

const iso = (at: Date | null, none: string): string => at === null ? none : at.toISOString()

/** A time ahead, roughly: "in 42 s", "in 17 min", "in 20 h 25 min". */
function inTime (at: Date, now: number): string {
  const seconds = Math.max(0, Math.ceil((at.getTime() - now) / 1000))
  if (seconds < 120) return `in ${seconds} s`
  const minutes = Math.floor(seconds / 60)
  return minutes < 120 ? `in ${minutes} min` : `in ${Math.floor(minutes / 60)} h ${minutes % 60} min`
}

function windowText (window: WindowUsage, now: number): string {
  return `${window.used} of ${window.limit} used, resets ${window.resetAt.toISOString()} (${inTime(window.resetAt, now)})`
}

function banText (ban: Ban, now: number): string {
  const until = ban.until.toISOString()
  return isBanned(ban, now) ? `until ${until} (${ban.seconds} s, since ${ban.since.toISOString()})` : `none (the last ended ${until})`
}

/** One key in full, one field a line; with `usages`, its quota's current windows too. */
function keyDetails (key: ApiKeyRecord, plans: PlanTable, now: number, usages?: Usages): string {
  const limits = limitsOf(key, plans)
  const ban = key.ban
  const usage = usages?.of(key) ?? null
  const status = keyStatus(key, now)
  const fields: Array<[string, string]> = [
    ['id', key.id],
    ['name', key.name ?? '-'],
    ['plan', limits === null ? key.plan : `${key.plan} (${limits.perMinute} a minute, ${limits.perDay} a day)`],
    ['scope', key.scope],
    ['status', status],
    ['created', key.createdAt.toISOString()],
    ['expires', iso(key.expiresAt, 'never')],
    ['revoked', iso(key.revokedAt, '-')],
    ['replaced by', key.replacedBy ?? '-'],
    ['quota', key.quotaId === key.id ? 'its own' : `${key.quotaId}'s (shared by rotation)`],
    ['last used', iso(key.lastUsedAt, 'never')],
    ['last deprecated use', iso(key.lastDeprecatedUseAt, 'never')],
    ['ban', ban === null ? 'never banned' : banText(ban, now)]
  ]
  if (usages !== undefined && status !== 'revoked' && status !== 'expired') {
    if (usage === null) {
      fields.push(['usage', `unknown: ${String(usages.unavailable)}`])
    } else {
      fields.push(['this minute', windowText(usage.minute, now)])
      fields.push(['today', windowText(usage.day, now)])
    }
  }
  return fields.map(([name, value]) => `${`${name}:`.padEnd(21)}${printable(value)}`).join('\n') + '\n'
}

/**
 * How much of standard input `keys find` reads: a key is under 100 bytes, so this is room for any key with blanks
 * around it, and a log file or an endless stream piped in by mistake is refused without being read whole.
 */
const KEY_INPUT_MAX_BYTES = 4096

/** The key text read for `keys find`: surrounding blanks (a newline) and a pasted "Bearer " go; one word must be left. */
function keyText (raw: string, command: string): string {
  if (Buffer.byteLength(raw) > KEY_INPUT_MAX_BYTES) {
    throw new UsageError(`standard input holds more than ${KEY_INPUT_MAX_BYTES} bytes: give one key`)
  }
  const text = raw.trim().replace(/^Bearer\s+/i, '')
  if (text === '') throw new UsageError(`no key on standard input: pipe it in (${command} keys find < leaked.txt) or type it when asked`)
  if (/\s/.test(text)) throw new UsageError('standard input holds more than one word: give one key')
  return text
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

export async function keysCommand (args: string[], config: Config, io: Io, clock: Clock): Promise<number> {
  const [sub, ...rest] = args
  const plans = config.rateLimits.plans
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
      const now = new Date(clock())
      const input = {
        plan: plan as Plan,
        name: typeof values.name === 'string' ? values.name : null,
        perMinute: positiveInteger('--per-minute', values['per-minute']),
        perDay: positiveInteger('--per-day', values['per-day']),
        scope: scope as KeyScope,
        expiresAt: expiry(values, now)
      }
      const { record, key } = await withStore(config, 'write', (store) => createKey(store, config.environment, input, now))
      io.stdout(values.json === true ? JSON.stringify({ ...keyJson(record, plans, now.getTime()), key }) + '\n' : key + '\n')
      const expires = record.expiresAt === null ? '' : `, expires ${record.expiresAt.toISOString()}`
      io.stderr(`Created ${record.id} (${record.plan}, scope ${record.scope}${expires}). The key is shown only now: store it safely.\n`)
      return 0
    }
    case 'rotate': {
      const { values, positionals } = parse(rest, { overlap: { type: 'string' }, json: { type: 'boolean' }, ...EXPIRY_OPTIONS }, 1)
      const id = positionals[0] as string
      const now = new Date(clock())
      const overlapMs = typeof values.overlap === 'string' ? duration('--overlap', values.overlap, true) : 86_400_000
      const expiresAt = expiry(values, now)
      const rotated = await withStore(config, 'write', (store) => rotateKey(store, config.environment, id, { overlapMs, expiresAt }, now))
      const { record, key, previousEndsAt } = rotated
      io.stdout(values.json === true
        ? JSON.stringify({ ...keyJson(record, plans, now.getTime()), key, replaces: id, replacedKeyExpiresAt: previousEndsAt.toISOString() }) + '\n'
        : key + '\n')
      io.stderr(`Created ${record.id} to replace ${id} (same plan, limits, scope and quota). ${id} stops working at ` +
        `${previousEndsAt.toISOString()}${overlapMs === 0 ? ' (now; running servers refuse it within ' + String(config.authCacheTtlMs / 1000) + ' s)' : ''}. ` +
        'The key is shown only now: store it safely.\n')
      return 0
    }
    case 'list': {
      const { values } = parse(rest, { json: { type: 'boolean' } }, 0)
      const list = await withStore(config, 'read', (store) => store.keys.listApiKeys())
      const now = clock()
      const usages = await readUsages(config, list, now)
      io.stdout(values.json === true
        ? JSON.stringify(list.map((key) => keyUsageJson(key, plans, usages.of(key), now))) + '\n'
        : keyTable(list, plans, usages, now))
      if (usages.unavailable !== null && list.length > 0) io.stderr(`Usage unknown (?): ${usages.unavailable}.\n`)
      return 0
    }
    case 'show': {
      const { values, positionals } = parse(rest, { json: { type: 'boolean' } }, 1)
      const id = positionals[0] as string
      const key = await withStore(config, 'read', async (store) => (await store.keys.listApiKeys()).find((k) => k.id === id) ?? null)
      if (key === null) {
        io.stderr(`petstore: no key with id ${id}\n`)
        return 1
      }
      const now = clock()
      const usages = await readUsages(config, [key], now)
      io.stdout(values.json === true ? JSON.stringify(keyUsageJson(key, plans, usages.of(key), now)) + '\n' : keyDetails(key, plans, now, usages))
      return 0
    }
    case 'find': {
      // An argument may be the key itself: refused without repeating it (parse's messages quote what they refuse).
      if (rest.some((arg) => arg !== '--json')) {
        throw new UsageError('keys find takes the key on standard input, never as an argument (shell history and process lists keep arguments)')
      }
      const { values } = parse(rest, { json: { type: 'boolean' } }, 0)
      const text = keyText(await io.readSecret('Key (not shown as you type): ', KEY_INPUT_MAX_BYTES), io.command)
      const key = await withStore(config, 'read', (store) => store.keys.findApiKeyByHash(hashKey(text)))
      if (key === null) {
        io.stderr('petstore: no key of this store matches (a key of another deployment, or not a key)\n')
        return 1
      }
      const now = clock()
      io.stdout(values.json === true ? JSON.stringify(keyJson(key, plans, now)) + '\n' : keyDetails(key, plans, now))
      const status = keyStatus(key, now)
      if (status === 'active' || status === 'banned') {
        io.stderr(`To stop it working: ${io.command} keys revoke ${key.id}, or ${io.command} keys rotate ${key.id} --overlap 0 to issue its replacement.\n`)
      }
      return 0
    }
    case 'revoke':
      return await changeKey(rest, config, io, (store, id) => revokeKey(store, id, new Date(clock())),
        (id, seconds) => `Revoked ${id}. Running servers stop accepting it within ${seconds} s.`)
    case 'unban':
      return await changeKey(rest, config, io, (store, id) => unbanKey(store, id, new Date(clock())),
        (id, seconds) => `Lifted any ban of ${id}. Running servers accept it again within ${seconds} s.`)
    default:
      throw new UsageError('keys needs a subcommand: create, list, show, find, rotate, revoke or unban')
  }
}
