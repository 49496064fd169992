/**
 * Where a webhook may be delivered. A subscriber names a URL and this service makes the request, so without a
 * check anyone with an API key could make it reach what only this service can: loopback, the private network,
 * the cloud metadata endpoint (169.254.169.254). By default only public unicast addresses are allowed, checked on
 * what the URL parser and the resolver produced, never on the text as typed (`http://2130706433/` is 127.0.0.1).
 *
 * A check when the subscription is saved gives the subscriber a clear answer; it is not enough on its own, since
 * the name may resolve elsewhere by the time of delivery (DNS rebinding). The sender checks again the addresses
 * it actually connects to.
 *
 * A refusal tells the subscriber which host was refused, never what it resolved to nor which range that address is
 * in: whoever may save a URL could otherwise map the internal network through this service's resolver (which
 * names exist, what they point at). For the same reason a name that does not resolve gets the same answer as one
 * that resolves to a private address. The operator's detail (the address, its range) stays on the error, for the
 * server log.
 */
import { lookup } from 'node:dns/promises'
import type { LookupAddress } from 'node:dns'
import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'

/** The longest URL accepted, as typed and as normalized. */
export const MAX_URL_LENGTH = 2048

export interface DestinationPolicy {
  /**
   * Allows plain http and addresses that are not public (loopback, private networks): for development and tests,
   * or a deployment whose subscribers are all trusted.
   */
  allowPrivateNetworks: boolean
}

/** Resolves a host name to all of its addresses, as `dns.promises.lookup(name, { all: true })` does. */
export type Resolve = (hostname: string) => Promise<LookupAddress[]>

export type DestinationErrorReason = 'invalid_url' | 'too_long' | 'scheme' | 'userinfo' | 'fragment' | 'private_address' | 'unresolvable'

/**
 * A destination refused. The message is written for the subscriber: it names the host as given, never an address it
 * resolved to or the range of one. `address` and `range` are for the operator's log only.
 */
export class DestinationError extends Error {
  override readonly name = 'DestinationError'
  /** A short stable code, for programs and logs. */
  readonly reason: DestinationErrorReason
  /** The address refused, when the reason is 'private_address' (for logs, never for the subscriber). */
  readonly address: string | undefined
  /** What kind of address it is ('loopback', 'private', 'linkLocal', ...: ipaddr.js's names), for logs. */
  readonly range: string | undefined

  constructor (reason: DestinationErrorReason, message: string, address?: string) {
    super(message)
    this.reason = reason
    this.address = address
    this.range = address === undefined ? undefined : addressRange(address)
  }
}

/**
 * Where the setting that allows plain http is named, for a subscriber who tried http (a developer with a receiver on
 * their own machine): the variable is the operator's, and its name says nothing about this deployment.
 */
const HTTPS_ONLY = 'The URL must use https (plain http is accepted only for development receivers on private networks, ' +
  'when the server runs with WEBHOOK_ALLOW_PRIVATE_NETWORKS=true).'

export const defaultResolve: Resolve = async (hostname) => await lookup(hostname, { all: true })

/**
 * The checks that need no network, for when a subscription is saved and again before each delivery: an absolute
 * https URL (http too when private networks are allowed), no user name or password (they would be sent as
 * credentials), no fragment (never sent, so it would only mislead), at most MAX_URL_LENGTH characters, and a host
 * that, when it is an address, is public. Returns the parsed, normalized URL.
 */
