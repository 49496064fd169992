/**
 * An earlier release of this repository, built from its git commit while the tests run: its src/ is extracted
 * (`git archive`) into a temporary folder at the top of the checkout, so that its imports resolve this checkout's
 * node_modules and tsx runs it as it runs src/, and the folder is removed after the file's tests. Nothing is
 * adapted: the code is the commit's, byte for byte.
 *
 * A checkout without the commit (a shallow clone, a source tarball, no git) cannot build it. CI runs on a full
 * clone, so there (CI=true) that is a failing test, never a silent pass; elsewhere the tests are skipped with a
 * message, as the tests of a missing server are (services.ts).
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, test } from 'node:test'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

function hasCommit (commit: string): boolean {
  try {
    execFileSync('git', ['cat-file', '-e', `${commit}^{commit}`], { cwd: ROOT, stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/**
 * The folder holding `src/` of `commit` (a full hash), removed after this file's tests; undefined, with a skipped
 * test (or, with CI=true, a failing one) registered for `what`, when this checkout does not have the commit.
 */
export function releaseFromGit (commit: string, what: string): string | undefined {
  if (!hasCommit(commit)) {
    const reason = `commit ${commit} is not in this checkout (a shallow clone?)`
    if (process.env.CI === 'true') {
      test(`${what} need commit ${commit}`, () => {
        throw new Error(`${reason}, and CI=true requires these tests to run: fetch the full history (git fetch --unshallow)`)
      })
    } else {
      const message = `${reason}: skipping ${what}`
      console.warn(message)
      test(what, { skip: message }, () => {})
    }
    return undefined
  }
  // The folder's name is ignored by git (.gitignore) and by the linter; outside test/, so tsc's include misses it.
  const dir = mkdtempSync(join(ROOT, `.release-${commit.slice(0, 7)}-`))
  after(() => rmSync(dir, { recursive: true, force: true }))
  try {
    const archive = execFileSync('git', ['archive', '--format=tar', commit, 'src'], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 })
    execFileSync('tar', ['-x', '-C', dir], { input: archive })
  } catch (error) {
    rmSync(dir, { recursive: true, force: true })
    throw error
  }
  return dir
}
