/**
 * What an operator reaches for on an incident: `keys find` names the key whose text leaked (read from standard
 * input, never printed), `keys show` tells one key in full with its quota's current windows, and `keys list` fits a
 * terminal of 100 columns with each key's usage.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { describe, test } from 'node:test'
import { REDIS_URL, redisKeyPrefix, requireRedis } from '../ratelimit/redis-env.js'
import { freePort } from '../helpers/net.js'
import { BIN, cliFor, EXIT_TIMEOUT_MS, inspectStore, startServe, within, type Cli } from './run.js'

interface Window { used: number, limit: number, resetAt: string }

interface Listed {
  id: string
  name: string | null
  plan: string
  scope: string
  status: string
  usage: { minute: Window, day: Window } | null
  key?: string
}

async function create (cli: Cli, ...args: string[]): Promise<Listed & { key: string }> {
  const res = await cli.run(['keys', 'create', ...args, '--json'])
  assert.equal(res.code, 0, res.stderr)
  return JSON.parse(res.stdout) as Listed & { key: string }
}

describe('petstore keys find', () => {
  test('when a key\'s text arrives on standard input, then it names the key and never prints the text', async (t) => {
    const cli = cliFor(t)
    const created = await create(cli, '--plan', 'pro', '--name', 'billing export', '--scope', 'read')
    await create(cli, '--plan', 'free')
    const res = await cli.run(['keys', 'find'], {}, `${created.key}\n`)
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stdout, new RegExp(`^id: +${created.id}$`, 'm'))
    assert.match(res.stdout, /^name: +billing export$/m)
    assert.match(res.stdout, /^plan: +pro \(300 a minute, 10000 a day\)$/m)
    assert.match(res.stdout, /^scope: +read$/m)
    assert.match(res.stdout, /^status: +active$/m)
    assert.match(res.stderr, new RegExp(`To stop it working: npx petstore keys revoke ${created.id}`))
    const secret = created.key.slice('psk_live_'.length)
    assert.ok(!(res.stdout + res.stderr).includes(secret), 'the key is never printed')
  })

  test('when the text is pasted with its "Bearer " and the key is revoked, then --json names it as revoked', async (t) => {
    const cli = cliFor(t)
    const created = await create(cli, '--plan', 'free')
    assert.equal((await cli.run(['keys', 'revoke', created.id])).code, 0)
    const res = await cli.run(['keys', 'find', '--json'], {}, `  Bearer ${created.key}  \n`)
    assert.equal(res.code, 0, res.stderr)
    const found = JSON.parse(res.stdout) as Listed
    assert.equal(found.id, created.id)
    assert.equal(found.status, 'revoked')
    assert.equal(found.key, undefined)
    assert.ok(!res.stdout.includes(created.key.slice('psk_live_'.length)))
    assert.doesNotMatch(res.stderr, /To stop it working/)
  })

  test('when no key of the store matches, then it says so and exits 1', async (t) => {
    const cli = cliFor(t)
    const created = await create(cli, '--plan', 'free')
    const other = created.key.slice(0, -1) + (created.key.endsWith('a') ? 'b' : 'a')
    const res = await cli.run(['keys', 'find'], {}, other)
    assert.equal(res.code, 1)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /no key of this store matches/)
    assert.ok(!res.stderr.includes(other.slice('psk_live_'.length)))
  })

  test('when the key is given as an argument, or nothing arrives on standard input, then it exits 2 without repeating the argument', async (t) => {
    const cli = cliFor(t)
    const created = await create(cli, '--plan', 'free')
    const argument = await cli.run(['keys', 'find', created.key])
    assert.equal(argument.code, 2)
    assert.match(argument.stderr, /takes the key on standard input, never as an argument/)
    assert.ok(!argument.stderr.includes(created.key.slice('psk_live_'.length)))
    const empty = await cli.run(['keys', 'find'], {}, '\n')
    assert.equal(empty.code, 2)
    assert.match(empty.stderr, /no key on standard input/)
    const two = await cli.run(['keys', 'find'], {}, `${created.key}\n${created.key}\n`)
    assert.equal(two.code, 2)
    assert.match(two.stderr, /more than one word: give one key/)
  })

  test('when standard input holds far more than a key, or never ends, then it stops reading, exits 2 and names no key', async (t) => {
    const cli = cliFor(t)
    const created = await create(cli, '--plan', 'free')
    // A log file piped in by mistake: the key is in it, but so is much else.
    const log = `${created.key}\n${'x'.repeat(1_000_000)}`
    const big = await cli.run(['keys', 'find'], {}, log)
    assert.equal(big.code, 2, big.stderr)
    assert.equal(big.stdout, '')
    assert.match(big.stderr, /standard input holds more than 4096 bytes: give one key/)

    // An input that never ends (as from /dev/zero or a stuck pipe) is read no further than the bound either.
    const endless = spawn(process.execPath, [BIN, 'keys', 'find'], { cwd: cli.dir, env: cli.env, stdio: ['pipe', 'pipe', 'pipe'] })
    t.after(() => { if (endless.exitCode === null && endless.signalCode === null) endless.kill('SIGKILL') })
    let stderr = ''
    endless.stderr.setEncoding('utf8').on('data', (text: string) => { stderr += text })
    endless.stdout.resume()
    const exited = new Promise<number | null>((resolve) => endless.on('close', resolve))
    const chunk = 'y'.repeat(65_536)
    let writing = true
    endless.stdin.on('error', () => { writing = false })
    const feed = (): void => {
      while (writing && endless.stdin.write(chunk)) { /* until the pipe is full */ }
      if (writing) endless.stdin.once('drain', feed)
    }
    feed()
    const code = await within(EXIT_TIMEOUT_MS, exited, 'keys find to stop reading an endless input')
    writing = false
    assert.equal(code, 2)
    assert.match(stderr, /more than 4096 bytes/)
  })
})