export function checkUrlSyntax (url: string, policy: DestinationPolicy): URL {
  if (url.length > MAX_URL_LENGTH) throw new DestinationError('too_long', `The URL must be at most ${MAX_URL_LENGTH} characters long.`)
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new DestinationError('invalid_url', 'The URL is not a valid absolute URL.')
  }
  if (parsed.href.length > MAX_URL_LENGTH) throw new DestinationError('too_long', `The URL must be at most ${MAX_URL_LENGTH} characters long.`)
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && policy.allowPrivateNetworks)) {
    throw new DestinationError('scheme', policy.allowPrivateNetworks ? 'The URL must use https or http.' : HTTPS_ONLY)
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new DestinationError('userinfo', 'The URL must not contain a user name or password.')
  }
  // href keeps a bare '#' that hash reports as ''; '#' appears in a normalized href only as the fragment's start.
  if (parsed.href.includes('#')) {
    throw new DestinationError('fragment', 'The URL must not contain a fragment (#…): fragments are never sent to the server.')
  }
  if (parsed.hostname === '') throw new DestinationError('invalid_url', 'The URL must name a host.')
  const literal = addressLiteral(parsed.hostname)
  if (literal !== null && !policy.allowPrivateNetworks && !isPublicAddress(literal)) {
    throw new DestinationError('private_address', notPublic(literal), literal)
  }
  return parsed
}

/**
 * checkUrlSyntax, then, unless private networks are allowed, the host name resolved: refused when it does not
 * resolve or when any of its addresses is not public (a connection may go to any of them).
 */
export async function checkDestination (url: string, policy: DestinationPolicy, resolve: Resolve = defaultResolve): Promise<URL> {
  const parsed = checkUrlSyntax(url, policy)
  if (policy.allowPrivateNetworks || addressLiteral(parsed.hostname) !== null) return parsed
  const addresses = await resolveAll(parsed.hostname, resolve)
  const refused = addresses.find((a) => !isPublicAddress(a.address))
  if (refused !== undefined) throw privateName(parsed.hostname, refused.address)
  return parsed
}

/**
 * Whether an address is public: IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry, and only
 * ipaddr.js's 'unicast' range is public. Everything else is refused, including the ranges that embed another
 * address whose own range is not looked at (NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32), and the
 * deprecated IPv4-compatible ::/96, which ipaddr.js counts as unicast. Text that is not an address is not public.
 */
export function isPublicAddress (address: string): boolean {
  if (!ipaddr.isValid(address)) return false
  const parsed = ipaddr.process(address)
  if (parsed.range() !== 'unicast') return false
  return !(parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).parts.slice(0, 6).every((part) => part === 0))
}

/** The refusal for a host name that resolved to an address that is not public: the name only, never the address. */
export function privateName (hostname: string, address: string): DestinationError {
  return new DestinationError('private_address', notPublic(hostname), address)
}

/**
 * The subscriber's words for a refused host: the same whether a name resolved to a private address or did not
 * resolve at all, so that the answers tell nothing of the names the internal resolver knows.
 */
export function notPublic (host: string): string {
  return addressLiteral(host) === null
    ? `${host} is not a public address (or does not resolve); webhooks are delivered only to public addresses.`
    : `${host} is not a public address; webhooks are delivered only to public addresses.`
}

/** The address a URL's hostname is, without IPv6's brackets; null for a name. */
export function addressLiteral (hostname: string): string | null {
  if (hostname.startsWith('[') && hostname.endsWith(']')) return hostname.slice(1, -1)
  return isIP(hostname) === 0 ? null : hostname
}

async function resolveAll (hostname: string, resolve: Resolve): Promise<LookupAddress[]> {
  let addresses: LookupAddress[]
  try {
    addresses = await resolve(hostname)
  } catch (error) {
    // A temporary failure is the resolver's, not the name's: worth trying again, and the same for every name.
    if ((error as NodeJS.ErrnoException).code === 'EAI_AGAIN') {
      throw new DestinationError('unresolvable', `${hostname} could not be resolved just now; try again.`)
    }
    throw new DestinationError('unresolvable', notPublic(hostname))
  }
  if (addresses.length === 0) throw new DestinationError('unresolvable', notPublic(hostname))
  return addresses
}

/** ipaddr.js's name of an address's range, for the operator's log; 'invalid' for text that is not an address. */
export function addressRange (address: string): string {
  if (!ipaddr.isValid(address)) return 'invalid'
  const range = ipaddr.process(address).range()
  // The IPv4-compatible ::/96, which ipaddr.js counts as unicast and isPublicAddress does not.
  return range === 'unicast' && !isPublicAddress(address) ? 'reserved' : range
}
