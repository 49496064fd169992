// A collector that keeps nothing: answers every OTLP/HTTP JSON export with success and counts the spans it got.
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
