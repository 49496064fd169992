/** Networking helpers shared by the tests and the benchmark harness. */
import { createServer } from 'node:net'

/** Every port freePort has handed out in this process: a later call never hands out one of them again. */
const handedOut = new Set<number>()

/** Binds port 0 on the loopback, reads the port the kernel chose, closes. */
function kernelsPick (): Promise<number> {
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

/**
 * A port that was free a moment ago, and that this process has not been handed before. The kernel may pick a port it
 * picked for an earlier call (that one was closed again at once): two servers a test starts on "free" ports would then
 * share one, and the second fails to listen while the first answers for both.
 */
export async function freePort (): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = await kernelsPick()
    if (handedOut.has(port)) continue
    handedOut.add(port)
    return port
  }
  throw new Error('no port this process has not handed out already, in 100 picks')
}
