/**
 * The commands the CLI and the server tell a person to type (the start line's "Create a key with", "Run ... help",
 * "run ... migrate first", the way to stop a found key) are ones that work where they are typed: `petstore` when it
 * was run as an installed command (the image, a global install: no npx there), `npx petstore` from a checkout; in a
 * container, the start line names the container's port rather than addresses only the container reaches.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { cliCommand } from '../../src/cli/invocation.js'
import { loadConfig } from '../../src/config.js'
import { startLine } from '../../src/server.js'
import { cliFor, EXIT_TIMEOUT_MS, freePort, startServe, within } from './run.js'

describe('the command a message tells a person to type', () => {
  for (const [script, path, expected] of [
    ['/usr/local/bin/petstore', '/usr/local/sbin:/usr/local/bin:/usr/bin:/bin', 'petstore'],
    ['/home/me/.npm-global/bin/petstore', '/usr/bin:/home/me/.npm-global/bin/', 'petstore'],
    ['/srv/shop/node_modules/.bin/petstore', '/srv/shop/node_modules/.bin:/usr/bin', 'npx petstore'],
    ['/srv/petstore-inventory/bin/petstore.js', '/usr/bin:/bin', 'npx petstore'],
    ['/opt/tools/petstore', '/usr/bin:/bin', 'npx petstore'],
    ['/usr/local/bin/petstore.js', '/usr/local/bin', 'npx petstore']
  ] as const) {
    test(`when started as ${script} with PATH=${path}, then the command is "${expected}"`, () => {
      assert.equal(cliCommand(script, path), expected)
    })
  }

  test('when the server starts in a container, then the start line names the paths and the container\'s port, and says to run the CLI in the container', () => {
    const config = loadConfig({ PETSTORE_CONTAINER: 'true', HOST: '0.0.0.0' })
    assert.equal(startLine(config, 'http://0.0.0.0:8080', null, 'petstore'),
      'Petstore Inventory Service: API /v1, reference /docs, metrics /metrics, on port 8080 of this container (open them where that port is published). ' +
      'Create a key in the container with: petstore keys create --plan free --name me (docker exec CONTAINER ..., docker compose exec SERVICE ..., kubectl exec POD -- ...)')
    assert.match(startLine(loadConfig({ PETSTORE_CONTAINER: 'true', METRICS_TOKEN: 'a'.repeat(16) }), 'http://[::]:80', 9464, 'petstore'),
      /metrics \/metrics on port 9464 \(bearer METRICS_TOKEN\), on port 80 of this container/)
    assert.equal(startLine(loadConfig({}), 'http://0.0.0.0:8080', null, 'npx petstore'),
      'Petstore Inventory Service: API http://localhost:8080/v1, reference http://localhost:8080/docs, metrics http://localhost:8080/metrics. ' +
      'Create a key with: npx petstore keys create --plan free --name me')
  })

  test('when run as an installed petstore on PATH, then every command it tells to type starts with petstore, the start line\'s too', async (t) => {
    const cli = cliFor(t, {}, { installed: true })
    const unknown = await cli.run(['frobnicate'])
    assert.equal(unknown.code, 2)
    assert.match(unknown.stderr, /\nRun "petstore help" for usage\.\n$/)
    const empty = await cli.run(['keys', 'find'], {}, '\n')
    assert.match(empty.stderr, /pipe it in \(petstore keys find < leaked\.txt\)/)
    const created = (await cli.run(['keys', 'create', '--plan', 'free'])).stdout.trim()
    const found = await cli.run(['keys', 'find'], {}, created)
    assert.match(found.stderr, /^To stop it working: petstore keys revoke key_\w+, or petstore keys rotate key_\w+ --overlap 0/m)

    const { server } = await startServe(cli, [], { LOG_LEVEL: 'info' })
    const started = await server.waitForOutput(/Create a key with: [^"]*/)
    assert.match(started.stdout, /Create a key with: petstore keys create --plan free --name me"/)
    server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM')
  })

  test('when run from a checkout, then the commands it tells to type start with npx petstore', async (t) => {
    const cli = cliFor(t)
    assert.match((await cli.run(['frobnicate'])).stderr, /\nRun "npx petstore help" for usage\.\n$/)
    assert.match((await cli.run(['keys', 'find'], {}, '\n')).stderr, /pipe it in \(npx petstore keys find < leaked\.txt\)/)
  })

  test('when serve runs with PETSTORE_CONTAINER=true, as in the image, then its start line says where things are in the container', async (t) => {
    const cli = cliFor(t, {}, { installed: true })
    const port = await freePort()
    const { server } = await startServe(cli, [], { LOG_LEVEL: 'info', PETSTORE_CONTAINER: 'true', PORT: String(port) })
    const { stdout } = await server.waitForOutput(/of this container/)
    assert.ok(stdout.includes(`API /v1, reference /docs, metrics /metrics, on port ${port} of this container`), stdout)
    assert.ok(stdout.includes('Create a key in the container with: petstore keys create --plan free --name me (docker exec CONTAINER ...'), stdout)
    assert.doesNotMatch(stdout, /http:\/\/(localhost|127\.0\.0\.1)/, 'no address that only the container reaches')
    server.child.kill('SIGTERM')
    await within(EXIT_TIMEOUT_MS, server.exited, 'exit after SIGTERM')
  })
})
