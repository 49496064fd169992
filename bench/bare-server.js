// The ceiling: the least a Node.js HTTP server can do to answer GET /v1/inventory with the service's bytes.
// Plain JavaScript on purpose, so no loader or framework sits between node:http and the socket.
// Usage: node bench/bare-server.js BODY_FILE CONTENT_TYPE; prints "listening PORT" once bound to a free port.
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'

const [file, contentType] = process.argv.slice(2)
if (file === undefined || contentType === undefined) {
  console.error('usage: node bench/bare-server.js BODY_FILE CONTENT_TYPE')
  process.exit(2)
}
const body = readFileSync(file)
const headers = { 'content-type': contentType, 'content-length': String(body.length) }

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/v1/inventory') {
    res.writeHead(200, headers)
    res.end(body)
    return
  }
  res.writeHead(404, { 'content-length': '0' })
  res.end()
})

server.listen(0, '127.0.0.1', () => {
  console.log(`listening ${server.address().port}`)
})

process.on('SIGTERM', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
