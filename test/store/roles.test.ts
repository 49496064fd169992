/**
 * The PostgreSQL roles docs/scaling.md describes, set up by its own SQL as written: the owner migrates; the role the
 * instances use serves reads, writes, batches, idempotent writes and webhook deliveries, and runs the CLI, with no
 * privilege beyond what the page grants; it cannot migrate or rewrite the schema's history.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Lexer, type Tokens } from 'marked'
import pg from 'pg'
import { cliFor, startServe } from '../cli/run.js'
import { ROOT } from '../docs/pages.js'
import { adminQuery, POSTGRES_URL, requirePostgres } from '../helpers/postgres.js'

/** The page's two SQL blocks under "The database roles": the superuser's, then the owner's after the first migrate. */
function documentedSql (): { superuser: string, owner: string } {
  const tokens = Lexer.lex(readFileSync(join(ROOT, 'docs/scaling.md'), 'utf8'))
  const start = tokens.findIndex((token) => token.type === 'heading' && (token as Tokens.Heading).text === 'The database roles')
  assert.ok(start >= 0, 'docs/scaling.md has a section "The database roles"')
  const blocks: string[] = []
  for (const token of tokens.slice(start + 1)) {
    if (token.type === 'heading' && (token as Tokens.Heading).depth <= 3) break
    if (token.type === 'code' && (token as Tokens.Code).lang === 'sql') blocks.push((token as Tokens.Code).text)
  }
  assert.equal(blocks.length, 2, 'two sql blocks: the superuser\'s and the owner\'s')
  return { superuser: blocks[0] as string, owner: blocks[1] as string }
}

/** Runs statements one at a time (CREATE DATABASE cannot run in the implicit transaction of a multi-statement query). */
async function runEach (sql: string, url: string): Promise<void> {
  for (const statement of sql.split(/;\s*(?:\n|$)/).map((s) => s.trim()).filter((s) => s !== '')) await adminQuery(statement, url)
}

if (await requirePostgres('the database roles of docs/scaling.md')) {
  test('when the roles are set up as docs/scaling.md says, then the owner migrates and the instances\' role serves, writes, delivers webhooks and runs the CLI, but cannot migrate', async (t) => {
    const id = randomBytes(4).toString('hex')
    const names = { owner: `petstore_docs_owner_${id}`, app: `petstore_docs_app_${id}`, database: `petstore_docs_${id}` }
    // The page's names, made unique for this run: the roles are the server's, shared by every test.
    const ours = (sql: string): string => sql
      .replace(/\bpetstore_owner\b/g, names.owner)
      .replace(/\bDATABASE petstore\b/g, `DATABASE ${names.database}`)
      .replace(/\bpetstore\b/g, names.app)
    const url = (role: string): string => {
      const address = new URL(POSTGRES_URL)
      address.username = role
      address.password = ''
      address.pathname = `/${names.database}`
      return address.toString()
    }
    t.after(async () => {
      await adminQuery(`DROP DATABASE IF EXISTS ${names.database} WITH (FORCE)`)
      await adminQuery(`DROP ROLE IF EXISTS ${names.app}`)
      await adminQuery(`DROP ROLE IF EXISTS ${names.owner}`)
    })
    const sql = documentedSql()
    await runEach(ours(sql.superuser), POSTGRES_URL)

    const owner = cliFor(t, { DATABASE_URL: url(names.owner) })
    const migrated = await owner.run(['migrate'])
    assert.equal(migrated.code, 0, migrated.stderr)
    await runEach(ours(sql.owner), url(names.owner))

    const received: string[] = []
    const receiver = createServer((req, res) => {
      let body = ''
      req.setEncoding('utf8').on('data', (chunk: string) => { body += chunk }).on('end', () => {
        received.push(body)
        res.writeHead(204).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    t.after(() => receiver.close())

    const cli = cliFor(t, { DATABASE_URL: url(names.app), WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_POLL_MS: '100' })
    const imported = await cli.run(['import', join(ROOT, 'data/demo.json')])
    assert.equal(imported.code, 0, imported.stderr)
    const created = await cli.run(['keys', 'create', '--plan', 'pro'])
    assert.equal(created.code, 0, created.stderr)
    const key = created.stdout.trim()
    const { base } = await startServe(cli)
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<number> => {
      const res = await fetch(`${base}/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      await res.arrayBuffer()
      return res.status
    }

    const { port } = receiver.address() as AddressInfo
    assert.equal(await call('POST', '/webhooks', { url: `http://127.0.0.1:${port}/hooks`, events: ['inventory.changed'] }), 201)
    assert.equal(await call('PATCH', '/inventory/1', { quantity: 9 }, { 'idempotency-key': 'roles-1' }), 200)
    assert.equal(await call('PATCH', '/inventory/1', { quantity: 9 }, { 'idempotency-key': 'roles-1' }), 200)
    assert.equal(await call('POST', '/inventory/batch', { changes: [{ petId: 1, delta: 1 }, { petId: 2, quantity: 0 }] }), 200)
    assert.equal(await call('GET', '/inventory'), 200)
    assert.equal(await call('GET', '/inventory/changes'), 200)
    for (let waited = 0; received.length < 3 && waited < 15_000; waited += 100) await sleep(100)
    assert.equal(received.length, 3, 'a webhook delivery per change: the deliveries\' sequence is granted')

    const history = await cli.run(['inventory', 'history', '1'])
    assert.equal(history.code, 0, history.stderr)
    assert.match(history.stdout, /adjustment\s+3\s+9/)

    const refused = await cli.run(['migrate'])
    assert.equal(refused.code, 1, refused.stderr)
    assert.match(refused.stderr, /permission denied for schema public/)
    const app = new pg.Client({ connectionString: url(names.app) })
    await app.connect()
    try {
      await assert.rejects(app.query('DELETE FROM schema_migrations'), /permission denied for table schema_migrations/)
    } finally {
      await app.end()
    }
  })
}
