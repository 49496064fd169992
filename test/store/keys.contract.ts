/**
 * The API keys contract (src/store/keys/types.ts), the same on every store. Each runner calls keysContract() with a
 * function that opens a fresh, migrated, empty store for one test. Every test makes its own data; nothing is shared.
 */
import assert from 'node:assert/strict'
import { describe, test, type TestContext } from 'node:test'
import type { ApiKeyRecord } from '../../src/model.js'
import type { Store } from '../../src/store/store.js'
import { asRecord, newKey } from './helpers.js'

export function keysContract (name: string, open: (t: TestContext) => Promise<Store>): void {
  describe(`${name}: keys`, () => {
    describe('api keys', () => {
      test('banApiKey records the ban on the key; unbanApiKey ends it early and keeps its length', async (t) => {
        const store = await open(t)
        const key = newKey('key_ban')
        await store.keys.createApiKey(key)
        const ban = { since: new Date('2026-11-22T12:00:00.000Z'), until: new Date('2026-11-22T12:15:00.000Z'), seconds: 900 }
        assert.equal(await store.keys.banApiKey(key.id, ban), true)
        assert.deepEqual((await store.keys.findApiKeyByHash(key.keyHash))?.ban, ban)
        assert.deepEqual((await store.keys.listApiKeys())[0]?.ban, ban)
        const liftedAt = new Date('2026-11-22T12:05:00.000Z')
        assert.equal(await store.keys.unbanApiKey(key.id, liftedAt), true)
        assert.deepEqual((await store.keys.findApiKeyByHash(key.keyHash))?.ban, { ...ban, until: liftedAt })
        // Lifting again later changes nothing: the ban already ended.
        assert.equal(await store.keys.unbanApiKey(key.id, new Date('2026-11-22T12:10:00.000Z')), true)
        assert.deepEqual((await store.keys.findApiKeyByHash(key.keyHash))?.ban, { ...ban, until: liftedAt })
      })

      test('a key keeps its scope and expiry; keys created without them have scope write and never expire', async (t) => {
        const store = await open(t)
        const reader = newKey('key_reader', { scope: 'read', expiresAt: new Date('2027-02-20T00:00:00.000Z') })
        const plain = newKey('key_plain')
        await store.keys.createApiKey(reader)
        await store.keys.createApiKey(plain)
        const found = await store.keys.findApiKeyByHash(reader.keyHash)
        assert.deepEqual(found, asRecord(reader))
        assert.equal(found?.scope, 'read')
        assert.deepEqual(found?.expiresAt, new Date('2027-02-20T00:00:00.000Z'))
        const other = await store.keys.findApiKeyByHash(plain.keyHash)
        assert.equal(other?.scope, 'write')
        assert.equal(other?.expiresAt, null)
        assert.equal(other?.quotaId, 'key_plain')
      })

      test('rotateApiKey creates the replacement with the old quota and ends the old key at the sooner of the overlap and its expiry', async (t) => {
        const store = await open(t)
        const at = new Date('2026-11-23T10:00:00.000Z')
        const ban = { since: new Date('2026-11-23T09:00:00.000Z'), until: new Date('2026-11-23T09:15:00.000Z'), seconds: 900 }
        await store.keys.createApiKey(newKey('key_old', { scope: 'read' }))
        await store.keys.banApiKey('key_old', ban)
        const replacement = newKey('key_new', { scope: 'read', quotaId: 'key_old', createdAt: at })
        const endsAt = new Date('2026-11-24T10:00:00.000Z')
        assert.equal(await store.keys.rotateApiKey('key_old', { ...replacement, quotaId: 'key_old' }, endsAt), 'rotated')
        const keys = new Map((await store.keys.listApiKeys()).map((key) => [key.id, key]))
        assert.deepEqual(keys.get('key_new'), asRecord(replacement, null, ban), 'the old key\'s ban carries over')
        assert.equal(keys.get('key_new')?.quotaId, 'key_old')
        assert.deepEqual(keys.get('key_old')?.expiresAt, endsAt)
        assert.equal(keys.get('key_old')?.replacedBy, 'key_new')
        // The replaced key cannot be rotated again (the lineage never forks); the new one can.
        assert.equal(await store.keys.rotateApiKey('key_old', { ...newKey('key_fork', { createdAt: at }), quotaId: 'key_old' }, endsAt), 'replaced')
        const sooner = new Date('2026-11-23T12:00:00.000Z')
        await store.keys.createApiKey(newKey('key_short', { expiresAt: sooner }))
        assert.equal(await store.keys.rotateApiKey('key_short', { ...newKey('key_short2', { createdAt: at }), quotaId: 'key_short' }, endsAt), 'rotated')
        assert.deepEqual((await store.keys.listApiKeys()).find((key) => key.id === 'key_short')?.expiresAt, sooner)
        assert.equal((await store.keys.listApiKeys()).some((key) => key.id === 'key_fork'), false, 'a refused rotation creates nothing')
      })

      test('rotateApiKey gives the replacement the ban the old key has in the store when it rotates (one recorded after the caller read the key too)', async (t) => {
        const store = await open(t)
        const at = new Date('2026-11-23T10:00:00.000Z')
        await store.keys.createApiKey(newKey('key_banned'))
        // Banned after the caller read the key (which had no ban then).
        const ban = { since: new Date('2026-11-23T09:59:00.000Z'), until: new Date('2026-11-23T10:14:00.000Z'), seconds: 900 }
        await store.keys.banApiKey('key_banned', ban)
        assert.equal(await store.keys.rotateApiKey('key_banned', { ...newKey('key_heir', { createdAt: at }), quotaId: 'key_banned' },
          new Date('2026-11-24T10:00:00.000Z')), 'rotated')
        assert.deepEqual((await store.keys.listApiKeys()).find((key) => key.id === 'key_heir')?.ban, ban)
      })

      test('rotateApiKey refuses an unknown, revoked or expired key and creates nothing', async (t) => {
        const store = await open(t)
        const at = new Date('2026-11-23T10:00:00.000Z')
        const endsAt = new Date('2026-11-24T10:00:00.000Z')
        await store.keys.createApiKey(newKey('key_revoked'))
        await store.keys.revokeApiKey('key_revoked', new Date('2026-11-23T09:00:00.000Z'))
        await store.keys.createApiKey(newKey('key_expired', { expiresAt: new Date('2026-11-23T09:59:59.999Z') }))
        assert.equal(await store.keys.rotateApiKey('key_missing', { ...newKey('key_a', { createdAt: at }), quotaId: 'key_missing' }, endsAt), 'not_found')
        assert.equal(await store.keys.rotateApiKey('key_revoked', { ...newKey('key_b', { createdAt: at }), quotaId: 'key_revoked' }, endsAt), 'inactive')
        assert.equal(await store.keys.rotateApiKey('key_expired', { ...newKey('key_c', { createdAt: at }), quotaId: 'key_expired' }, endsAt), 'inactive')
        assert.deepEqual((await store.keys.listApiKeys()).map((key) => key.id).sort(), ['key_expired', 'key_revoked'])
      })

      test('a ban and its lifting reach every key sharing the quota, and no other key', async (t) => {
        const store = await open(t)
        await store.keys.createApiKey(newKey('key_first'))
        await store.keys.createApiKey(newKey('key_second', { quotaId: 'key_first' }))
        await store.keys.createApiKey(newKey('key_stranger'))
        const ban = { since: new Date('2026-11-23T10:00:00.000Z'), until: new Date('2026-11-23T10:15:00.000Z'), seconds: 900 }
        assert.equal(await store.keys.banApiKey('key_second', ban), true)
        const bans = async () => new Map((await store.keys.listApiKeys()).map((key) => [key.id, key.ban]))
        assert.deepEqual((await bans()).get('key_first'), ban)
        assert.deepEqual((await bans()).get('key_second'), ban)
        assert.equal((await bans()).get('key_stranger'), null)
        const liftedAt = new Date('2026-11-23T10:05:00.000Z')
        assert.equal(await store.keys.unbanApiKey('key_first', liftedAt), true)
        assert.deepEqual((await bans()).get('key_second'), { ...ban, until: liftedAt })
      })

      test('recordKeyUse moves the last use times forward only, the deprecated one only when given', async (t) => {
        const store = await open(t)
        await store.keys.createApiKey(newKey('key_used'))
        const t1 = new Date('2026-11-23T10:00:00.000Z')
        const t2 = new Date('2026-11-23T10:01:00.000Z')
        await store.keys.recordKeyUse('key_used', t2, null)
        let key = await store.keys.findApiKeyByHash('hash-of-key_used')
        assert.deepEqual([key?.lastUsedAt, key?.lastDeprecatedUseAt], [t2, null])
        // An instance that recorded earlier arrives late: nothing goes backwards.
        await store.keys.recordKeyUse('key_used', t1, t1)
        key = await store.keys.findApiKeyByHash('hash-of-key_used')
        assert.deepEqual([key?.lastUsedAt, key?.lastDeprecatedUseAt], [t2, t1])
        await store.keys.recordKeyUse('key_used', t2, t2)
        key = await store.keys.findApiKeyByHash('hash-of-key_used')
        assert.deepEqual([key?.lastUsedAt, key?.lastDeprecatedUseAt], [t2, t2])
        await store.keys.recordKeyUse('key_missing', t2, null)
      })

      test('banApiKey and unbanApiKey answer false for an unknown key id', async (t) => {
        const store = await open(t)
        const ban = { since: new Date(), until: new Date(Date.now() + 1000), seconds: 1 }
        assert.equal(await store.keys.banApiKey('key_missing', ban), false)
        assert.equal(await store.keys.unbanApiKey('key_missing', new Date()), false)
      })

      test('createApiKey then findApiKeyByHash returns the record with Date fields and null limits for a non-enterprise key', async (t) => {
        const store = await open(t)
        const key = newKey('key_free', { plan: 'pro' })
        await store.keys.createApiKey(key)
        const found = await store.keys.findApiKeyByHash(key.keyHash)
        assert.deepEqual(found, asRecord(key))
        assert.ok(found?.createdAt instanceof Date)
        assert.equal(found.perMinute, null)
        assert.equal(found.perDay, null)
        assert.equal(found.revokedAt, null)
      })

      test('findApiKeyByHash returns numeric limits for an enterprise key and a null name when unnamed', async (t) => {
        const store = await open(t)
        const key = newKey('key_ent', { plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000_000, name: null })
        await store.keys.createApiKey(key)
        const found = await store.keys.findApiKeyByHash(key.keyHash)
        assert.deepEqual(found, asRecord(key))
        assert.equal(typeof found?.perMinute, 'number')
        assert.equal(typeof found?.perDay, 'number')
      })

      test('findApiKeyByHash returns null for an unknown hash', async (t) => {
        const store = await open(t)
        assert.equal(await store.keys.findApiKeyByHash('nope'), null)
        await store.keys.createApiKey(newKey('key_1'))
        assert.equal(await store.keys.findApiKeyByHash('nope'), null)
        assert.equal(await store.keys.findApiKeyByHash('key_1'), null) // an id is not a hash
        assert.equal(await store.keys.findApiKeyByHash('HASH-OF-KEY_1'), null) // hashes match exactly
      })

      test('listApiKeys returns every key and no hash field', async (t) => {
        const store = await open(t)
        assert.deepEqual(await store.keys.listApiKeys(), [])
        const keys = [
          newKey('key_b', { plan: 'free', createdAt: new Date('2026-11-22T12:00:00.000Z') }),
          newKey('key_a', { plan: 'business', name: null, createdAt: new Date('2026-11-21T08:30:15.250Z') }),
          newKey('key_c', { plan: 'enterprise', perMinute: 10, perDay: 20, createdAt: new Date('2026-11-23T00:00:00.999Z') })
        ]
        for (const key of keys) await store.keys.createApiKey(key)
        const listed = await store.keys.listApiKeys()
        const byId = (a: ApiKeyRecord, b: ApiKeyRecord) => a.id.localeCompare(b.id)
        assert.deepEqual([...listed].sort(byId), keys.map((k) => asRecord(k)).sort(byId))
        for (const record of listed) {
          assert.deepEqual(Object.keys(record).filter((k) => /hash/i.test(k)), [])
          assert.ok(!Object.values(record).some((v) => typeof v === 'string' && v.startsWith('hash-of-')), 'a hash value leaked')
        }
      })

      test('revokeApiKey returns true and sets revokedAt', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        const other = newKey('key_2')
        await store.keys.createApiKey(key)
        await store.keys.createApiKey(other)
        const at = new Date('2026-12-01T09:00:00.456Z')
        assert.equal(await store.keys.revokeApiKey('key_1', at), true)
        assert.deepEqual(await store.keys.findApiKeyByHash(key.keyHash), asRecord(key, at))
        assert.deepEqual(await store.keys.findApiKeyByHash(other.keyHash), asRecord(other))
      })

      test('revoking a key twice keeps the first revokedAt', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.keys.createApiKey(key)
        const first = new Date('2026-12-01T09:00:00.456Z')
        assert.equal(await store.keys.revokeApiKey('key_1', first), true)
        assert.equal(await store.keys.revokeApiKey('key_1', new Date('2026-12-02T09:00:00.000Z')), true)
        assert.deepEqual(await store.keys.findApiKeyByHash(key.keyHash), asRecord(key, first))
        assert.deepEqual(await store.keys.listApiKeys(), [asRecord(key, first)])
      })

      test('revokeApiKey returns false for an unknown id and changes nothing', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.keys.createApiKey(key)
        assert.equal(await store.keys.revokeApiKey('key_unknown', new Date()), false)
        assert.equal(await store.keys.revokeApiKey(key.keyHash, new Date()), false) // a hash is not an id
        assert.deepEqual(await store.keys.listApiKeys(), [asRecord(key)])
      })

      test('createApiKey rejects a duplicate key hash and keeps the first key', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.keys.createApiKey(key)
        await assert.rejects(store.keys.createApiKey(newKey('key_2', { keyHash: key.keyHash, plan: 'enterprise', perMinute: 1, perDay: 1 })))
        assert.deepEqual(await store.keys.findApiKeyByHash(key.keyHash), asRecord(key))
        assert.deepEqual(await store.keys.listApiKeys(), [asRecord(key)])
      })

      test('createApiKey rejects a duplicate id', async (t) => {
        const store = await open(t)
        const key = newKey('key_1')
        await store.keys.createApiKey(key)
        await assert.rejects(store.keys.createApiKey(newKey('key_1', { keyHash: 'another-hash' })))
        assert.equal(await store.keys.findApiKeyByHash('another-hash'), null)
        assert.deepEqual(await store.keys.listApiKeys(), [asRecord(key)])
      })
    })
  })
}
