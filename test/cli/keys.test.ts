import assert from 'node:assert/strict'
import { get as httpGet, type IncomingMessage } from 'node:http'
import { describe, test } from 'node:test'
import { WAIT_TIMEOUT_MS } from '../helpers/wait.js'
import { cliFor, EXIT_TIMEOUT_MS, inspectStore, startServe, within } from './run.js'

// The documented pattern of keys issued since checksums (docs/security.md): 43 base62 characters and a checksum.
const LIVE_KEY = /^psk_live_[0-9A-Za-z]{49}$/
const TEST_KEY = /^psk_test_[0-9A-Za-z]{49}$/
const KEY_ID = /^key_[0-9a-f]{16}$/
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

interface KeyJson {
  id: string
  name: string | null
  plan: string
  perMinute: number | null
  perDay: number | null
  scope: string
  status?: string
  quotaId?: string
  createdAt: string
  expiresAt: string | null
  expired: boolean
  revokedAt: string | null
  replacedBy: string | null
  lastUsedAt: string | null
  lastDeprecatedUseAt: string | null
  bannedUntil?: string | null
  lastBan?: { since: string, until: string, seconds: number } | null
  key?: string
  usage?: { minute: { used: number, limit: number, resetAt: string }, day: { used: number, limit: number, resetAt: string } } | null
}

describe('petstore keys create', () => {
  test('when a free key is created, then stdout holds only the live key and the exit code is 0', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'free'])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stdout, /\n$/)
    const key = res.stdout.slice(0, -1)
    assert.match(key, LIVE_KEY)
    assert.match(res.stderr, /^Created key_[0-9a-f]{16} \(free, scope write\)\. The key is shown only now/)
    assert.ok(!res.stderr.includes(key), 'the key must not be repeated on stderr')
  })

  test('when two keys are created, then they differ', async (t) => {
    const cli = cliFor(t)
    const first = await cli.run(['keys', 'create', '--plan', 'free'])
    const second = await cli.run(['keys', 'create', '--plan', 'free'])
    assert.equal(first.code, 0)
    assert.equal(second.code, 0)
    assert.notEqual(first.stdout, second.stdout)
  })

  test('when PETSTORE_ENV is staging, then the key has the psk_test_ prefix', async (t) => {
    const cli = cliFor(t, { PETSTORE_ENV: 'staging' })
    const res = await cli.run(['keys', 'create', '--plan', 'pro'])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stdout.trimEnd(), TEST_KEY)
  })

  test('when --json is given, then stdout is one JSON object with id, key, plan and the plan limits', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'free', '--name', 'ci bot', '--json'])
    assert.equal(res.code, 0, res.stderr)
    assert.equal(res.stdout.split('\n').length, 2, 'one line of JSON')
    const body = JSON.parse(res.stdout) as KeyJson
    assert.match(body.id, KEY_ID)
    assert.match(String(body.key), LIVE_KEY)
    assert.equal(body.plan, 'free')
    assert.equal(body.name, 'ci bot')
    assert.equal(body.perMinute, 60)
    assert.equal(body.perDay, 1000)
    assert.match(body.createdAt, ISO)
    assert.equal(body.revokedAt, null)
  })

  test('when an enterprise key is created with both limits, then it carries them', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '5000', '--per-day', '2000000', '--json'])
    assert.equal(res.code, 0, res.stderr)
    const body = JSON.parse(res.stdout) as KeyJson
    assert.equal(body.plan, 'enterprise')
    assert.equal(body.perMinute, 5000)
    assert.equal(body.perDay, 2000000)
  })

  test('when an enterprise key lacks --per-minute and --per-day, then it exits 2 with a message and creates nothing', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'enterprise'])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /enterprise keys need both --per-minute and --per-day/)
    const list = await cli.run(['keys', 'list', '--json'])
    assert.equal(list.stdout, '[]\n')
  })

  test('when an enterprise key has only --per-minute, then it exits 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '100'])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /--per-day/)
  })

  test('when --per-minute exceeds --per-day, then it exits 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '100', '--per-day', '50'])
    assert.equal(res.code, 2)
    assert.match(res.stderr, /--per-minute must not exceed --per-day/)
  })

  test('when a free key is given --per-minute, then it exits 2 because the plan sets its own limits', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'free', '--per-minute', '100'])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /enterprise keys only/)
  })

  test('when a limit is not a positive integer, then it exits 2 naming the flag', async (t) => {
    const cli = cliFor(t)
    for (const value of ['0', '-5', '1.5', 'many', '01']) {
      const res = await cli.run(['keys', 'create', '--plan', 'enterprise', `--per-minute=${value}`, '--per-day', '1000'])
      assert.equal(res.code, 2, `--per-minute ${value}`)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /--per-minute must be an integer from 1 to 1000000000/)
    }
  })

  test('when the plan is unknown, then it exits 2 listing the plans', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'gold'])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /unknown plan "gold"/)
    assert.match(res.stderr, /free, pro, business, enterprise/)
  })

  test('when --plan is missing, then it exits 2 saying it is required', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create'])
    assert.equal(res.code, 2)
    assert.match(res.stderr, /--plan is required/)
  })

  for (const args of [
    ['keys', 'create', '--plan', 'free', '--plan', 'pro'],
    ['keys', 'create', '--plan=free', '--plan=pro'],
    ['keys', 'create', '--plan', 'free', '--name', 'a', '--name', 'b'],
    ['keys', 'list', '--json', '--json'],
    ['inventory', 'history', '1', '--limit', '5', '--limit', '6']
  ]) {
    test(`when an option is repeated (${args.join(' ')}), then it exits 2 instead of taking the last one`, async (t) => {
      const cli = cliFor(t)
      const res = await cli.run(args)
      assert.equal(res.code, 2)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /^petstore: --(plan|name|json|limit) is given more than once\n/)
      assert.deepEqual(JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout), [], 'no key was created')
    })
  }

  for (const name of ['evil\u001b]0;owned\u0007', 'evil\u009b2J', 'gpj.\u202eexe', 'two\u2028lines', 'a\u2066b']) {
    test(`when a key name holds characters a terminal interprets (${JSON.stringify(name)}), then it exits 2 and creates nothing`, async (t) => {
      const cli = cliFor(t)
      const res = await cli.run(['keys', 'create', '--plan', 'free', '--name', name])
      assert.equal(res.code, 2)
      assert.match(res.stderr, /--name must hold no control characters, line separators or bidirectional formatting characters/)
      assert.deepEqual(JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout), [])
    })
  }

  test('when an unknown option is given, then it exits 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'free', '--colour', 'red'])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /--colour/)
  })
})

