import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { isRfc3339DateTime } from '../src/datetime.js'

describe('isRfc3339DateTime', () => {
  for (const text of ['2027-12-31T23:59:59Z', '2024-02-29T00:00:00Z', '2026-06-01T12:00:00.123+02:00', '2026-06-01t00:00:00z', '2026-06-01 00:00:00-05:30']) {
    test(`when given ${text}, then it is accepted`, () => assert.equal(isRfc3339DateTime(text), true))
  }
  for (const text of ['2026-02-30T00:00:00Z', '2025-02-29T00:00:00Z', '2026-13-01T00:00:00Z', '2026-01-01T24:00:00Z',
    '2026-01-01T00:60:00Z', '2026-01-01T00:00:00', '2026-01-01', 'next year', '2026-01-01T00:00:00+24:00', '']) {
    test(`when given "${text}", then it is rejected`, () => assert.equal(isRfc3339DateTime(text), false))
  }
})
