import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { PLAN } from '../../src/store/sqlite/migrations.js'
import { cliFor, freePort, startServe } from './run.js'

const LATEST = PLAN.migrations.length

describe('petstore migrate', () => {
  test('when run twice, then both exit 0 and it reports applied migrations, then an up-to-date schema', async (t) => {
    const cli = cliFor(t)
    const first = await cli.run(['migrate'])
    assert.equal(first.code, 0, first.stderr)
    assert.equal(first.stdout, '')
    assert.equal(first.stderr, `Applied ${LATEST} migration(s): version 0 to ${LATEST}.\n`)
    assert.ok(existsSync(cli.db), 'the SQLite file is created')

    const second = await cli.run(['migrate'])
    assert.equal(second.code, 0, second.stderr)
    assert.equal(second.stdout, '')
    assert.equal(second.stderr, `The store schema is up to date (version ${LATEST}).\n`)
  })

  test('when DATABASE_URL names a file in a directory that does not exist yet, then the directory is created', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['migrate'], { DATABASE_URL: 'nested/deeper/store.db' })
    assert.equal(res.code, 0, res.stderr)
    assert.ok(existsSync(`${cli.dir}/nested/deeper/store.db`), 'a relative path resolves against the working directory')
  })

  test('when given an argument, then it exits 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['migrate', 'now'])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /Unexpected argument 'now'/)
  })
})

describe('petstore health', () => {
  test('when the server on HOST and PORT is alive, then health exits 0, and health --ready exits 0 while it is ready', async (t) => {
    const cli = cliFor(t)
    const { port } = await startServe(cli)
    const env = { HOST: '127.0.0.1', PORT: String(port) }
    const alive = await cli.run(['health'], env)
    assert.equal(alive.code, 0, alive.stderr)
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    assert.equal(alive.stdout, `${JSON.stringify({ status: 'ok', version })}\n`)
    const ready = await cli.run(['health', '--ready'], env)
    assert.equal(ready.code, 0, ready.stderr)
    assert.match(ready.stdout, /"status":"ready"/)
  })

  test('when the server binds every address (0.0.0.0), then health asks it on loopback', async (t) => {
    const cli = cliFor(t)
    const port = await freePort()
    await startServe(cli, [], { HOST: '0.0.0.0', PORT: String(port) })
    const res = await cli.run(['health'], { HOST: '0.0.0.0', PORT: String(port) })
    assert.equal(res.code, 0, res.stderr)
  })

  test('when nothing listens on PORT, then health exits 1 naming the address and the failure', async (t) => {
    const cli = cliFor(t)
    const port = await freePort()
    const res = await cli.run(['health'], { HOST: '127.0.0.1', PORT: String(port) })
    assert.equal(res.code, 1)
    assert.equal(res.stdout, '')
    assert.equal(res.stderr, `petstore: GET http://127.0.0.1:${port}/healthz failed: ECONNREFUSED\n`)
  })

  test('when the server is draining after SIGTERM, then health --ready exits 1 with its reason while health still exits 0', async (t) => {
    const cli = cliFor(t)
    // Two CLI runs must fit in the drain, also on a loaded machine where starting a process takes a second or more.
    const { port, server } = await startServe(cli, [], { SHUTDOWN_DRAIN_MS: '15000' })
    const env = { HOST: '127.0.0.1', PORT: String(port) }
    server.child.kill('SIGTERM')
    const ready = await cli.run(['health', '--ready'], env)
    assert.equal(ready.code, 1)
    assert.match(ready.stderr, new RegExp(`^petstore: GET http://127\\.0\\.0\\.1:${port}/readyz answered 503: This instance is shutting down`))
    assert.equal((await cli.run(['health'], env)).code, 0)
  })

  test('when PORT is 0, then health exits 2: there is no port to ask', async (t) => {
    const res = await cliFor(t).run(['health'], { PORT: '0' })
    assert.equal(res.code, 2)
    assert.match(res.stderr, /health needs the port the server listens on/)
  })
})