describe('petstore keys list', () => {
  test('when there are no keys, then --json prints an empty array', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'list', '--json'])
    assert.equal(res.code, 0, res.stderr)
    assert.equal(res.stdout, '[]\n')
  })

  test('when keys exist, then the table shows id, name, plan, scope, status, the limits and last use, but never the key', async (t) => {
    const cli = cliFor(t)
    const free = await cli.run(['keys', 'create', '--plan', 'free', '--name', 'reporting', '--json'])
    const enterprise = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '5000', '--per-day', '2000000', '--json'])
    const a = JSON.parse(free.stdout) as KeyJson
    const b = JSON.parse(enterprise.stdout) as KeyJson

    const res = await cli.run(['keys', 'list'])
    assert.equal(res.code, 0, res.stderr)
    const lines = res.stdout.trimEnd().split('\n')
    assert.equal(lines.length, 3)
    assert.deepEqual(lines[0]?.split(/\s{2,}/), ['ID', 'NAME', 'PLAN', 'SCOPE', 'STATUS', 'MINUTE', 'DAY', 'LAST USED'])
    // Without REDIS_URL the usage is the server's own: unknown here, and said so.
    assert.deepEqual(lines[1]?.split(/\s{2,}/), [a.id, 'reporting', 'free', 'write', 'active', '?/60', '?/1000', 'never'])
    assert.deepEqual(lines[2]?.split(/\s{2,}/), [b.id, '-', 'enterprise', 'write', 'active', '?/5000', '?/2M', 'never'])
    assert.match(res.stderr, /^Usage unknown \(\?\): the in-process rate limiter \(REDIS_URL is not set\) counts inside the serving process/)
    for (const key of [a.key, b.key]) {
      assert.ok(key !== undefined)
      assert.ok(!res.stdout.includes(key) && !res.stderr.includes(key), 'the table never shows a key')
      assert.ok(!res.stdout.includes(key.slice('psk_live_'.length)), 'not even without its prefix')
    }
  })

  test('when --json is given, then each key is listed with its limits and without the key itself', async (t) => {
    const cli = cliFor(t)
    const created = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const res = await cli.run(['keys', 'list', '--json'])
    assert.equal(res.code, 0, res.stderr)
    const list = JSON.parse(res.stdout) as KeyJson[]
    assert.deepEqual(list, [{
      id: created.id, name: null, plan: 'free', perMinute: 60, perDay: 1000, scope: 'write', status: 'active', createdAt: created.createdAt, expiresAt: null,
      expired: false, revokedAt: null, replacedBy: null, quotaId: created.id, lastUsedAt: null, lastDeprecatedUseAt: null, bannedUntil: null, lastBan: null,
      usage: null
    }])
    assert.ok(created.key !== undefined)
    assert.ok(!res.stdout.includes(created.key))
    assert.ok(!res.stdout.includes(created.key.slice('psk_live_'.length)))
  })
})

