/**
 * The one place webhooks touch the network: a single POST, bounded in time and in what it reads, whose outcome is
 * always returned, never thrown, for the dispatcher to record and retry.
 *
 * Unless private networks are allowed, the address connected to must be public (destination.ts), checked where
 * the connection is made: the URL is checked again, the host name is resolved by a lookup of our own that refuses
 * any answer with an address that is not public, and the socket's peer is checked once connected. A name that
 * resolved to a public address when the subscription was saved and resolves to 127.0.0.1 now (DNS rebinding) is
 * refused before any connection is attempted. Each request has its own connection (no agent), so nothing
 * connected under an earlier answer is reused.
 *
 * What the outcome tells the subscriber is what the endpoint's owner could know anyway: the status, the time, and
 * the start of the answer's body and a redirect's target, those two only from a public address. Whoever may save a
 * URL must not learn through this service what an internal listener answers (reachable when private networks are
 * allowed), nor which address a name resolved to: a refusal names the host as given, the operator's log the rest.
 *
 * Errors are built from error codes and addresses, never from the request: its headers carry the signature.
 */
import type { LookupAddress } from 'node:dns'
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP, type LookupFunction } from 'node:net'
import {
  addressLiteral, addressRange, checkUrlSyntax, defaultResolve, DestinationError, isPublicAddress, privateName,
  type DestinationPolicy, type Resolve
} from './destination.js'

export const DEFAULT_TIMEOUT_MS = 10_000
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024
/**
 * How much of the answer's body is returned, from a public address only: the dispatcher redacts it and keeps a
 * shorter excerpt still (RESPONSE_EXCERPT_BYTES), so that a secret cut by the short excerpt's end is still redacted.
 */
export const EXCERPT_BYTES = 1024
export const USER_AGENT = 'petstore-inventory-webhooks/1'
/** A Location longer than this is cut in the error that reports the redirect. */
const MAX_LOCATION_CHARS = 200

/** One delivery attempt, as the dispatcher prepared and signed it. */
export interface WebhookRequest {
  url: string
  /** The webhook-* headers; content-type, user-agent and content-length are set by the sender. */
  headers: Record<string, string>
  /** The JSON payload, exactly as signed. */
  body: string
}

/**
 * What became of an attempt. `status` is set whenever an answer's status line arrived; `error` then is null,
 * except for a redirect (3xx), which is not followed and counts as a failure. Without an answer, `error` says why
 * in a few words ('timeout after 10000 ms', 'connection refused', 'refused: hooks.example.com is not a public
 * address'), naming the URL's host, never an address it resolved to. How the body ended (complete, cut at the cap,
 * cut by the deadline) does not change the outcome.
 */
export interface SendResult {
  status: number | null
  error: string | null
  /** From the start of the attempt to its outcome. */
  durationMs: number
  /**
   * The first EXCERPT_BYTES of the answer's body as text, when it had one and came from an address whose answers
   * may be kept (SenderOptions.keepsAnswersOf).
   */
  responseExcerpt?: string
}

/** A destination refused at connection time, for the operator's log: what the subscriber is not told. */
export interface Refusal {
  /** The URL's host. */
  host: string
  /** The address that was not public, and its range ('loopback', 'private', ...). */
  address: string
  range: string
}

export interface SenderOptions {
  /** One deadline for the whole attempt: resolving, connecting, TLS, sending and reading the answer. */
  timeoutMs?: number
  /** The most of an answer's body read before the connection is dropped. */
  maxResponseBytes?: number
  policy: DestinationPolicy
  /** Resolves host names when connecting; tests inject one. */
  resolve?: Resolve
  /**
   * Whether the answer of a peer at this address may be reported: the start of its body, a redirect's target.
   * Public addresses only by default: with private networks allowed, an internal listener's answer must not reach
   * whoever saved the URL. Tests of the excerpt, whose servers are on loopback, inject one.
   */
  keepsAnswersOf?: (address: string) => boolean
  /** Told of each destination refused when connecting (the operator's log; the outcome names the host only). */
  refused?: (refusal: Refusal) => void
}

type Outcome = Omit<SendResult, 'durationMs'>
/** What the connection was doing when it failed: failures during the TLS handshake are reported as TLS's. */
type Phase = 'connect' | 'tls' | 'exchange'

export class HttpSender {
  readonly #timeoutMs: number
  readonly #maxResponseBytes: number
  readonly #policy: DestinationPolicy
  readonly #resolve: Resolve
  readonly #keepsAnswersOf: (address: string) => boolean
  readonly #refused: (refusal: Refusal) => void

  constructor (options: SenderOptions) {
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
    this.#maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
    this.#policy = options.policy
    this.#resolve = options.resolve ?? defaultResolve
    this.#keepsAnswersOf = options.keepsAnswersOf ?? isPublicAddress
    this.#refused = options.refused ?? (() => {})
  }

