/** Networking helpers shared by the tests and the benchmark harness. */
import { createServer } from 'node:net'

/** A port that was free a moment ago: bind port 0, read the port, close. */
export function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      if (address === null || typeof address === 'string') {
        server.close()
        reject(new Error('no port'))
        return
      }
      server.close(() => resolve(address.port))
    })
  })
}
