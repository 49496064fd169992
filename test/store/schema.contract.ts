/**
 * The store's own contract: its schema once migrated, and the store itself (ping, kind). Each runner calls
 * schemaContract() with a function that opens a fresh, migrated, empty store for one test (and registers its cleanup on
 * that test's context).
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { Store } from '../../src/store/store.js'

export function schemaContract (name: string, open: (t: TestContext) => Promise<Store>): void {
  describe(`${name}: schema`, () => {
    describe('lifecycle', () => {
      test('migrate on a migrated store applies nothing and returns 0', async (t) => {
        const store = await open(t)
        assert.equal(await store.schema.migrate(), 0)
        assert.equal(await store.schema.migrate(), 0)
      })

      test('ping resolves', async (t) => {
        const store = await open(t)
        assert.equal(await store.ping(), undefined)
      })

      test('kind is a non-empty name', async (t) => {
        const store = await open(t)
        assert.equal(typeof store.kind, 'string')
        assert.ok(store.kind.length > 0)
      })
    })
  })
}
