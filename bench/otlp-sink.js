// A collector that keeps nothing: answers every OTLP/HTTP export (protobuf, the exporters' default, or JSON) with
// success and counts the spans it got.
// Plain JavaScript, like the bare server. Usage: node bench/otlp-sink.js; prints "listening PORT" once bound;
// GET /count answers the spans received so far.
//
// It counts without parsing: it shares the load generator's core, and a JSON.parse of every export (a few hundred
// kilobytes each, tens of times a second with every request traced) took CPU from the load generator that a real
// deployment's collector, on a machine of its own, never takes from anyone. Every span, and nothing else, has a
// "startTimeUnixNano" member (events have "timeUnixNano"); the key, with its quotes and colon, cannot occur inside a
// JSON string, where a quote is always escaped. So its occurrences are the spans.
import { Buffer } from 'node:buffer'
import { createServer } from 'node:http'

const SPAN_KEY = Buffer.from('"startTimeUnixNano":')

let spans = 0

/** A protobuf varint of `body` at `at`: [value, the offset after it]. */
function varint (body, at) {
  let value = 0
  for (let shift = 0; ; shift += 7) {
    const byte = body[at++]
    if (byte === undefined) throw new Error('truncated')
    value += (byte & 0x7f) * 2 ** shift
    if (byte < 0x80) return [value, at]
  }
}

/**
 * Calls `each(field, start, end)` for every length-delimited field of the message in body[from, to); others are
 * skipped. Only lengths are read, never the contents: a span costs a few varints.
 */
function fields (body, from, to, each) {
  let at = from
  while (at < to) {
    const [tag, afterTag] = varint(body, at)
    const wire = tag & 7
    at = afterTag
    if (wire === 0) at = varint(body, at)[1]
    else if (wire === 1) at += 8
    else if (wire === 5) at += 4
    else if (wire === 2) {
      const [length, start] = varint(body, at)
      at = start + length
      if (at > to) throw new Error('truncated')
      each(Math.floor(tag / 8), start, at)
    } else throw new Error(`wire type ${wire}`)
  }
  if (at !== to) throw new Error('truncated')
}

/**
 * The spans of an OTLP/HTTP protobuf export request's body: ExportTraceServiceRequest.resource_spans (1) ->
 * ResourceSpans.scope_spans (2) -> ScopeSpans.spans (2).
 */
function countProtobufSpans (body) {
  let count = 0
  fields(body, 0, body.length, (field, start, end) => {
    if (field !== 1) return
    fields(body, start, end, (field, start, end) => {
      if (field !== 2) return
      fields(body, start, end, (field) => { if (field === 2) count++ })
    })
  })
  return count
}

/** The spans of an OTLP/HTTP JSON export request's body. */
function countSpans (body) {
  let count = 0
  for (let at = body.indexOf(SPAN_KEY); at !== -1; at = body.indexOf(SPAN_KEY, at + SPAN_KEY.length)) count++
  return count
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.end(String(spans))
    return
  }
  const chunks = []
  req.on('data', (chunk) => chunks.push(chunk))
  req.on('end', () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
    if (req.headers['content-type'] === 'application/x-protobuf') {
      try {
        spans += countProtobufSpans(body)
      } catch {
        res.writeHead(400, { 'content-type': 'application/x-protobuf' })
        res.end()
        return
      }
      // An empty ExportTraceServiceResponse: no partial success to report.
      res.writeHead(200, { 'content-type': 'application/x-protobuf' })
      res.end()
      return
    }
    // An OTLP/HTTP JSON body is an object; anything else is not an export.
    if (body[0] !== 0x7b) {
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end('{}')
      return
    }
    spans += countSpans(body)
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end('{}')
  })
})

server.listen(0, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`)
})

process.on('SIGTERM', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
