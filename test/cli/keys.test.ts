import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { cliFor, inspectStore } from './run.js'

const LIVE_KEY = /^psk_live_[A-Za-z0-9_-]{43}$/
const TEST_KEY = /^psk_test_[A-Za-z0-9_-]{43}$/
const KEY_ID = /^key_[0-9a-f]{16}$/
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

interface KeyJson {
  id: string
  name: string | null
  plan: string
  perMinute: number | null
  perDay: number | null
  createdAt: string
  revokedAt: string | null
  bannedUntil?: string | null
  lastBan?: { since: string, until: string, seconds: number } | null
  key?: string
}

describe('petstore keys create', () => {
  test('when a free key is created, then stdout holds only the live key and the exit code is 0', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'free'])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stdout, /\n$/)
    const key = res.stdout.slice(0, -1)
    assert.match(key, LIVE_KEY)
    assert.match(res.stderr, /^Created key_[0-9a-f]{16} \(free\)\. The key is shown only now/)
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

  test('when keys exist, then the table shows id, name, plan, limits and creation time but never the key', async (t) => {
    const cli = cliFor(t)
    const free = await cli.run(['keys', 'create', '--plan', 'free', '--name', 'reporting', '--json'])
    const enterprise = await cli.run(['keys', 'create', '--plan', 'enterprise', '--per-minute', '5000', '--per-day', '2000000', '--json'])
    const a = JSON.parse(free.stdout) as KeyJson
    const b = JSON.parse(enterprise.stdout) as KeyJson

    const res = await cli.run(['keys', 'list'])
    assert.equal(res.code, 0, res.stderr)
    const lines = res.stdout.trimEnd().split('\n')
    assert.equal(lines.length, 3)
    assert.deepEqual(lines[0]?.split(/\s{2,}/), ['ID', 'NAME', 'PLAN', 'PER MINUTE', 'PER DAY', 'CREATED', 'REVOKED', 'BANNED UNTIL'])
    assert.deepEqual(lines[1]?.split(/\s{2,}/), [a.id, 'reporting', 'free', '60', '1000', a.createdAt, '-', '-'])
    assert.deepEqual(lines[2]?.split(/\s{2,}/), [b.id, '-', 'enterprise', '5000', '2000000', b.createdAt, '-', '-'])
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
      id: created.id, name: null, plan: 'free', perMinute: 60, perDay: 1000, createdAt: created.createdAt, revokedAt: null,
      bannedUntil: null, lastBan: null
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
      assert.match(res.stderr, /create, list, revoke or unban/)
    }
  })
})

describe('petstore keys unban', () => {
  test('when a key is banned, then keys list shows the ban and keys unban lifts it', async (t) => {
    const cli = cliFor(t)
    const created = JSON.parse((await cli.run(['keys', 'create', '--plan', 'free', '--json'])).stdout) as KeyJson
    const since = new Date()
    const until = new Date(since.getTime() + 900_000)
    await inspectStore(cli.db, (store) => store.banApiKey(created.id, { since, until, seconds: 900 }))

    const listed = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as KeyJson[]
    assert.equal(listed[0]?.bannedUntil, until.toISOString())
    assert.deepEqual(listed[0]?.lastBan, { since: since.toISOString(), until: until.toISOString(), seconds: 900 })
    const table = (await cli.run(['keys', 'list'])).stdout
    assert.match(table, new RegExp(`${created.id}.*${until.toISOString().replace(/\./g, '\\.')}`))

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
