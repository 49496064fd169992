/**
 * What the comments of the code and the documentation pages say exists: the repository paths they name, and the
 * benchmark figures they attribute to BENCHMARKS.md. The paths test checks both against the checkout.
 */
import { existsSync, readdirSync, readFileSync, type Dirent } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { documentationPages, ROOT } from './pages.js'

/** The code whose comments are read: the service, the client, the benchmark harness, the scripts, the test helpers. */
const CODE_DIRS = ['src', 'client', 'bench', 'scripts', 'test/helpers']
/** Generated from the OpenAPI document: their comments are the document's descriptions, checked by the docs test. */
const GENERATED = new Set(['client/schema.ts', 'client/int64.ts'])
/** The top-level folders a path in prose starts with. */
const TOP_DIRS = ['src', 'test', 'docs', 'bench', 'client', 'scripts', 'deploy', 'data', 'bin']
/** A file name a path in prose ends with, in any folder. */
const FILE_EXTENSION = /\.(ts|js|md|json|ya?ml|sh|lua|sql|env|cfg)$/

/**
 * What the pages name that is not in a checkout, each for a reason: files the service, the build or the harness
 * writes when it runs, and names that only look like paths.
 */
const NOT_IN_A_CHECKOUT: ReadonlyArray<[prefix: string, why: string]> = [
  ['data/petstore.db', 'the default SQLite store, written by `petstore serve` and `petstore migrate`, with its backups'],
  ['bench/results/', 'written by `npm run bench`'],
  ['bench/peer/node_modules', 'installed by the harness on first use'],
  ['dist/', 'the build output (`npm run build`)'],
  ['client/dist/', 'the client\'s build output'],
  ['deploy/petstore', 'a Kubernetes resource (kubectl\'s deployment/petstore), not a file'],
  ['my-petstore/', 'the reader\'s own overlay, which deploy/kubernetes/README.md shows how to write']
]

/**
 * The files of the checkout, as paths from its root (without node_modules, build output and git's own). Other tests
 * running beside this one make and remove folders of their own at the root (an earlier release's src/, a docs
 * example's folder): those are not descended into, and a folder that vanishes during the walk is passed over.
 */
function checkoutFiles (): string[] {
  const skip = /^(node_modules|dist|\.git|\.release-.*|\.docs-example-.*)$/
  const found: string[] = []
  const walk = (dir: string): void => {
    let entries: Dirent[]
    try {
      entries = readdirSync(join(ROOT, dir), { withFileTypes: true })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
      throw error
    }
    for (const entry of entries) {
      if (skip.test(entry.name)) continue
      const path = dir === '' ? entry.name : `${dir}/${entry.name}`
      found.push(path)
      if (entry.isDirectory()) walk(path)
    }
  }
  walk('')
  return found
}

/** The comments of a source file, found by TypeScript's parser (so that no string or regular expression is taken for one). */
export function commentsOf (path: string, text: string): string[] {
  if (path.endsWith('.sh')) return text.split('\n').filter((line) => /^\s*#/.test(line))
  if (path.endsWith('.lua')) return text.split('\n').filter((line) => /^\s*--/.test(line))
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, path.endsWith('.js') ? ts.ScriptKind.JS : ts.ScriptKind.TS)
  const found = new Map<number, string>()
  const add = (ranges: ts.CommentRange[] | undefined): void => {
    for (const range of ranges ?? []) found.set(range.pos, text.slice(range.pos, range.end))
  }
  const visit = (node: ts.Node): void => {
    add(ts.getLeadingCommentRanges(text, node.getFullStart()))
    add(ts.getTrailingCommentRanges(text, node.getEnd()))
    node.forEachChild(visit)
  }
  visit(source)
  return [...found.values()]
}

/** A text with where it comes from: a page, or a comment of a source file. */
export interface Source { path: string, text: string, kind: 'page' | 'comment' }

