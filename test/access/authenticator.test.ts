/** The authenticator's cache of key lookups, without HTTP: what it keeps, and how much of it. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Authenticator } from '../../src/access/authenticator.js'
import { newKey } from '../../src/access/keys.js'

/** An authenticator over a key table that knows no key, counting the lookups that reach it. */
function counting (maxEntries: number): { authenticator: Authenticator, lookups: () => number } {
  let lookups = 0
  const store = { keys: { findApiKeyByHash: async () => { lookups++; return null } } }
  return { authenticator: new Authenticator(store, 'production', 60_000, maxEntries), lookups: () => lookups }
}

test('a token looked up once is answered from the cache until entries beyond the bound push it out', async () => {
  const { authenticator, lookups } = counting(3)
  const tokens = Array.from({ length: 4 }, () => newKey('production'))
  const identify = (token: string) => authenticator.identify({ kind: 'bearer', token })

  for (const token of tokens.slice(0, 3)) assert.deepEqual(await identify(token), { problem: 'invalid' })
  assert.equal(lookups(), 3)
  // The three fit: asked again, none reaches the store.
  for (const token of tokens.slice(0, 3)) await identify(token)
  assert.equal(lookups(), 3)
  // A fourth pushes out the least recently used (the first), and only it.
  await identify(tokens[3] as string)
  assert.equal(lookups(), 4)
  await identify(tokens[1] as string)
  await identify(tokens[2] as string)
  await identify(tokens[3] as string)
  assert.equal(lookups(), 4)
  await identify(tokens[0] as string)
  assert.equal(lookups(), 5)
})
