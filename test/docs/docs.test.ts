/**
 * The documentation, checked as a reader uses it.
 *
 * Runnable examples. Every block of README.md and docs/*.md fenced as ```` ```sh runnable ```` is run:
 * - The runnable blocks of one page run in order in one bash process with `set -euo pipefail`, in the project root
 *   (so `npx petstore ...` runs this checkout's dist/, which `npm test` builds first), against a server of the page's
 *   own: `petstore serve --seed-demo` on a free port, on a temporary SQLite file holding the demo data
 *   (data/demo.json), with PETS_SUNSET a year ahead (cliFor): a date that depends on the day of the run shows as
 *   `...`. Nothing carries over from one page to the next: each page creates its own key.
 * - `http://127.0.0.1:8080` in a block (commands and expected output) is rewritten to that server's address.
 *   DATABASE_URL names the server's SQLite file, so the CLI reaches the same store; TMPDIR is a temporary directory,
 *   removed afterwards (put files there); LOG_LEVEL is warn. Otherwise the blocks see only PATH and HOME.
 * - Comment lines right after a command (no blank line between) are what it prints on stdout, checked by the rule of
 *   expected-output.ts: JSON compared by structure, `...` for what the page leaves out (items, members, characters,
 *   lines). A command is the lines since the previous blank or comment line. A comment after a blank line, or before
 *   a command, is a remark. A command that fails fails the page (`set -e`); `curl -s` exits 0 on any HTTP status.
 * - Mark a block runnable when it can run against such a server. Examples that need Docker, Kubernetes, psql, other
 *   servers, or never end (a stream), stay plain ```` ```sh ````.
 *
 * Links. Every relative link of README.md, BENCHMARKS.md, bench/README.md, docs/*.md and docs/adr/*.md names a file
 * that exists and, with `#anchor`, a heading of that page, by GitHub's anchors (github-slugger).
 *
 * README.md is at most 15 KB, and the API document names no repository file: a reader of /docs cannot open one.
 *
 * Decision records (docs/adr/NNNN-title.md) are numbered 0001 on without gaps, each at most a page, with its status,
 * its date and the sections Context, Decision, Consequences and Alternatives rejected; none cites an issue number,
 * and docs/decisions.md lists every one.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test, type TestContext } from 'node:test'
import { cliFor, startServe } from '../cli/run.js'
import { testApp } from '../helpers/app.js'
import { mismatch } from './expected-output.js'
import { brokenLink, codeBlocks, documentationPages, internalLinks, ROOT, runnableSteps, type Step } from './pages.js'

/** The address the pages use for a local server. */
const DOCUMENTED_ORIGIN = 'http://127.0.0.1:8080'
const README_MAX_BYTES = 15 * 1024
/** A decision record is at most a page. */
const RECORD_MAX_BYTES = 3.5 * 1024
const RECORD_MAX_LINES = 55
const RECORD_SECTIONS = ['Context', 'Decision', 'Consequences', 'Alternatives rejected']
/** Generous for a loaded machine: a page makes a few dozen requests and a few CLI runs. */
const PAGE_TIMEOUT_MS = 120_000

const pages = documentationPages()

