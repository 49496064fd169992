/**
 * Raw HTTP/1.1 over a socket, for what fetch and inject() cannot send: a request target spelled exactly as
 * given (absolute-form, percent-encoding, dot segments), thousands of header lines, a half-closed connection,
 * or headers sent slowly.
 */
import { connect } from 'node:net'

export interface RawResponse {
  /** Everything the server sent until it closed the connection. */
  text: string
  closedAfterMs: number
}

export interface RawOptions {
  /** Send `rest` after this many milliseconds. */
  pauseMs?: number
  rest?: string
  /** Close the sending side right after the request (a half-close), keep reading. */
  halfClose?: boolean
}

/** Sends raw bytes to a listening server and collects what comes back until the server closes. */
export function raw (port: number, data: string, { pauseMs = 0, rest = '', halfClose = false }: RawOptions = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true })
    let text = ''
    socket.on('data', (chunk) => { text += chunk.toString() })
    socket.on('error', reject)
    socket.on('end', () => socket.end())
    socket.on('close', () => resolve({ text, closedAfterMs: Date.now() - started }))
    if (halfClose) socket.end(data)
    else socket.write(data)
    if (pauseMs > 0) setTimeout(() => { if (!socket.destroyed) socket.write(rest) }, pauseMs).unref()
  })
}

export interface ParsedResponse {
  status: number
  headers: Record<string, string>
  body: string
}

/** The first response in a raw exchange (status, lower-cased headers, body by Content-Length). */
export function parseResponse (text: string): ParsedResponse {
  const end = text.indexOf('\r\n\r\n')
  const head = end === -1 ? text : text.slice(0, end)
  const [statusLine = '', ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  const rest = end === -1 ? '' : text.slice(end + 4)
  const length = headers['content-length'] === undefined ? rest.length : Number(headers['content-length'])
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body: rest.slice(0, length) }
}