describe('petstore keys list (configured plans)', () => {
  test('when RATE_LIMIT_FREE overrides the free plan, then the list shows the configured limits', async (t) => {
    const cli = cliFor(t, { RATE_LIMIT_FREE: '10/100' })
    assert.equal((await cli.run(['keys', 'create', '--plan', 'free'])).code, 0)
    const list = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]
    assert.equal(list[0]?.perMinute, 10)
    assert.equal(list[0]?.perDay, 100)
  })
})

describe('petstore keys revoke', () => {
  test('when a key is revoked, then it exits 0 and the list shows revokedAt for that key only', async (t) => {
    const cli = cliFor(t)
    const kept = JSON.parse((await cli.run(['keys', 'create', '--plan', 'pro', '--json'])).stdout) as KeyJson
    const gone = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const before = Date.now()

    const res = await cli.run(['keys', 'revoke', gone.id])
    assert.equal(res.code, 0, res.stderr)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, new RegExp(`^Revoked ${gone.id}\\.`))

    const list = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]
    const byId = new Map(list.map((k) => [k.id, k]))
    assert.equal(byId.get(kept.id)?.revokedAt, null)
    const revokedAt = byId.get(gone.id)?.revokedAt
    assert.ok(typeof revokedAt === 'string', 'revokedAt is set')
    assert.match(revokedAt, ISO)
    assert.ok(Date.parse(revokedAt) >= before - 1000 && Date.parse(revokedAt) <= Date.now())
  })

  test('when a key is revoked twice, then both exit 0 and the first revocation time is kept', async (t) => {
    const cli = cliFor(t)
    const key = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    assert.equal((await cli.run(['keys', 'revoke', key.id])).code, 0)
    const first = (JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[])[0]?.revokedAt
    assert.equal((await cli.run(['keys', 'revoke', key.id])).code, 0)
    const second = (JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[])[0]?.revokedAt
    assert.ok(typeof first === 'string')
    assert.equal(second, first)
  })

  test('when the id is unknown, then it exits 1 with a message on stderr', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'revoke', 'key_0000000000000000'])
    assert.equal(res.code, 1)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /no key with id key_0000000000000000/)
  })

  test('when no id is given, then it exits 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'revoke'])
    assert.equal(res.code, 2)
    assert.match(res.stderr, /expected 1 argument/)
  })
})

describe('petstore keys', () => {
  test('when the subcommand is missing or unknown, then it exits 2 naming the subcommands', async (t) => {
    const cli = cliFor(t)
    for (const args of [['keys'], ['keys', 'delete']]) {
      const res = await cli.run(args)
      assert.equal(res.code, 2, args.join(' '))
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /create, list, show, find, rotate, revoke or unban/)
    }
  })
})

describe('petstore keys unban', () => {
  test('when a key is banned, then keys list shows the ban and keys unban lifts it', async (t) => {
    const cli = cliFor(t)
    const created = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const since = new Date()
    const until = new Date(since.getTime() + 900_000)
    await inspectStore(cli.db, (store) => store.keys.banApiKey(created.id, { since, until, seconds: 900 }))

    const listed = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]
    assert.equal(listed[0]?.bannedUntil, until.toISOString())
    assert.deepEqual(listed[0]?.lastBan, { since: since.toISOString(), until: until.toISOString(), seconds: 900 })
    const table = (await cli.run(['keys', 'list'])).stdout
    assert.match(table, new RegExp(`${created.id} .* banned `))
    const shown = await cli.run(['keys', 'show', created.id])
    assert.match(shown.stdout, new RegExp(`^ban: +until ${until.toISOString().replace(/\./g, '\\.')} \\(900 s, since `, 'm'))

    const res = await cli.run(['keys', 'unban', created.id])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stderr, /Lifted/)
    const after = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]
    assert.equal(after[0]?.bannedUntil, null)
    assert.equal(after[0]?.lastBan?.seconds, 900, 'the ban history is kept for the doubling of repeat bans')
  })

  test('when the id is unknown, then keys unban exits 1 with a message', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'unban', 'key_nope'])
    assert.equal(res.code, 1)
    assert.match(res.stderr, /no key with id key_nope/)
  })
})

