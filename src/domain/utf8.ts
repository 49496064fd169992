/**
 * UTF-8 validation of a byte stream, chunk by chunk (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF). A decoder that is not told to be strict turns every bad byte into U+FFFD without a word; an import
 * must instead name where the file is broken.
 */
import { isUtf8 } from 'node:buffer'

/** The offset of the first byte of the first invalid sequence in `bytes`, or -1 when every sequence is valid. */
function firstInvalidUtf8 (bytes: Uint8Array): number {
  const n = bytes.length
  let i = 0
  while (i < n) {
    const b = bytes[i] as number
    if (b < 0x80) {
      i++
      continue
    }
    let length: number
    let low = 0x80
    let high = 0xBF
    if (b >= 0xC2 && b <= 0xDF) length = 2
    else if (b >= 0xE0 && b <= 0xEF) {
      length = 3
      if (b === 0xE0) low = 0xA0 // overlong
      if (b === 0xED) high = 0x9F // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      length = 4
      if (b === 0xF0) low = 0x90 // overlong
      if (b === 0xF4) high = 0x8F // above U+10FFFF
    } else return i
    if (i + length > n) return i
    const second = bytes[i + 1] as number
    if (second < low || second > high) return i
    for (let k = 2; k < length; k++) {
      const next = bytes[i + k] as number
      if (next < 0x80 || next > 0xBF) return i
    }
    i += length
  }
  return -1
}

/** How many bytes the sequence led by `b` takes; 1 for a byte that cannot lead one (it is invalid on its own). */
function sequenceLength (b: number): number {
  if (b >= 0xF0) return 4
  if (b >= 0xE0) return 3
  if (b >= 0xC0) return 2
  return 1
}

/** Validates a stream of chunks; a character may be split between two chunks. */
export class Utf8Stream {
  #carry: Uint8Array = new Uint8Array(0)
  /** Bytes of the stream before the carry. */
  #consumed = 0

  /** Takes the next chunk; returns -1, or the stream offset of the first byte of an invalid sequence. */
  push (chunk: Uint8Array): number {
    const data = this.#carry.length === 0 ? chunk : Buffer.concat([this.#carry, chunk])
    // A sequence that starts in the last three bytes and needs more bytes waits for the next chunk.
    let end = data.length
    for (let back = 1; back <= Math.min(3, data.length); back++) {
      const b = data[data.length - back] as number
      if ((b & 0xC0) === 0x80) continue
      if (b >= 0xC0 && sequenceLength(b) > back) end = data.length - back
      break
    }
    const complete = data.subarray(0, end)
    const base = this.#consumed
    this.#carry = data.slice(end)
    this.#consumed += end
    if (isUtf8(complete)) return -1
    return base + firstInvalidUtf8(complete)
  }

  /** At the end of the stream: -1, or the offset of a sequence the stream ends in the middle of. */
  end (): number {
    return this.#carry.length === 0 ? -1 : this.#consumed
  }
}
