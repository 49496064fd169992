/**
 * Reads a `text/event-stream` (Server-Sent Events) as the WHATWG HTML standard says ("Parsing an event stream"): lines
 * end in CR, LF or CRLF, possibly split across pieces; `data` lines of one event are joined with LF; a blank line ends
 * an event; a line starting with `:` is a comment (the service's heartbeats); unknown fields are ignored. Written here
 * rather than taken from a library so that the client has no runtime dependency
 * (docs/adr/0020-typed-client-its-own-package.md).
 */

/** One event of the stream. */
export interface StreamEvent {
  /** The `event` field; `message` when the event named none. */
  event: string
  data: string
  /** The `id` field of this event, when it had one. */
  id: string | undefined
}

export interface EventStreamHandlers {
  onEvent: (event: StreamEvent) => void
  /** The `retry` field: the reconnection time the server asks for, in milliseconds. */
  onRetry: (ms: number) => void
}

/**
 * A reader of the stream's text, fed in pieces of any size (already decoded: TextDecoder drops the byte-order mark).
 * Calls the handlers for each event and `retry` the fed text completes.
 */
export function eventStreamReader ({ onEvent, onRetry }: EventStreamHandlers): { feed: (text: string) => void } {
  // The start of a line whose end has not come yet.
  let pending = ''
  // The last piece ended in CR: a LF opening the next one belongs to that CRLF and ends no line.
  let afterCarriageReturn = false
  let data: string[] = []
  let event = ''
  let id: string | undefined

  function line (text: string): void {
    if (text === '') {
      // An event without data is dropped (the standard), its fields with it.
      if (data.length > 0) onEvent({ event: event === '' ? 'message' : event, data: data.join('\n'), id })
      data = []
      event = ''
      id = undefined
      return
    }
    if (text.startsWith(':')) return
    const colon = text.indexOf(':')
    const field = colon === -1 ? text : text.slice(0, colon)
    let value = colon === -1 ? '' : text.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    switch (field) {
      case 'data': data.push(value); break
      case 'event': event = value; break
      case 'id': if (!value.includes('\0')) id = value; break
      case 'retry': if (/^[0-9]+$/.test(value)) onRetry(Number(value)); break
    }
  }

  return {
    feed (piece: string): void {
      let text = pending + piece
      // An empty piece between a CR and its LF changes nothing.
      if (text === '') return
      if (afterCarriageReturn && text.startsWith('\n')) text = text.slice(1)
      afterCarriageReturn = false
      let start = 0
      for (const end of text.matchAll(/\r\n|\r|\n/g)) {
        line(text.slice(start, end.index))
        start = end.index + end[0].length
        if (end[0] === '\r' && start === text.length) afterCarriageReturn = true
      }
      pending = text.slice(start)
    }
  }
}