  /** POSTs the request; `signal` ends the attempt early (shutdown). Resolves with the outcome, whatever happened. */
  async send (request: WebhookRequest, signal?: AbortSignal): Promise<SendResult> {
    const started = performance.now()
    const elapsed = (): number => Math.round(performance.now() - started)
    let url: URL
    try {
      url = checkUrlSyntax(request.url, this.#policy)
    } catch (error) {
      if (error instanceof DestinationError) this.#report(error, null)
      return { status: null, error: error instanceof DestinationError ? refusal(error, null) : 'refused: invalid URL', durationMs: elapsed() }
    }
    return { ...await this.#attempt(url, request, signal), durationMs: elapsed() }
  }

  /** Tells the operator's log which address a refusal was about. */
  #report (error: DestinationError, url: URL | null): void {
    if (error.address === undefined) return
    this.#refused({ host: url?.hostname ?? error.address, address: error.address, range: error.range ?? 'invalid' })
  }

  #attempt (url: URL, request: WebhookRequest, signal: AbortSignal | undefined): Promise<Outcome> {
    // A timer of its own rather than AbortSignal.timeout, whose timer does not keep the process alive (Node 22): an
    // attempt waiting on nothing but a hung DNS lookup must still reach its deadline.
    const expired = new AbortController()
    const timer = setTimeout(() => { expired.abort() }, this.#timeoutMs)
    const deadline = expired.signal
    const abort = signal === undefined ? deadline : AbortSignal.any([deadline, signal])
    const guard = !this.#policy.allowPrivateNetworks
    const https = url.protocol === 'https:'
    const body = Buffer.from(request.body)
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(request.headers)) headers[name.toLowerCase()] = value
    headers['content-type'] = 'application/json'
    headers['user-agent'] = USER_AGENT
    headers['content-length'] = String(body.length)

    return new Promise((resolve) => {
      let phase: Phase = 'connect'
      let status: number | null = null
      let redirect: string | null = null
      // Set once connected: whether the peer's answer may be reported at all.
      let keepsAnswer = false
      const excerpt: Buffer[] = []
      let excerptBytes = 0
      let read = 0
      let settled = false
      let req: ClientRequest | undefined

      const finish = (failure: string | null): void => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        abort.removeEventListener('abort', onAbort)
        // Also drops the socket: with no agent it is this request's alone.
        req?.destroy()
        const outcome: Outcome = { status, error: status === null ? failure ?? 'no answer' : redirect }
        // A fresh decoder drops a character the cut left incomplete.
        if (excerptBytes > 0) outcome.responseExcerpt = new TextDecoder().decode(Buffer.concat(excerpt), { stream: true })
        resolve(outcome)
      }
      const onAbort = (): void => finish(deadline.aborted ? `timeout after ${this.#timeoutMs} ms` : 'aborted')
      if (abort.aborted) {
        onAbort()
        return
      }
      abort.addEventListener('abort', onAbort, { once: true })

      const onResponse = (res: IncomingMessage): void => {
        status = res.statusCode ?? null
        if (status !== null && status >= 300 && status < 400) {
          const location = keepsAnswer ? res.headers.location : undefined
          redirect = `redirect not followed (${status}${location === undefined ? '' : ` to ${cut(location)}`})`
        }
        res.on('data', (chunk: Buffer) => {
          read += chunk.length
          if (keepsAnswer && excerptBytes < EXCERPT_BYTES) {
            const part = Buffer.from(chunk.subarray(0, EXCERPT_BYTES - excerptBytes))
            excerpt.push(part)
            excerptBytes += part.length
          }
          if (read >= this.#maxResponseBytes) finish(null)
        })
        res.on('end', () => finish(null))
        res.on('error', () => finish(null))
        res.on('close', () => finish(null))
      }

      try {
        req = (https ? httpsRequest : httpRequest)(url, {
          method: 'POST',
          headers,
          agent: false,
          lookup: guardedLookup(this.#resolve, guard)
        }, onResponse)
      } catch (error) {
        // Thrown for a request that cannot be written (a header value with a line break): the dispatcher's fault.
        finish(`invalid request (${codeOf(error) ?? 'unknown'})`)
        return
      }
      req.on('error', (error) => {
        if (error instanceof DestinationError) this.#report(error, url)
        finish(describeFailure(error, phase, url, guard))
      })
      req.on('socket', (socket) => {
        // First among the 'connect' listeners, so a refusal comes before TLS sends its first byte (when guarded,
        // the scheme is always https: nothing of the request is written before the handshake).
        socket.prependOnceListener('connect', () => {
          // The lookup already refused such answers; this also covers a path around it.
          const remote = socket.remoteAddress
          if (guard && (remote === undefined || !isPublicAddress(remote))) {
            if (remote !== undefined) this.#refused({ host: url.hostname, address: remote, range: addressRange(remote) })
            finish(refusedHost(url.hostname))
            return
          }
          keepsAnswer = remote !== undefined && this.#keepsAnswersOf(remote)
          phase = https ? 'tls' : 'exchange'
        })
        socket.once('secureConnect', () => { phase = 'exchange' })
      })
      req.end(body)
    })
  }
}

/**
 * The lookup net.connect uses for the host name: the resolver's answer, refused as a whole when guarded and any
 * address in it is not public. net.connect asks for all addresses (`all: true`) when it may try several (its
 * default autoSelectFamily), else for one.
 */
function guardedLookup (resolve: Resolve, guard: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family ?? 0
    resolve(hostname).then((answer) => {
      const addresses: LookupAddress[] = answer
        .map((a) => ({ address: a.address, family: isIP(a.address) }))
        .filter((a) => a.family !== 0 && (family === 0 || a.family === family))
      const first = addresses[0]
      if (first === undefined) {
        callback(Object.assign(new Error(`${hostname} has no usable address`), { code: 'ENOTFOUND', hostname }), '')
        return
      }
      const refused = guard ? addresses.find((a) => !isPublicAddress(a.address)) : undefined
      if (refused !== undefined) callback(privateName(hostname, refused.address), '')
      else if (options.all === true) callback(null, addresses)
      else callback(null, first.address, first.family)
    }, (error: NodeJS.ErrnoException) => {
      // Guarded, every way a name fails to resolve reads the same (describeFailure), but a temporary failure.
      if (guard && error.code !== 'EAI_AGAIN') callback(Object.assign(new Error(`${hostname} did not resolve`), { code: 'ENOTFOUND', hostname }), '')
      else callback(error, '')
    })
  }
}