describe('petstore keys create: scope and expiry', () => {
  test('when --scope read is given, then the key is read-only, and --scope write or none gives a write key', async (t) => {
    const cli = cliFor(t)
    const reader = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--scope', 'read', '--json'])).stdout) as KeyJson
    const writer = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--scope', 'write', '--json'])).stdout) as KeyJson
    const plain = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    assert.deepEqual([reader.scope, writer.scope, plain.scope], ['read', 'write', 'write'])
    const listed = new Map((JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]).map((k) => [k.id, k.scope]))
    assert.equal(listed.get(reader.id), 'read')
  })

  test('when --scope storefront is given, then the key has that scope, in the list and after a rotation', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'pro', '--scope', 'storefront', '--name', 'shop', '--json'])
    assert.equal(res.code, 0, res.stderr)
    const shop = JSON.parse(res.stdout) as KeyJson
    assert.equal(shop.scope, 'storefront')
    assert.match(res.stderr, /\(pro, scope storefront\)/)
    const rotated = await cli.run(['keys', 'rotate', shop.id, '--overlap', '0'])
    assert.equal(rotated.code, 0, rotated.stderr)
    const listed = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]
    assert.deepEqual(listed.map((k) => [k.name, k.scope]), [['shop', 'storefront'], ['shop', 'storefront']])
  })

  test('when the scope is unknown, then it exits 2 naming the scopes and creates nothing', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'free', '--scope', 'admin'])
    assert.equal(res.code, 2)
    assert.match(res.stderr, /--scope must be one of read, storefront, write/)
    assert.deepEqual(JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout), [])
  })

  test('when --expires-in 90d or 12h is given, then the key expires that long after its creation', async (t) => {
    const cli = cliFor(t)
    for (const [text, ms] of [['90d', 90 * 86_400_000], ['12h', 12 * 3_600_000], ['30m', 1_800_000]] as const) {
      const res = await cli.run(['keys', 'create', '--plan', 'free', '--expires-in', text, '--json'])
      assert.equal(res.code, 0, res.stderr)
      const body = JSON.parse(res.stdout) as KeyJson
      assert.equal(Date.parse(String(body.expiresAt)) - Date.parse(body.createdAt), ms, text)
      assert.match(res.stderr, /expires \d{4}-/)
    }
  })

  test('when --expires-at is an RFC 3339 time, then the key expires then, and keys list shows it', async (t) => {
    const cli = cliFor(t)
    const at = new Date(Date.now() + 400 * 86_400_000)
    at.setUTCHours(0, 0, 0, 0)
    const text = at.toISOString().replace('.000Z', '+01:00')
    const res = await cli.run(['keys', 'create', '--plan', 'pro', '--expires-at', text, '--json'])
    assert.equal(res.code, 0, res.stderr)
    const body = JSON.parse(res.stdout) as KeyJson
    const expected = new Date(at.getTime() - 3_600_000).toISOString()
    assert.equal(body.expiresAt, expected)
    const shown = (await cli.run(['keys', 'show', body.id])).stdout
    assert.match(shown, new RegExp(`^expires: +${expected.replace(/\./g, '\\.')}$`, 'm'))
  })

  for (const args of [
    ['--expires-in', '0d'], ['--expires-in', '90'], ['--expires-in', '1w'], ['--expires-in', '-5d'], ['--expires-in', '9999999d'],
    ['--expires-at', '2099-03-01'], ['--expires-at', '2099-03-01T00:00:00'], ['--expires-at', 'tomorrow'], ['--expires-at', '2020-01-01T00:00:00Z'],
    ['--expires-at', '2099-02-30T00:00:00Z'], ['--expires-in', '12h', '--expires-at', '2099-03-01T00:00:00Z'], ['--expires-in', '3651d'],
    ['--expires-at', '9999-12-31T23:59:59-23:59']
  ]) {
    test(`when the expiry is invalid (${args.join(' ')}), then it exits 2 and creates nothing`, async (t) => {
      const cli = cliFor(t)
      const res = await cli.run(['keys', 'create', '--plan', 'free', ...args])
      assert.equal(res.code, 2, res.stderr)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /--expires-(in|at)/)
      assert.deepEqual(JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout), [])
    })
  }
})