/** Every comment of the code and every documentation page (README.md, BENCHMARKS.md, docs/, the other READMEs). */
export function sources (): Source[] {
  const code = CODE_DIRS.flatMap((dir) => readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .map((name) => `${dir}/${name.split('\\').join('/')}`))
    .filter((path) => /\.(ts|js|sh|lua)$/.test(path) && !/(^|\/)(node_modules|dist)\//.test(path) && !GENERATED.has(path))
    .sort()
  const pages = [...documentationPages(), 'client/README.md', 'deploy/kubernetes/README.md'].filter((page) => existsSync(join(ROOT, page)))
  return [
    ...code.flatMap((path) => commentsOf(path, readFileSync(join(ROOT, path), 'utf8')).map((text): Source => ({ path, text, kind: 'comment' }))),
    ...pages.map((path): Source => ({ path, text: readFileSync(join(ROOT, path), 'utf8'), kind: 'page' }))
  ]
}

/** Something shaped like a path: folders and a name, started at a word boundary (not inside a URL or a package name). */
const PATH_LIKE = /(?<![\w.@/:$~%-])((?:\.{1,2}\/)*(?:[\w.*<>-]+\/)+[\w.*<>-]*[\w*>])/g

/**
 * The repository paths a text names: a path under one of the top-level folders, or a file name with its folder;
 * `./` and `../` as written. A `#anchor` or `:line` after it is left off.
 */
export function pathsIn (text: string): string[] {
  return [...text.matchAll(PATH_LIKE)].map((match) => (match[1] as string).replace(/[#:].*$/, '')).filter((path) => {
    const inner = path.replace(/^(\.{1,2}\/)+/, '')
    // A file beside the text (./pages.ts) or in a folder (src/x.ts, http/paging.ts), or any path under a top folder.
    if (!inner.includes('/')) return inner !== path && FILE_EXTENSION.test(inner)
    const top = inner.split('/')[0] as string
    return TOP_DIRS.includes(top) || FILE_EXTENSION.test(inner)
  })
}

let files: string[] | undefined

/**
 * Why a path named by `from` is not in the checkout, or null when it is: from the root, from `from`'s folder, or from
 * src/ (the service's own modules), or a package's file under node_modules. `*` and `<name>` are placeholders: some
 * file must match.
 */
export function missingPath (from: string, path: string): string | null {
  const inner = path.replace(/^(\.{1,2}\/)+/, '')
  const fromRoot = path.startsWith('../') ? relative(ROOT, resolve(ROOT, dirname(from), path)) : inner
  if (NOT_IN_A_CHECKOUT.some(([prefix]) => fromRoot.startsWith(prefix))) return null
  if (/[*<>]/.test(path)) {
    const pattern = new RegExp(`^${fromRoot.split(/(\*|<[^>]*>?)/).map((part, i) => i % 2 === 1 ? '[^/]+' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('')}`)
    files ??= checkoutFiles()
    return files.some((file) => pattern.test(file)) ? null : `${path}: no file matches`
  }
  const candidates = [join(ROOT, fromRoot), resolve(ROOT, dirname(from), path), join(ROOT, 'src', inner), join(ROOT, 'node_modules', inner)]
  return candidates.some((candidate) => existsSync(candidate)) ? null : `${path}: no such file or folder`
}

/** A figure with its unit: "3.78 s", "212 MB", "36-40 µs" (its last number), "93.2 %". */
const FIGURE = /(\d[\d,]*(?:\.\d+)?)\s?(µs|ms|s|KB|MB|GB|%)(?![\w])/g

function figures (text: string): Array<{ value: number, decimals: number, unit: string, text: string }> {
  return [...text.matchAll(FIGURE)].map((match) => {
    const digits = (match[1] as string).replaceAll(',', '')
    return { value: Number(digits), decimals: digits.split('.')[1]?.length ?? 0, unit: match[2] as string, text: match[0] }
  })
}

/** The sentences of a text, lines joined: a sentence ends with '.', ':' or ';' before a space and a capital or markup. */
function sentences (text: string): string[] {
  return text.replace(/\n(?!\n)/g, ' ').split(/(?<=[.:;])\s+(?=[A-Z(*`[])|\n\n/)
}

/** A benchmark command: what tells a sentence that cites BENCHMARKS.md reports a measurement. */
const BENCH_COMMAND = /npm run bench|BENCH_ONLY|bench:(import|profile)|test:load/

/**
 * The figures a text attributes to BENCHMARKS.md that BENCHMARKS.md does not hold: in a comment that names it, every
 * figure; on a page, every figure of a sentence that names it and a benchmark command. A figure may be written
 * rounded ("about 3.8 s" for 3.78 s).
 */
export function unheldFigures (source: Source, benchmarks: string): string[] {
  if (!source.text.includes('BENCHMARKS.md')) return []
  const held = figures(benchmarks)
  const claims = source.kind === 'comment'
    ? [source.text]
    : sentences(source.text).filter((sentence) => sentence.includes('BENCHMARKS.md') && BENCH_COMMAND.test(sentence))
  return claims.flatMap((claim) => figures(claim)).filter((figure) => !held.some((h) => h.unit === figure.unit &&
    Number(h.value.toFixed(figure.decimals)) === figure.value)).map((figure) => figure.text)
}
