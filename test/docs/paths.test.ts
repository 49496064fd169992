/**
 * Comments and pages name only what exists. Every comment of src/, client/, bench/, scripts/ and test/helpers/, and
 * every documentation page (README.md, BENCHMARKS.md, docs/, docs/adr/, the other READMEs), is read for repository
 * paths (src/..., docs/..., a file name with its folder, `./` and `../` as written): each names a file or folder of
 * the checkout, or one the service, the build or the harness writes (test/docs/paths.ts says which and why). A
 * figure a comment or page attributes to BENCHMARKS.md is in BENCHMARKS.md.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { ROOT } from './pages.js'
import { commentsOf, missingPath, pathsIn, sources, unheldFigures } from './paths.js'

const all = sources()

describe('what comments and pages name', () => {
  test('when a comment or a page names a repository path, then the path exists', () => {
    assert.ok(all.filter((source) => source.kind === 'comment').length > 500, 'the comments were read')
    const missing = all.flatMap((source) => pathsIn(source.text).map((path) => missingPath(source.path, path))
      .filter((reason) => reason !== null).map((reason) => `${source.path}: ${reason}`))
    assert.deepEqual([...new Set(missing)], [])
  })

  test('when a comment or a page attributes a figure to BENCHMARKS.md, then BENCHMARKS.md holds it', () => {
    const benchmarks = readFileSync(join(ROOT, 'BENCHMARKS.md'), 'utf8')
    const unheld = all.flatMap((source) => unheldFigures(source, benchmarks).map((figure) => `${source.path}: ${figure}`))
    assert.deepEqual(unheld, [])
  })

  test('when a path or a figure is wrong, then it is reported; one that is right is not', () => {
    const comments = commentsOf('x.ts', [
      '/** Checked against src/schemas/validation.ts and src/domain/validation.ts. */',
      "const url = 'https://example.com/src/nowhere.ts' // see ./pages.ts and docs/adr/<number>-x.md",
      'const re = /src\\/not-a-comment.ts/'
    ].join('\n'))
    assert.deepEqual(comments.flatMap(pathsIn), ['src/schemas/validation.ts', 'src/domain/validation.ts', './pages.ts', 'docs/adr/<number>-x.md'])
    assert.equal(missingPath('src/domain/import.ts', 'src/schemas/validation.ts'), 'src/schemas/validation.ts: no such file or folder')
    assert.equal(missingPath('src/domain/import.ts', 'src/domain/validation.ts'), null)
    assert.equal(missingPath('test/docs/x.ts', './pages.ts'), null)
    assert.equal(missingPath('docs/cli.md', '../BENCHMARKS.md'), null)
    assert.equal(missingPath('docs/x.md', 'docs/adr/<number>-<title>.md'), null)
    assert.equal(missingPath('docs/x.md', 'bench/scenarios/<id>.ts'), null)
    assert.equal(missingPath('docs/x.md', 'bench/scenarios/*.rs'), 'bench/scenarios/*.rs: no file matches')
    assert.equal(missingPath('docs/x.md', 'bench/results/latest.json'), null, 'written by the bench')
    const benchmarks = '| `npm run bench:import` | SQLite **3.78 s** (peak RSS 212 MB) |'
    assert.deepEqual(unheldFigures({ path: 'x.ts', kind: 'comment', text: '// about 3.8 s and 212 MB (BENCHMARKS.md)' }, benchmarks), [])
    assert.deepEqual(unheldFigures({ path: 'x.ts', kind: 'comment', text: '// 23 to 15 µs (BENCHMARKS.md)' }, benchmarks), ['15 µs'])
    assert.deepEqual(unheldFigures({ path: 'x.md', kind: 'page', text: 'It takes 3.5 s (`npm run bench:import`, BENCHMARKS.md).' }, benchmarks), ['3.5 s'])
    assert.deepEqual(unheldFigures({ path: 'x.md', kind: 'page', text: 'README.md is at most 15 KB. See BENCHMARKS.md.' }, benchmarks), [])
  })
})
