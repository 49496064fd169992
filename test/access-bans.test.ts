import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { isBanned, nextBan, strikeThreshold } from '../src/access/bans.js'

const policy = { strikes: null, strikeWindowSeconds: 600, baseSeconds: 900, maxSeconds: 86_400, repeatWindowSeconds: 86_400 }
const T0 = Date.parse('2026-11-22T12:00:00Z')
const HOUR = 3_600_000

describe('bans', () => {
  test('when a key is banned for the first time, then the ban lasts the base 15 minutes', () => {
    assert.deepEqual(nextBan(null, T0, policy), { since: new Date(T0), until: new Date(T0 + 900_000), seconds: 900 })
  })

  test('when a key is banned again within 24 hours, then each ban doubles, capped at 24 hours', () => {
    let ban = nextBan(null, T0, policy)
    const lengths = [ban.seconds]
    for (let i = 1; i <= 10; i++) {
      ban = nextBan(ban, ban.until.getTime() + HOUR, policy)
      lengths.push(ban.seconds)
    }
    assert.deepEqual(lengths, [900, 1800, 3600, 7200, 14_400, 28_800, 57_600, 86_400, 86_400, 86_400, 86_400])
  })

  test('when the previous ban ended more than 24 hours ago, then the ban is back to the base length', () => {
    const old = { since: new Date(T0 - 26 * HOUR), until: new Date(T0 - 24 * HOUR), seconds: 7200 }
    assert.equal(nextBan(old, T0, policy).seconds, 900)
  })

  test('when the threshold is not configured, then it is the per-minute limit', () => {
    assert.equal(strikeThreshold(policy, 60), 60)
    assert.equal(strikeThreshold({ ...policy, strikes: 5 }, 60), 5)
  })

  test('when the ban end has passed, then the key is no longer banned', () => {
    const ban = nextBan(null, T0, policy)
    assert.equal(isBanned(ban, T0 + 899_999), true)
    assert.equal(isBanned(ban, T0 + 900_000), false)
    assert.equal(isBanned(null, T0), false)
  })
})
