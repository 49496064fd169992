/**
 * Clients without a valid key are limited by address. An IPv6 client can rotate through the 2^64 or more
 * addresses of its own network, so IPv6 clients are grouped by prefix (a /56 by default, as express-rate-limit 8
 * does); IPv4 clients, and IPv6-mapped IPv4 clients, by their address.
 */
import ipaddr from 'ipaddr.js'
import { LIMITER_DEFAULTS } from '../config.js'
import type { Subject } from '../ratelimit/types.js'

/** The one subject of every client whose address is not an IP address (the HTTP side never passes one). */
export const UNKNOWN_CLIENT = 'unknown'

/**
 * The rate-limit subject of a client address (as the framework resolved it, proxies taken into account). Ids are
 * normalized addresses, so a subject is never larger than an IPv6 address: text that is not an address shares
 * one subject, whatever it says.
 */
export function clientSubject (address: string, ipv6PrefixLength: number = LIMITER_DEFAULTS.ipv6PrefixLength): Subject {
  if (!ipaddr.isValid(address)) return { kind: 'ip', id: UNKNOWN_CLIENT }
  let parsed = ipaddr.parse(address)
  if (parsed instanceof ipaddr.IPv6 && parsed.isIPv4MappedAddress()) parsed = parsed.toIPv4Address()
  if (parsed instanceof ipaddr.IPv4) return { kind: 'ip', id: parsed.toString() }
  const bytes = parsed.toByteArray()
  for (let bit = ipv6PrefixLength; bit < 128; bit++) {
    const index = bit >> 3
    bytes[index] = (bytes[index] as number) & ~(0x80 >> (bit & 7))
  }
  return { kind: 'ip', id: `${ipaddr.fromByteArray(bytes).toString()}/${ipv6PrefixLength}` }
}