/**
 * A failure before an answer, in a few words, from its code: messages are not reused, lest one echo a header. When
 * guarded, a name that does not resolve is reported as one that resolves to a private address, as when it is saved
 * (destination.ts): the deliveries log must not tell which internal names exist.
 */
function describeFailure (error: Error, phase: Phase, url: URL, guard: boolean): string {
  if (error instanceof DestinationError) return refusal(error, url.hostname)
  const code = codeOf(error)
  // A wrong name's message lists the names the certificate holds: an internal listener's, with private networks allowed.
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `TLS: the certificate is not valid for ${url.hostname}`
  // Other handshake and certificate failures (expired, self-signed) carry OpenSSL's wording, which is generic; Node
  // 24 appends advice about its own flags after a ';', which is not for the subscriber.
  if (phase === 'tls' || code?.startsWith('ERR_SSL_') === true || code?.startsWith('ERR_TLS_') === true) {
    return `TLS: ${error.message.split(';')[0] ?? ''}`
  }
  switch (code) {
    case 'ECONNREFUSED': return 'connection refused'
    case 'ECONNRESET': return phase === 'exchange' ? 'connection closed before an answer' : 'connection reset'
    case 'EPIPE': return 'connection closed while sending'
    case 'ENOTFOUND':
    case 'ENODATA': return guard ? refusedHost(url.hostname) : `DNS: ${url.hostname} not found`
    case 'EAI_AGAIN': return `DNS: temporary failure resolving ${url.hostname}`
    case 'EHOSTUNREACH': return 'host unreachable'
    case 'ENETUNREACH': return 'network unreachable'
    case 'ETIMEDOUT': return 'connect timed out'
  }
  if (code?.startsWith('HPE_') === true) return 'invalid HTTP answer'
  return `request failed (${code ?? 'unknown error'})`
}

/** A refused destination as a delivery error: the host as the URL names it, never the address it resolved to. */
function refusal (error: DestinationError, hostname: string | null): string {
  if (error.reason !== 'private_address' || error.address === undefined) return `refused: ${error.message}`
  return refusedHost(hostname ?? error.address)
}

/**
 * The refusal of a URL's host (a hostname as URL.hostname has it). A name gets the same words whether it resolved
 * to an address that is not public or did not resolve, as when it is saved (destination.ts notPublic).
 */
function refusedHost (hostname: string): string {
  const literal = addressLiteral(hostname)
  return literal === null ? `refused: ${hostname} is not a public address (or does not resolve)` : `refused: ${literal} is not a public address`
}

function codeOf (error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | null)?.code
  return typeof code === 'string' ? code : undefined
}

function cut (text: string): string {
  return text.length > MAX_LOCATION_CHARS ? `${text.slice(0, MAX_LOCATION_CHARS)}…` : text
}
