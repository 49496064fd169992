/**
 * The change streams contract (src/store/streams/types.ts): registrations counted per quota across instances and
 * renewed, the same on every store (./harness.ts opens them).
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { Open } from './harness.js'
import { at } from './webhooks.contract.js'

export function streamsContract (name: string, open: Open): void {
  describe(`${name}: streams`, () => {
    describe('openEventStream, renewEventStreams, closeEventStream', () => {
      test('when a quota has max streams open across instances, then another is refused; other quotas are not counted; closing frees a place', async (t) => {
        const { store, peer } = await open(t)
        const other = await peer()
        assert.equal(await store.streams.openEventStream('s1', 'key_a', 'key_a', at(60), at(0), 2), true)
        assert.equal(await other.streams.openEventStream('s2', 'key_a', 'key_a', at(60), at(0), 2), true)
        assert.equal(await store.streams.openEventStream('s3', 'key_a', 'key_a', at(60), at(1), 2), false)
        assert.equal(await other.streams.openEventStream('s4', 'key_a', 'key_a', at(60), at(1), 2), false)
        assert.equal(await other.streams.openEventStream('s5', 'key_b', 'key_b', at(60), at(1), 2), true)
        await store.streams.closeEventStream('s2')
        assert.equal(await other.streams.openEventStream('s6', 'key_a', 'key_a', at(60), at(2), 2), true)
        assert.equal(await store.streams.openEventStream('s7', 'key_a', 'key_a', at(60), at(2), 2), false)
      })

      test('when instances open streams of one quota at once, then no more than max are registered', async (t) => {
        const { store, peer } = await open(t)
        const other = await peer()
        const opened = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? store : other).streams.openEventStream(`r${i}`, 'key_race', 'key_race', at(60), at(0), 3)))
        assert.equal(opened.filter(Boolean).length, 3)
      })

      test('when registrations expired, then they no longer count; renewed ones keep counting', async (t) => {
        const { store, peer } = await open(t)
        const other = await peer()
        assert.equal(await store.streams.openEventStream('old', 'key_a', 'key_a', at(10), at(0), 1), true)
        assert.equal(await other.streams.openEventStream('new', 'key_a', 'key_a', at(30), at(9), 1), false)
        assert.equal(await other.streams.openEventStream('new', 'key_a', 'key_a', at(30), at(10), 1), true, 'expired at its expiry')
        await other.streams.renewEventStreams(['new', 'unknown'], at(100))
        assert.equal(await store.streams.openEventStream('third', 'key_a', 'key_a', at(120), at(50), 1), false, 'renewed past at(30)')
        await other.streams.renewEventStreams([], at(200))
        assert.equal(await store.streams.openEventStream('third', 'key_a', 'key_a', at(120), at(100), 1), true)
      })
    })
  })
}