describe('petstore keys rotate', () => {
  test('when a key is rotated, then a new key with the same name, plan, limits and scope is printed and the old key ends after the overlap', async (t) => {
    const cli = cliFor(t)
    const old = JSON.parse((await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '50', '--per-day', '500', '--scope', 'read',
      '--name', 'sync', '--json'])).stdout) as KeyJson
    const before = Date.now()
    const res = await cli.run(['keys', 'rotate', old.id, '--overlap', '2h'])
    assert.equal(res.code, 0, res.stderr)
    const key = res.stdout.trimEnd()
    assert.match(key, LIVE_KEY)
    assert.notEqual(key, old.key)
    assert.match(res.stderr, new RegExp(`^Created key_[0-9a-f]{16} to replace ${old.id} .*${old.id} stops working at \\d{4}-`))
    const list = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]
    const previous = list.find((k) => k.id === old.id)
    const next = list.find((k) => k.id !== old.id)
    assert.ok(previous !== undefined && next !== undefined)
    assert.deepEqual([next.name, next.plan, next.perMinute, next.perDay, next.scope, next.expiresAt], ['sync', 'enterprise', 50, 500, 'read', null])
    assert.equal(previous.replacedBy, next.id)
    const ends = Date.parse(String(previous.expiresAt))
    assert.ok(ends >= before + 7_200_000 - 1000 && ends <= Date.now() + 7_200_000, String(previous.expiresAt))
  })

  test('when no overlap is given, then the old key works for 24 hours; with --json the answer names both', async (t) => {
    const cli = cliFor(t)
    const old = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const res = await cli.run(['keys', 'rotate', old.id, '--json', '--expires-in', '30d'])
    assert.equal(res.code, 0, res.stderr)
    const body = JSON.parse(res.stdout) as KeyJson & { replaces: string, replacedKeyExpiresAt: string }
    assert.equal(body.replaces, old.id)
    assert.match(String(body.key), LIVE_KEY)
    assert.equal(Date.parse(body.replacedKeyExpiresAt) - Date.parse(body.createdAt), 86_400_000)
    assert.equal(Date.parse(String(body.expiresAt)) - Date.parse(body.createdAt), 30 * 86_400_000)
  })

  test('when a key is rotated twice, or is unknown or revoked, then it exits 1 saying why and creates nothing', async (t) => {
    const cli = cliFor(t)
    const old = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    assert.equal((await cli.run(['keys', 'rotate', old.id])).code, 0)
    const again = await cli.run(['keys', 'rotate', old.id])
    assert.equal(again.code, 1)
    assert.equal(again.stdout, '')
    assert.match(again.stderr, /cannot rotate: the key was already rotated/)
    const unknown = await cli.run(['keys', 'rotate', 'key_0000000000000000'])
    assert.equal(unknown.code, 1)
    assert.match(unknown.stderr, /cannot rotate: no key has this id/)
    const revoked = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    await cli.run(['keys', 'revoke', revoked.id])
    const refused = await cli.run(['keys', 'rotate', revoked.id])
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /cannot rotate: the key is revoked or expired/)
    assert.equal((JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]).length, 3)
  })

  test('when the new key would expire before the overlap ends, then it exits 2 and rotates nothing', async (t) => {
    const cli = cliFor(t)
    const old = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const res = await cli.run(['keys', 'rotate', old.id, '--overlap', '30m', '--expires-in', '10m'])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /--expires-in\/--expires-at must lie after the overlap ends/)
    assert.equal((JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]).length, 1)
  })

  test('when the overlap is not a duration, then it exits 2', async (t) => {
    const cli = cliFor(t)
    const old = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const res = await cli.run(['keys', 'rotate', old.id, '--overlap', 'soon'])
    assert.equal(res.code, 2)
    assert.match(res.stderr, /--overlap must be a number followed by s, m, h or d/)
  })
})