describe('petstore keys show', () => {
  test('when the key exists, then every field is shown, the ban in force included; an unknown id exits 1', async (t) => {
    const cli = cliFor(t)
    const created = await create(cli, '--plan', 'enterprise', '--per-minute', '50', '--per-day', '500', '--name', 'partner', '--expires-in', '30d')
    const since = new Date()
    const until = new Date(since.getTime() + 900_000)
    await inspectStore(cli.db, (store) => store.keys.banApiKey(created.id, { since, until, seconds: 900 }))
    const res = await cli.run(['keys', 'show', created.id])
    assert.equal(res.code, 0, res.stderr)
    const fields = new Map(res.stdout.trimEnd().split('\n').map((line) => [line.slice(0, 21).trim().replace(/:$/, ''), line.slice(21)]))
    assert.deepEqual([...fields.keys()], ['id', 'name', 'plan', 'scope', 'status', 'created', 'expires', 'revoked', 'replaced by', 'quota', 'last used',
      'last deprecated use', 'ban', 'usage'])
    assert.equal(fields.get('plan'), 'enterprise (50 a minute, 500 a day)')
    assert.equal(fields.get('status'), 'banned')
    assert.equal(fields.get('ban'), `until ${until.toISOString()} (900 s, since ${since.toISOString()})`)
    assert.equal(fields.get('quota'), 'its own')
    assert.match(String(fields.get('usage')), /^unknown: the in-process rate limiter \(REDIS_URL is not set\) counts inside the serving process/)

    const json = await cli.run(['keys', 'show', created.id, '--json'])
    assert.equal((JSON.parse(json.stdout) as Listed).usage, null)
    const missing = await cli.run(['keys', 'show', 'key_0000000000000000'])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /no key with id key_0000000000000000/)
  })
})

describe('petstore keys list', () => {
  test('when keys have the longest names, the largest limits and every status, then no line is wider than 100 columns and --json keeps the whole name', async (t) => {
    const cli = cliFor(t)
    const long = 'n'.repeat(200)
    const biggest = await create(cli, '--plan', 'enterprise', '--per-minute', '1000000000', '--per-day', '1000000000', '--name', long)
    const revoked = await create(cli, '--plan', 'business', '--name', `revoked ${long}`.slice(0, 200))
    assert.equal((await cli.run(['keys', 'revoke', revoked.id])).code, 0)
    const banned = await create(cli, '--plan', 'free', '--scope', 'read', '--name', 'short')
    await inspectStore(cli.db, (store) => store.keys.banApiKey(banned.id, { since: new Date(), until: new Date(Date.now() + 60_000), seconds: 60 }))
    const expiring = await create(cli, '--plan', 'pro', '--expires-in', '1s')
    await new Promise((resolve) => setTimeout(resolve, 1100))

    const res = await cli.run(['keys', 'list'])
    assert.equal(res.code, 0, res.stderr)
    const lines = res.stdout.trimEnd().split('\n')
    assert.equal(lines.length, 5)
    for (const line of lines) assert.ok(line.length <= 100, `${line.length} columns: ${line}`)
    const row = (id: string): string[] => lines.find((line) => line.startsWith(id))?.split(/\s{2,}/) ?? []
    assert.match(String(row(biggest.id)[1]), /^n+…$/, 'the name gives way, cut')
    assert.deepEqual(row(biggest.id).slice(2), ['enterprise', 'write', 'active', '?/1B', '?/1B', 'never'])
    assert.deepEqual(row(revoked.id).slice(2), ['business', 'write', 'revoked', '-', '-', 'never'])
    assert.deepEqual(row(banned.id).slice(1), ['short', 'free', 'read', 'banned', '?/60', '?/1000', 'never'])
    assert.deepEqual(row(expiring.id).slice(1), ['-', 'pro', 'write', 'expired', '-', '-', 'never'])
    const listed = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as Listed[]
    assert.equal(listed.find((key) => key.id === biggest.id)?.name, long)
  })
})

