/**
 * The client's reader of text/event-stream, fed the way a network delivers: in pieces cut anywhere. The change stream
 * against the real service is tested in test/http/stream.test.ts ("client: streamChanges").
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { eventStreamReader, type StreamEvent } from '../../client/event-stream.js'

/** Feeds `pieces` and returns what the reader reported, in order. */
function read (pieces: string[]): Array<StreamEvent | { retry: number }> {
  const seen: Array<StreamEvent | { retry: number }> = []
  const reader = eventStreamReader({ onEvent: (event) => seen.push(event), onRetry: (ms) => seen.push({ retry: ms }) })
  for (const piece of pieces) reader.feed(piece)
  return seen
}

// What the service sends (LF), plus what the standard allows and a server may send (CR, CRLF, fields without a space).
const STREAM = 'retry: 1000\n\n' +
  ': heartbeat\n\n' +
  'event: inventory.changed\nid: f1:a\ndata: {"petId":9007199254740993,\ndata: "quantity":4}\n\n' +
  'event:inventory.changed\r\nid:f1:b\r\ndata:{"petId":1}\r\n\r\n' +
  'event: inventory.changed\rdata: {"petId":2}\r\r' +
  'id: x\0y\ndata: no id\n\n' +
  'event: other\nnote: unknown fields are ignored\ndata\n\n' +
  'id: dropped\n\n' +
  'data: last\n\n'

const EXPECTED = [
  { retry: 1000 },
  { event: 'inventory.changed', id: 'f1:a', data: '{"petId":9007199254740993,\n"quantity":4}' },
  { event: 'inventory.changed', id: 'f1:b', data: '{"petId":1}' },
  { event: 'inventory.changed', id: undefined, data: '{"petId":2}' },
  { event: 'message', id: undefined, data: 'no id' },
  { event: 'other', id: undefined, data: '' },
  { event: 'message', id: undefined, data: 'last' }
]

test('when the stream comes in one piece, then each event, its fields and the retry are read as the standard says', () => {
  assert.deepEqual(read([STREAM]), EXPECTED)
})

test('when the stream is cut in two at any place, a CRLF and a line end included, then the same events are read', () => {
  for (let at = 0; at <= STREAM.length; at++) {
    assert.deepEqual(read([STREAM.slice(0, at), STREAM.slice(at)]), EXPECTED, `cut at ${at}: ${JSON.stringify(STREAM.slice(at - 3, at + 3))}`)
  }
})

test('when the stream comes one character at a time, with empty pieces between, then the same events are read', () => {
  assert.deepEqual(read([...STREAM].flatMap((character) => [character, ''])), EXPECTED)
})

test('when an event has no blank line after it yet, then it is not reported until the blank line comes', () => {
  const seen: StreamEvent[] = []
  const reader = eventStreamReader({ onEvent: (event) => seen.push(event), onRetry: () => {} })
  const data = () => seen.map((event) => event.data)
  reader.feed('data: a\n')
  assert.deepEqual(data(), [])
  reader.feed('\r')
  assert.deepEqual(data(), ['a'])
  // The LF of that CRLF ends nothing more.
  reader.feed('\ndata: b\n\n')
  assert.deepEqual(data(), ['a', 'b'])
})
