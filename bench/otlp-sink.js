// A collector that keeps nothing: answers every OTLP/HTTP JSON export with success and counts the spans it got.
// Plain JavaScript, like the bare server. Usage: node bench/otlp-sink.js; prints "listening PORT" once bound;
// GET /count answers the spans received so far.
import { Buffer } from 'node:buffer'
import { createServer } from 'node:http'

let spans = 0

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.end(String(spans))
    return
  }
  const chunks = []
  req.on('data', (chunk) => chunks.push(chunk))
  req.on('end', () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      for (const resource of body.resourceSpans ?? []) {
        for (const scope of resource.scopeSpans ?? []) spans += scope.spans?.length ?? 0
      }
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end('{}')
      return
    }
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
