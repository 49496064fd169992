/** Outages on demand: a proxy in front of a real server that tests can kill, stall and restart. */
import { once } from 'node:events'
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net'

/**
 * A TCP proxy to a real server (Redis, PostgreSQL) that can be killed (every socket destroyed) and restarted on the same port, or
 * stalled (nothing forwarded, like a black-holed network; the bytes are delivered in order on resume, as TCP
 * would once the path is back).
 */
export class KillableProxy {
  readonly #target: { host: string, port: number }
  readonly #sockets = new Set<Socket>()
  #server: Server | null = null
  port = 0

  stall (): void {
    for (const socket of this.#sockets) socket.pause()
  }

  resume (): void {
    for (const socket of this.#sockets) socket.resume()
  }

  constructor (target: { host: string, port: number }) {
    this.#target = target
  }

  async start (): Promise<void> {
    const server = createServer((downstream) => {
      const upstream = connect(this.#target.port, this.#target.host)
      for (const socket of [downstream, upstream]) {
        this.#sockets.add(socket)
        socket.on('close', () => this.#sockets.delete(socket))
        socket.on('error', () => {
          downstream.destroy()
          upstream.destroy()
        })
      }
      // Plain forwarding rather than pipe(): pipe would resume a stalled socket on drain.
      downstream.on('data', (chunk) => upstream.write(chunk))
      upstream.on('data', (chunk) => downstream.write(chunk))
    })
    server.listen(this.port, '127.0.0.1')
    await once(server, 'listening')
    this.port = (server.address() as AddressInfo).port
    this.#server = server
  }

  async kill (): Promise<void> {
    const server = this.#server
    this.#server = null
    if (server === null) return
    const closed = once(server, 'close')
    server.close()
    for (const socket of this.#sockets) socket.destroy()
    await closed
  }
}