describe('petstore keys through a running server', () => {
  test('when a key is revoked, or rotated with --overlap 0, then its open change stream on a running server ends within AUTH_CACHE_TTL_MS', async (t) => {
    const cli = cliFor(t)
    const revoked = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const rotated = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    // A heartbeat so rare that only the key's check can end the streams this soon.
    const ttlMs = 500
    const { port } = await startServe(cli, [], { AUTH_CACHE_TTL_MS: String(ttlMs), STREAM_HEARTBEAT_MS: '60000' })
    const streams = await Promise.all([revoked, rotated].map(async (key) => {
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        httpGet({ host: '127.0.0.1', port, path: '/v1/inventory/changes/stream', headers: { authorization: `Bearer ${String(key.key)}` }, agent: false }, resolve)
          .once('error', reject)
      })
      t.after(() => { response.destroy() })
      assert.equal(response.statusCode, 200)
      const ended = new Promise<number>((resolve) => { response.once('close', () => { resolve(Date.now()) }) })
      response.resume()
      return { ended }
    }))
    const changes = [['keys', 'revoke', revoked.id], ['keys', 'rotate', rotated.id, '--overlap', '0']]
    for (const [i, args] of changes.entries()) {
      const res = await cli.run(args as string[])
      assert.equal(res.code, 0, res.stderr)
      const doneAt = Date.now()
      const endedAt = await within(WAIT_TIMEOUT_MS, (streams[i] as { ended: Promise<number> }).ended, `the stream of the key after ${args.join(' ')}`)
      // Within the key cache's lifetime of the change on a quiet machine; the bound allows a loaded one, and stays far
      // below the heartbeat (a minute) that ended such a stream before.
      assert.ok(endedAt - doneAt < ttlMs + 2500, `ended ${endedAt - doneAt} ms after ${args.join(' ')}`)
    }
  })

  test('when keys are used against serve, then keys list shows last use and last deprecated use; a read key writes nothing; a rotated key works at once', async (t) => {
    const cli = cliFor(t)
    const pets = cli.file('pets.json', JSON.stringify({ pets: [{ id: 7, name: 'Rex', status: 'available', quantity: 2 }] }))
    assert.equal((await cli.run(['import', pets])).code, 0)
    const reader = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--scope', 'read', '--json'])).stdout) as KeyJson
    const idle = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const { base, server } = await startServe(cli)
    const headers = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })
    assert.equal((await fetch(`${base}/v1/inventory`, { headers: headers(String(reader.key)) })).status, 200)
    assert.equal((await fetch(`${base}/v1/pets/7`, { headers: headers(String(reader.key)) })).status, 200)
    const write = await fetch(`${base}/v1/inventory/7`, { method: 'PATCH', headers: headers(String(reader.key)), body: '{"quantity":9}' })
    assert.equal(write.status, 403)
    assert.equal(write.headers.get('www-authenticate'), 'Bearer realm="petstore", error="insufficient_scope", scope="inventory:write"')
    const rotated = await cli.run(['keys', 'rotate', reader.id, '--overlap', '1h'])
    assert.equal(rotated.code, 0, rotated.stderr)
    assert.equal((await fetch(`${base}/v1/rate_limit`, { headers: headers(rotated.stdout.trim()) })).status, 200)
    // A mistyped key: one character changed.
    const typo = String(reader.key).slice(0, -1) + (String(reader.key).endsWith('a') ? 'b' : 'a')
    assert.equal((await fetch(`${base}/v1/inventory`, { headers: headers(typo) })).status, 401)
    server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, server.exited, 'the server to stop')

    const list = new Map((JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]).map((k) => [k.id, k]))
    const used = list.get(reader.id)
    assert.match(String(used?.lastUsedAt), ISO)
    assert.match(String(used?.lastDeprecatedUseAt), ISO)
    assert.equal(list.get(idle.id)?.lastUsedAt, null)
    assert.equal(list.get(idle.id)?.lastDeprecatedUseAt, null)
    const heir = [...list.values()].find((k) => k.id === used?.replacedBy)
    assert.match(String(heir?.lastUsedAt), ISO)
    assert.equal(heir?.lastDeprecatedUseAt, null)
    const history = await cli.run(['inventory', 'history', '7', '--json'])
    assert.equal((JSON.parse(history.stdout) as unknown[]).length, 1, 'the import only: the read key wrote nothing')
    const table = (await cli.run(['keys', 'list'])).stdout
    const row = table.split('\n').find((line) => line.startsWith(reader.id)) ?? ''
    assert.match(row, / active .* \d+[smh] ago$/, 'the table shows how long ago the key was last used')
    const shown = (await cli.run(['keys', 'show', reader.id])).stdout
    assert.ok(shown.includes(`last used:           ${String(used?.lastUsedAt)}`), shown)
    assert.ok(shown.includes(`last deprecated use: ${String(used?.lastDeprecatedUseAt)}`), shown)
    assert.ok(shown.includes(`replaced by:         ${String(heir?.id)}`), shown)
  })
})