describe('the documentation', () => {
  test('when README.md is read, then it is at most 15 KB: the front door, the rest in docs/', () => {
    const size = statSync(join(ROOT, 'README.md')).size
    assert.ok(size <= README_MAX_BYTES, `README.md is ${size} bytes, over ${README_MAX_BYTES}: move sections into docs/`)
  })

  test('when a decision record is read, then it is one page with its number, status, date and sections, and the index lists it', () => {
    const dir = join(ROOT, 'docs/adr')
    const records = readdirSync(dir).filter((name) => name.endsWith('.md') && name !== 'README.md').sort()
    const index = readFileSync(join(ROOT, 'docs/decisions.md'), 'utf8')
    const problems = records.flatMap((name, i) => {
      const text = readFileSync(join(dir, name), 'utf8')
      const number = String(i + 1).padStart(4, '0')
      const found: string[] = []
      if (!new RegExp(`^${number}-[a-z0-9]+(-[a-z0-9]+)*\\.md$`).test(name)) found.push(`is not named ${number}-<kebab-case title>.md`)
      if (!text.startsWith(`# ${number}. `)) found.push(`does not begin with "# ${number}. " and its title`)
      if (!/^- Status: (accepted|deprecated|superseded by \d{4})$/m.test(text)) found.push('has no "- Status: accepted" line')
      if (!/^- Date: \d{4}-\d{2}-\d{2}\b/m.test(text)) found.push('has no "- Date: YYYY-MM-DD" line')
      const sections = [...text.matchAll(/^## (.+)$/gm)].map((match) => match[1])
      if (sections.join('|') !== RECORD_SECTIONS.join('|')) found.push(`has the sections [${sections.join(', ')}], not [${RECORD_SECTIONS.join(', ')}]`)
      const lines = text.trimEnd().split('\n').length
      if (Buffer.byteLength(text) > RECORD_MAX_BYTES || lines > RECORD_MAX_LINES) {
        found.push(`is ${Buffer.byteLength(text)} bytes and ${lines} lines, more than a page (${RECORD_MAX_BYTES}, ${RECORD_MAX_LINES})`)
      }
      if (/\bissues? #?\d+|(^|\s)#\d+\b/im.test(text)) found.push('cites an issue number: say what happened instead')
      if (!index.includes(`](adr/${name})`)) found.push('is not listed in docs/decisions.md')
      return found.map((problem) => `docs/adr/${name} ${problem}`)
    })
    assert.ok(records.length > 0, 'docs/adr holds the decision records')
    assert.deepEqual(problems, [])
  })

  test('when a page links within the repository, then the file exists and so does the heading its #anchor names', () => {
    const broken = pages.flatMap((page) => internalLinks(page).map((href) => brokenLink(page, href)).filter((reason) => reason !== null)
      .map((reason) => `${page}: ${reason}`))
    assert.deepEqual(broken, [])
  })

  test('when a link names a file or a heading that does not exist, then it is reported; one that exists is not', () => {
    assert.equal(brokenLink('README.md', 'docs/api.md#operations'), null)
    assert.equal(brokenLink('docs/api.md', '#rate-limits'), null)
    assert.equal(brokenLink('docs/api.md', '../BENCHMARKS.md'), null)
    assert.match(brokenLink('README.md', 'docs/api.md#no-such-heading') ?? '', /docs\/api.md has no heading with the anchor #no-such-heading/)
    assert.match(brokenLink('docs/api.md', 'no-such-page.md') ?? '', /no file docs\/no-such-page.md/)
  })

  test('when a page shows how to get or import the typed client, then it names the package client.md installs and packs it outside the checkout', () => {
    const found: string[] = []
    for (const page of [...pages, 'client/README.md']) {
      for (const { lang, text } of codeBlocks(page)) {
        if (['ts', 'typescript', 'js', 'javascript', 'mjs', 'cjs'].includes(lang)) {
          for (const [, specifier] of text.matchAll(/(?:\bfrom|\bimport\s*\(|\brequire\s*\()\s*['"]([^'"]*petstore[^'"]*)['"]/g)) {
            if (specifier !== '@petstore/inventory-client') found.push(`${page}: imports ${specifier}`)
          }
        }
        if (['sh', 'bash'].includes(lang)) {
          // npm pack writes the tarball into the current directory, the checkout's client/, unless told where.
          for (const line of text.split('\n').filter((line) => /^\s*npm pack\b/.test(line) && !line.includes('--pack-destination'))) {
            found.push(`${page}: ${line.trim()}`)
          }
        }
      }
    }
    assert.deepEqual(found, [])
  })

  test('when the API document is read on /docs, then no description sends the reader to a repository file', async (t) => {
    const { request } = await testApp(t)
    const document = (await request({ method: 'GET', url: '/v1/openapi.json' })).json() as unknown
    const texts: string[] = []
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(collect)
      else if (value !== null && typeof value === 'object') {
        for (const [key, member] of Object.entries(value)) {
          if ((key === 'description' || key === 'summary') && typeof member === 'string') texts.push(member)
          else collect(member)
        }
      }
    }
    collect(document)
    assert.ok(texts.length > 50, `descriptions found: ${texts.length}`)
    const repositoryFile = /\b[\w-]+\.md\b|\b(?:docs|src|test|bench|client|deploy|scripts)\/[\w./-]+/
    assert.deepEqual(texts.filter((text) => repositoryFile.test(text)), [])
  })

  describe('runnable examples', () => {
    const runnable = pages.map((page) => ({ page, steps: runnableSteps(page) })).filter(({ steps }) => steps.length > 0)
    test('when the pages are read, then the README and the API page have runnable examples', () => {
      assert.ok(runnable.some(({ page }) => page === 'README.md'), 'README.md has runnable blocks')
      assert.ok(runnable.some(({ page }) => page === 'docs/api.md'), 'docs/api.md has runnable blocks')
    })
    for (const { page, steps } of runnable) {
      test(`when the runnable examples of ${page} run in order, then each command prints what the page shows`, async (t) => {
        const problems = await runPage(t, steps)
        assert.ok(problems.length === 0, `${page}:\n\n${problems.join('\n\n')}`)
      })
    }
  })
})

/** Runs a page's steps against a server of its own; answers what differs from the page, empty when nothing does. */
async function runPage (t: TestContext, steps: Step[]): Promise<string[]> {
  const cli = cliFor(t)
  const { base } = await startServe(cli, ['--seed-demo'])
  const rewrite = (text: string): string => text.replaceAll(DOCUMENTED_ORIGIN, base)
  const out = join(cli.dir, 'out')
  const tmp = join(cli.dir, 'tmp')
  mkdirSync(out)
  mkdirSync(tmp)
  // Each step in a group of the same shell (so its variables stay), its stdout in a file of its own.
  const script = join(cli.dir, 'page.sh')
  writeFileSync(script, [
    'set -euo pipefail',
    'trap \'echo "docs: step $docs_step exited $?" >&2\' ERR',
    ...steps.flatMap((step, i) => [`docs_step=${i}`, '{', rewrite(step.command), `} > "$DOCS_OUT/${i}"`])
  ].join('\n') + '\n')
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? cli.dir,
    DATABASE_URL: cli.db,
    TMPDIR: tmp,
    LOG_LEVEL: 'warn',
    DOCS_OUT: out,
    // npx finds the checkout's own petstore; never let it reach for the registry instead.
    npm_config_offline: 'true',
    npm_config_update_notifier: 'false'
  }
  const { code, stderr } = await new Promise<{ code: number | null, stderr: string }>((resolve, reject) => {
    const child = spawn('bash', [script], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { stderr += chunk })
    const timer = setTimeout(() => child.kill('SIGKILL'), PAGE_TIMEOUT_MS)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stderr })
    })
  })

  const problems: string[] = []
  let ran = steps.length
  if (code !== 0) {
    const failed = /docs: step (\d+) exited (\d+)/.exec(stderr)
    ran = failed === null ? 0 : Number(failed[1])
    const step = steps[ran]
    problems.push(step === undefined
      ? `the examples did not finish (exit ${code}): ${stderr}`
      : `${step.where}: exited ${failed?.[2]}\n${indent(step.command)}\nstderr:\n${indent(stderr)}`)
  }
  steps.slice(0, ran).forEach((step, i) => {
    if (step.expected === null) return
    const expected = rewrite(step.expected)
    const printed = readFileSync(join(out, String(i)), 'utf8')
    const reason = mismatch(expected, printed)
    if (reason !== null) {
      problems.push(`${step.where}: ${reason}\n${indent(step.command)}\nthe page shows:\n${indent(expected)}\nit printed:\n${indent(printed)}`)
    }
  })
  return problems
}

function indent (text: string): string {
  return text.trimEnd().split('\n').map((line) => `    ${line}`).join('\n')
}

describe('expected output: how a page\'s comment lines are compared with what a command printed', () => {
  test('when a page shows a status the API did not answer, then the comparison fails and names the member', () => {
    const reason = mismatch('{"petId":2,"quantity":0,"status":"sold","etag":"\\"r2\\""}',
      '{"petId":2,"quantity":0,"status":"available","etag":"\\"r2\\""}')
    assert.match(reason ?? '', /\$\.status: the page shows "sold", the command printed "available"/)
  })

  test('when the JSON matches but its members come in another order, then it matches', () => {
    assert.equal(mismatch('{"quantity":12,"petId":1}', '{"petId":1,"quantity":12}\n'), null)
  })

  test('when a page leaves out items, members or characters with ..., then only what it shows is compared', () => {
    const printed = '[{"petId":1,"quantity":3,"status":"available"},{"petId":9007199254740993,"quantity":1,"status":"available"}]'
    assert.equal(mismatch('[{"petId":1,"quantity":3,"status":"available"}, ...]', printed), null)
    assert.equal(mismatch('[..., {"petId":9007199254740993, ...}]', printed), null)
    assert.equal(mismatch('{"id":"wh_...","enabled":true, ...}', '{"id":"wh_Ab3","url":"https://x","enabled":true}'), null)
    assert.equal(mismatch('{"id":..., "enabled":true}', '{"id":"wh_Ab3","enabled":true}'), null)
  })

  test('when a page shows fewer members or an int64 id off by one, then the comparison fails', () => {
    assert.match(mismatch('{"petId":1}', '{"petId":1,"quantity":3}') ?? '', /member\(s\) the page does not show: quantity/)
    assert.match(mismatch('[{"petId":9007199254740992}]', '[{"petId":9007199254740993}]') ?? '', /9007199254740992/)
    assert.match(mismatch('[{"petId":1}]', '[{"petId":1},{"petId":2}]') ?? '', /1 item\(s\), the command printed 2/)
  })

  test('when the output is text, then lines compare with ... for any characters and a line ... for any lines', () => {
    const head = 'HTTP/1.1 200 OK\r\nx-request-id: 3b0e\r\netag: "r6"\r\ncontent-length: 46\r\n\r\n{"petId":1,"quantity":33,"status":"available"}'
    assert.equal(mismatch('HTTP/1.1 200 OK\n...\netag: "r6"\n...\n\n{"petId":1, ...}', head), null)
    assert.equal(mismatch('HTTP/1.1 2... OK\n...', head), null)
    assert.equal(mismatch('HTTP/1.1 200 OK\n...\netag: "r7"\n...', head), 'the lines differ')
    assert.equal(mismatch('HTTP/1.1 200 OK', head), 'the lines differ')
  })
})