describe('configuration', () => {
  const invalid: Array<{ what: string, env: Record<string, string>, names: string }> = [
    { what: 'PORT is not a number', env: { PORT: 'abc' }, names: 'PORT' },
    { what: 'PORT is out of range', env: { PORT: '70000' }, names: 'PORT' },
    { what: 'PETS_SUNSET is earlier than PETS_DEPRECATED_AT', env: { PETS_DEPRECATED_AT: '2027-01-01T00:00:00Z', PETS_SUNSET: '2026-01-01T00:00:00Z' }, names: 'PETS_SUNSET' },
    { what: 'PETS_SUNSET is not an RFC 3339 date-time', env: { PETS_SUNSET: 'next year' }, names: 'PETS_SUNSET' },
    { what: 'LOG_LEVEL is unknown', env: { LOG_LEVEL: 'loud' }, names: 'LOG_LEVEL' },
    { what: 'PETSTORE_ENV is unknown', env: { PETSTORE_ENV: 'dev' }, names: 'PETSTORE_ENV' },
    { what: 'AUTH_CACHE_TTL_MS is too large', env: { AUTH_CACHE_TTL_MS: '600000' }, names: 'AUTH_CACHE_TTL_MS' },
    { what: 'PRODUCTION_URL is not an http(s) URL', env: { PRODUCTION_URL: 'ftp://api.example' }, names: 'PRODUCTION_URL' },
  ]
  for (const { what, env, names } of invalid) {
    test(`when ${what}, then it exits 2 with "invalid configuration" naming ${names}`, async (t) => {
      const cli = cliFor(t)
      const res = await cli.run(['migrate'], env)
      assert.equal(res.code, 2, res.stderr)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /^petstore: invalid configuration: /)
      assert.ok(res.stderr.includes(names), res.stderr)
      assert.ok(!existsSync(cli.db), 'nothing touches the store')
    })
  }

  test('when the configuration is invalid, then keys commands exit 2 too', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['keys', 'create', '--plan', 'free'], { LOG_LEVEL: 'loud' })
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '', 'no key is printed')
    assert.match(res.stderr, /invalid configuration: LOG_LEVEL/)
  })

  test('when the configuration is invalid, then serve exits 2 before listening', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['serve'], { PORT: 'abc' })
    assert.equal(res.code, 2)
    assert.match(res.stderr, /invalid configuration: PORT/)
  })
})

describe('petstore (usage)', () => {
  test('when no command is given, then it prints the usage on stderr and exits 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run([])
    assert.equal(res.code, 2)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /^Usage: petstore <command>/)
  })

  test('when the command is help, --help or -h, then it prints the usage on stdout and exits 0', async (t) => {
    const cli = cliFor(t)
    for (const command of ['help', '--help', '-h']) {
      const res = await cli.run([command])
      assert.equal(res.code, 0, command)
      assert.equal(res.stderr, '')
      assert.match(res.stdout, /^Usage: petstore <command>/)
      for (const name of ['serve', 'migrate', 'import FILE', 'keys create', 'keys list', 'keys revoke']) {
        assert.ok(res.stdout.includes(name), `usage mentions ${name}`)
      }
    }
  })

  test('when --help or -h follows any command or subcommand, then that command\'s usage is on stdout and it exits 0, whatever the configuration', async (t) => {
    // An invalid configuration (PORT=abc): help must not need a valid one.
    const cli = cliFor(t, { PORT: 'abc' })
    const commands = ['serve', 'health', 'migrate', 'backup', 'restore', 'import', 'inventory history', 'inventory reorder-point', 'keys create', 'keys rotate', 'keys list',
      'keys show', 'keys find', 'keys revoke', 'keys unban', 'webhooks list', 'webhooks disable', 'webhooks enable']
    for (const [i, command] of commands.entries()) {
      const res = await cli.run([...command.split(' '), i % 2 === 0 ? '--help' : '-h'])
      assert.equal(res.code, 0, `${command}: ${res.stderr}`)
      assert.equal(res.stderr, '', command)
      assert.ok(res.stdout.startsWith(`Usage: petstore ${command}`), `${command}: ${res.stdout}`)
      assert.ok(res.stdout.split('\n').length < 12, `${command}: its own usage, not every command's`)
    }
    const group = await cli.run(['keys', '--help'])
    assert.equal(group.code, 0)
    assert.match(group.stdout, /^Usage: petstore keys <subcommand>/)
    for (const sub of ['create', 'rotate', 'list', 'show', 'find', 'revoke', 'unban']) assert.match(group.stdout, new RegExp(`^  keys ${sub}`, 'm'))
    const asked = await cli.run(['help', 'keys', 'find'])
    assert.equal(asked.code, 0)
    assert.match(asked.stdout, /^Usage: petstore keys find \[--json\]\n\nWhich key is this\?/)
    const withArguments = await cli.run(['backup', 'some.db', '--force', '--help'])
    assert.equal(withArguments.code, 0)
    assert.match(withArguments.stdout, /^Usage: petstore backup FILE/)
    assert.equal(existsSync(`${cli.dir}/some.db`), false, '--help does nothing else')
  })

  test('when --version, -v or -V is given, then the release version is printed and it exits 0', async (t) => {
    const cli = cliFor(t, { PORT: 'abc' })
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
    for (const flag of ['--version', '-v', '-V']) {
      const res = await cli.run([flag])
      assert.deepEqual([res.code, res.stdout, res.stderr], [0, `${version}\n`, ''], flag)
    }
  })

  test('when asking for help with an invalid configuration, then help still works', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['help'], { PORT: 'abc' })
    assert.equal(res.code, 0)
    assert.match(res.stdout, /^Usage:/)
  })

  test('when the command is unknown, also with --help, then it exits 2 naming it and pointing to help', async (t) => {
    const cli = cliFor(t)
    for (const argv of [['frobnicate'], ['frobnicate', '--help'], ['help', 'frobnicate']]) {
      const res = await cli.run(argv)
      assert.equal(res.code, 2, argv.join(' '))
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /unknown command "frobnicate"/)
      assert.match(res.stderr, /petstore help/)
    }
  })
})
