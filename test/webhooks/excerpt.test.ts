/**
 * What the deliveries log keeps of an endpoint's answer (src/domain/webhook-dispatch.ts): at most 256 bytes, cut
 * between characters, with signatures, webhook secrets and API keys redacted before the cut.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { RESPONSE_EXCERPT_BYTES, responseExcerpt } from '../../src/domain/webhook-dispatch.js'

describe('responseExcerpt', () => {
  test('when the answer is short, then it is kept whole', () => {
    assert.equal(responseExcerpt('{"ok":true}'), '{"ok":true}')
  })

  test('when the answer is longer than 256 bytes, then 256 bytes are kept, and never half a character', () => {
    assert.equal(RESPONSE_EXCERPT_BYTES, 256)
    assert.equal(responseExcerpt('a'.repeat(1000)), 'a'.repeat(256))
    // 'é' is two bytes, '€' three: 256 is no multiple of three, so the cut falls inside a character, which is dropped.
    assert.equal(responseExcerpt('é'.repeat(500)), 'é'.repeat(128))
    assert.equal(responseExcerpt('€'.repeat(500)), '€'.repeat(85))
  })

  test('when the answer holds signatures, webhook secrets or API keys, then they are redacted, also those the cut would have halved', () => {
    const key = `psk_live_${'A1b2C3'.repeat(8)}x`
    const text = `sig=v1,${'Q'.repeat(43)}= secret=whsec_${'z'.repeat(44)} key=${key}`
    assert.equal(responseExcerpt(text), 'sig=v1,[redacted] secret=whsec_[redacted] key=psk_live_[redacted]')
    // A key that starts 16 bytes before the cut: redacted whole before the cut, so none of its secret part is kept.
    const kept = responseExcerpt(`${'.'.repeat(RESPONSE_EXCERPT_BYTES - 16)}${key}${'.'.repeat(100)}`)
    assert.equal(kept, `${'.'.repeat(RESPONSE_EXCERPT_BYTES - 16)}psk_live_[redact`)
  })
})