if (await requireRedis('keys list and show with usage from Redis')) {
  describe('usage from the shared limiter (REDIS_URL)', () => {
    test('when a key has made requests, then keys list and keys show report them against its limits with reset times, and reading counts nothing', async (t) => {
      const REDIS_KEY_PREFIX = redisKeyPrefix(t)
      const cli = cliFor(t, { REDIS_URL, REDIS_KEY_PREFIX })
      const busy = await create(cli, '--plan', 'free', '--name', 'busy')
      const idle = await create(cli, '--plan', 'pro', '--name', 'idle')
      const { base, server } = await startServe(cli)
      // The requests and the readings within one UTC minute: start in a fresh one when this one is nearly over.
      const left = 60_000 - Date.now() % 60_000
      if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 100))
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${base}/v1/inventory`, { headers: { authorization: `Bearer ${busy.key}` } })
        assert.equal(res.status, 200)
      }

      for (let round = 0; round < 2; round++) {
        const listed = JSON.parse((await cli.run(['keys', 'list', '--json'])).stdout) as Listed[]
        const usage = listed.find((key) => key.id === busy.id)?.usage
        assert.ok(usage !== null && usage !== undefined)
        assert.deepEqual([usage.minute.used, usage.minute.limit, usage.day.used, usage.day.limit], [3, 60, 3, 1000], `reading round ${round}`)
        const minuteEnds = Date.parse(usage.minute.resetAt)
        assert.equal(minuteEnds % 60_000, 0)
        assert.ok(minuteEnds > Date.now() - 1000 && minuteEnds <= Date.now() + 61_000)
        assert.equal(Date.parse(usage.day.resetAt) % 86_400_000, 0)
        assert.deepEqual(listed.find((key) => key.id === idle.id)?.usage?.minute.used, 0)
      }
      const table = await cli.run(['keys', 'list'])
      assert.equal(table.stderr, '', 'usage was read: no note')
      assert.deepEqual(table.stdout.split('\n').find((line) => line.startsWith(busy.id))?.split(/\s{2,}/).slice(5, 7), ['3/60', '3/1000'])
      const shown = await cli.run(['keys', 'show', busy.id])
      assert.match(shown.stdout, /^this minute: +3 of 60 used, resets \d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z \(in \d+ s\)$/m)
      assert.match(shown.stdout, /^today: +3 of 1000 used, resets \d{4}-\d\d-\d\dT00:00:00\.000Z \(in (\d+ s|\d+ min|\d+ h \d+ min)\)$/m)
      server.child.kill('SIGTERM')
      await within(EXIT_TIMEOUT_MS, server.exited, 'the server to stop')
    })

    test('when Redis cannot be reached, then keys list still lists every key, says why usage is unknown, and exits 0', async (t) => {
      const cli = cliFor(t, { REDIS_URL: `redis://127.0.0.1:${await freePort()}`, REDIS_KEY_PREFIX: `test:${randomUUID()}:` })
      const created = await create(cli, '--plan', 'free')
      const started = Date.now()
      const res = await cli.run(['keys', 'list'])
      assert.equal(res.code, 0, res.stderr)
      assert.ok(Date.now() - started < 10_000)
      assert.deepEqual(res.stdout.split('\n')[1]?.split(/\s{2,}/).slice(0, 7), [created.id, '-', 'free', 'write', 'active', '?/60', '?/1000'])
      assert.match(res.stderr, /^Usage unknown \(\?\): Redis at redis:\/\/127\.0\.0\.1:\d+ cannot be reached/)
    })
  })
}
