/**
 * The documentation pages as the docs test reads them: their headings (as GitHub makes anchors of them), their
 * links, and their runnable shell blocks split into commands and the output each is shown to print.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import GithubSlugger from 'github-slugger'
import { Lexer, walkTokens, type Token } from 'marked'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/**
 * The pages whose links are checked and whose runnable blocks are run: README.md, BENCHMARKS.md, bench/README.md,
 * docs/*.md and the decision records (docs/adr/*.md).
 */
export function documentationPages (): string[] {
  const markdown = (dir: string): string[] => existsSync(join(ROOT, dir))
    ? readdirSync(join(ROOT, dir)).filter((name) => name.endsWith('.md')).sort().map((name) => `${dir}/${name}`)
    : []
  return ['README.md', 'BENCHMARKS.md', 'bench/README.md', ...markdown('docs'), ...markdown('docs/adr')]
    .filter((page) => existsSync(join(ROOT, page)))
}

interface Parsed { source: string, tokens: Token[] }
const parsed = new Map<string, Parsed>()

/** A page's tokens (marked's lexer), read once; `path` relative to the project root. */
function page (path: string): Parsed {
  let found = parsed.get(path)
  if (found === undefined) {
    const source = readFileSync(join(ROOT, path), 'utf8')
    found = { source, tokens: Lexer.lex(source) }
    parsed.set(path, found)
  }
  return found
}

/** The heading's text as GitHub slugs it: what it shows, without the markup. */
function plainText (tokens: Token[] | undefined): string {
  return (tokens ?? []).map((token) => {
    if ('tokens' in token && Array.isArray(token.tokens) && token.type !== 'codespan') return plainText(token.tokens)
    if (token.type === 'html') return ''
    return 'text' in token && typeof token.text === 'string' ? token.text : ''
  }).join('')
}

/** The anchors GitHub gives the page's headings (github-slugger: lower case, punctuation dropped, -1, -2 for repeats). */
export function anchors (path: string): Set<string> {
  const slugger = new GithubSlugger()
  const found = new Set<string>()
  walkTokens(page(path).tokens, (token) => {
    if (token.type === 'heading') found.add(slugger.slug(plainText(token.tokens)))
  })
  return found
}

/** Every link and image target of the page that stays in this repository (no scheme, not protocol-relative). */
export function internalLinks (path: string): string[] {
  const links: string[] = []
  walkTokens(page(path).tokens, (token) => {
    if ((token.type === 'link' || token.type === 'image') && !/^([a-z][a-z0-9+.-]*:|\/\/)/i.test(token.href)) links.push(token.href)
  })
  return links
}

/** Why a link of page `from` leads nowhere, or null when its file (and its heading, for `#anchor`) exists. */
export function brokenLink (from: string, href: string): string | null {
  const [target = '', anchor] = href.split('#', 2)
  const file = target === '' ? from : relative(ROOT, resolve(ROOT, dirname(from), decodeURIComponent(target)))
  if (!existsSync(join(ROOT, file))) return `${href}: no file ${file}`
  if (anchor === undefined || anchor === '') return null
  if (!file.endsWith('.md')) return `${href}: an anchor into a file that is not Markdown`
  return anchors(file).has(decodeURIComponent(anchor)) ? null : `${href}: ${file} has no heading with the anchor #${anchor}`
}

/** The page's fenced code blocks, in order: the first word of the info string (`ts`, `sh`, ...) and the text. */
export function codeBlocks (path: string): Array<{ lang: string, text: string }> {
  const blocks: Array<{ lang: string, text: string }> = []
  walkTokens(page(path).tokens, (token) => {
    if (token.type === 'code') blocks.push({ lang: (token.lang ?? '').split(/\s+/)[0] ?? '', text: token.text })
  })
  return blocks
}

/** One command of a runnable block: the lines since the previous comment or blank line, and what it is shown to print. */
export interface Step {
  /** Where its first line is, `page:line`. */
  where: string
  command: string
  /** The comment lines right after it, without their `# `; null when none follow. */
  expected: string | null
}

/** Fenced as ```` ```sh runnable ```` (or bash): the blocks the docs test runs. */
function runnable (lang: string | undefined): boolean {
  const words = (lang ?? '').split(/\s+/)
  return (words[0] === 'sh' || words[0] === 'bash') && words.includes('runnable')
}

/** The page's runnable blocks, in order, as steps. */
export function runnableSteps (path: string): Step[] {
  const { source, tokens } = page(path)
  const steps: Step[] = []
  let searchFrom = 0
  walkTokens(tokens, (token) => {
    if (token.type !== 'code' || !runnable(token.lang)) return
    // The block's fence, the next one marked runnable: its line + 1 is the block's first line.
    const fence = /^[ \t]*(`{3,}|~{3,})[ \t]*(sh|bash)\b[^\n]*\brunnable\b/gm
    fence.lastIndex = searchFrom
    const at = fence.exec(source)?.index ?? searchFrom
    searchFrom = at + 1
    const firstLine = source.slice(0, at).split('\n').length + 1
    steps.push(...blockSteps(token.text, path, firstLine))
  })
  return steps
}

/**
 * Splits a block into steps: consecutive command lines form one step, ended by a blank line or a comment line.
 * Comment lines directly after command lines are that step's expected output; comment lines after a blank line (or
 * at the start) are remarks and are not run.
 */
function blockSteps (text: string, path: string, firstLine: number): Step[] {
  const steps: Step[] = []
  let command: string[] = []
  let start = 0
  let expected: string[] | null = null
  const end = (): void => {
    if (command.length > 0) steps.push({ where: `${path}:${firstLine + start}`, command: command.join('\n'), expected: expected?.join('\n') ?? null })
    command = []
    expected = null
  }
  text.split('\n').forEach((line, index) => {
    const comment = /^\s*#/.test(line)
    if (line.trim() === '') {
      end()
    } else if (comment && expected !== null) {
      expected.push(line.replace(/^\s*# ?/, ''))
    } else if (comment && command.length > 0) {
      expected = [line.replace(/^\s*# ?/, '')]
    } else if (comment) {
      // a remark before a command
    } else {
      if (expected !== null) end()
      if (command.length === 0) start = index
      command.push(line)
    }
  })
  end()
  return steps
}
