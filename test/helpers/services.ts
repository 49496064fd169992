/**
 * The real servers some tests need (PostgreSQL, Redis), and the rule for when one is missing: with CI=true
 * those tests fail, so a broken service cannot pass as green; elsewhere they are skipped with a message.
 */
import { test } from 'node:test'

/**
 * Registers what stands in for a group of tests when its server is unreachable: a failing test in CI, a
 * skipped one otherwise. Returns true when the real tests should be registered.
 */
export async function requireService (service: string, url: string, reachable: () => Promise<boolean>, what: string, override: string): Promise<boolean> {
  if (await reachable()) return true
  const shown = url.replace(/\/\/[^@/]*@/, '//')
  const message = `${service} not reachable at ${shown}: skipping ${what}`
  if (process.env.CI === 'true') {
    test(`${what} need ${service} at ${shown}`, () => {
      throw new Error(`${service} not reachable at ${shown}, and CI=true requires these tests to run (set ${override} or start ${service})`)
    })
  } else {
    console.warn(message)
    test(what, { skip: message }, () => {})
  }
  return false
}
