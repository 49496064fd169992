/**
 * Where webhooks may go, without sending anything: which addresses count as public, what a URL must look like,
 * and what a host name must resolve to (through an injected resolver, never the real DNS).
 */
import assert from 'node:assert/strict'
import type { LookupAddress } from 'node:dns'
import { isIP } from 'node:net'
import { describe, test } from 'node:test'
import { checkDestination, checkUrlSyntax, DestinationError, isPublicAddress, type Resolve } from '../../src/webhooks/destination.js'

const STRICT = { allowPrivateNetworks: false }
const OPEN = { allowPrivateNetworks: true }

/** A resolver answering from a table; names not in it fail as the system resolver does. */
function resolver (table: Record<string, string[]>, calls: string[] = []): Resolve {
  return async (hostname) => {
    calls.push(hostname)
    const addresses = table[hostname]
    if (addresses === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
    return addresses.map((address): LookupAddress => ({ address, family: isIP(address) }))
  }
}

function refusedWith (reason: string): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof DestinationError, `a DestinationError, not ${String(error)}`)
    assert.equal(error.reason, reason, error.message)
    return true
  }
}

describe('isPublicAddress', () => {
  // What ipaddr.js 2.x calls each range, for the record; only 'unicast' is public.
  const table: Array<[address: string, range: string, isPublic: boolean]> = [
    ['8.8.8.8', 'unicast', true],
    ['1.1.1.1', 'unicast', true],
    ['2606:4700:4700::1111', 'unicast', true],
    ['::ffff:8.8.8.8', 'unicast (mapped IPv4)', true],
    ['127.0.0.1', 'loopback', false],
    ['127.255.255.254', 'loopback', false],
    ['::1', 'loopback', false],
    ['10.0.0.1', 'private', false],
    ['172.16.0.1', 'private', false],
    ['172.31.255.255', 'private', false],
    ['192.168.1.1', 'private', false],
    ['169.254.169.254', 'linkLocal (cloud metadata)', false],
    ['fe80::1', 'linkLocal', false],
    ['fc00::1', 'uniqueLocal', false],
    ['fd00::1', 'uniqueLocal', false],
    ['100.64.0.1', 'carrierGradeNat', false],
    ['0.0.0.0', 'unspecified', false],
    ['0.1.2.3', 'unspecified (0/8)', false],
    ['::', 'unspecified', false],
    ['224.0.0.1', 'multicast', false],
    ['ff02::1', 'multicast', false],
    ['255.255.255.255', 'broadcast', false],
    ['192.0.2.1', 'reserved (TEST-NET-1)', false],
    ['198.51.100.1', 'reserved (TEST-NET-2)', false],
    ['203.0.113.1', 'reserved (TEST-NET-3)', false],
    ['198.18.0.1', 'reserved (benchmarking)', false],
    ['240.0.0.1', 'reserved (class E)', false],
    ['192.0.0.1', 'reserved (IETF protocol assignments)', false],
    ['2001:db8::1', 'reserved (documentation)', false],
    ['::ffff:127.0.0.1', 'loopback (mapped IPv4)', false],
    ['::ffff:a9fe:a9fe', 'linkLocal (mapped 169.254.169.254)', false],
    ['::ffff:0:7f00:1', 'rfc6145 (IPv4-translated)', false],
    ['64:ff9b::a00:1', 'rfc6052 (NAT64 of 10.0.0.1)', false],
    ['64:ff9b::808:808', 'rfc6052 (NAT64 of 8.8.8.8): refused too', false],
    ['2002::1', '6to4', false],
    ['2001::1', 'teredo', false],
    ['100::1', 'discard', false],
    ['::7f00:1', 'unicast to ipaddr.js, but IPv4-compatible ::/96 (deprecated)', false],
    ['fe80::1%eth0', 'linkLocal with a zone', false],
    ['not-an-address', 'not an address', false],
    ['', 'empty', false]
  ]
  for (const [address, range, isPublic] of table) {
    test(`${address || '(empty)'} (${range}) is ${isPublic ? '' : 'not '}public`, () => {
      assert.equal(isPublicAddress(address), isPublic)
    })
  }
})

describe('checkUrlSyntax', () => {
  test('when the URL is https to a name, then it is accepted and returned normalized', () => {
    const url = checkUrlSyntax('https://Hooks.Example.com/in?x=1', STRICT)
    assert.equal(url.href, 'https://hooks.example.com/in?x=1')
  })

  test('when the URL is http, then it is refused by default and accepted when private networks are allowed', () => {
    assert.throws(() => checkUrlSyntax('http://hooks.example.com/', STRICT), refusedWith('scheme'))
    assert.throws(() => checkUrlSyntax('http://hooks.example.com/', STRICT), { message: /^The URL must use https/ })
    assert.equal(checkUrlSyntax('http://hooks.example.com/', OPEN).protocol, 'http:')
  })

  test('when the scheme is neither https nor http, then it is refused even when private networks are allowed', () => {
    for (const url of ['ftp://example.com/', 'file:///etc/passwd', 'gopher://example.com/', 'data:text/plain,x', 'javascript:alert(1)']) {
      assert.throws(() => checkUrlSyntax(url, OPEN), refusedWith('scheme'), url)
    }
  })

  test('when the URL has a user name or password, then it is refused, also when private networks are allowed', () => {
    for (const url of ['https://user:secret@example.com/', 'https://user@example.com/', 'https://:secret@example.com/', 'http://u:p@127.0.0.1/']) {
      assert.throws(() => checkUrlSyntax(url, OPEN), refusedWith('userinfo'), url)
    }
    assert.throws(() => checkUrlSyntax('https://u:p@example.com/', STRICT), { message: 'The URL must not contain a user name or password.' })
  })

  test('when the URL has a fragment, even an empty one, then it is refused', () => {
    assert.throws(() => checkUrlSyntax('https://example.com/in#part', STRICT), refusedWith('fragment'))
    assert.throws(() => checkUrlSyntax('https://example.com/in#', STRICT), refusedWith('fragment'))
  })

  test('when the text is not an absolute URL, then it is refused as invalid', () => {
    for (const url of ['', '/hooks', 'example.com/hooks', 'https://', 'https://exa mple.com/', 'https://example.com:99999/', 'https://1.2.3.4.5/']) {
      assert.throws(() => checkUrlSyntax(url, STRICT), refusedWith('invalid_url'), url)
    }
  })

  test('when the URL is longer than 2048 characters, then it is refused', () => {
    const base = 'https://example.com/'
    assert.equal(checkUrlSyntax(base + 'a'.repeat(2048 - base.length), STRICT).href.length, 2048)
    assert.throws(() => checkUrlSyntax(base + 'a'.repeat(2049 - base.length), STRICT), refusedWith('too_long'))
    // Normalization can lengthen a URL: each space becomes %20.
    assert.throws(() => checkUrlSyntax(base + ' '.repeat(1000) + 'x', STRICT), refusedWith('too_long'))
  })

  test('when the host is an address that is not public, in any spelling the URL parser accepts, then it is refused', () => {
    const urls = [
      'https://127.0.0.1/', 'https://127.1/', 'https://2130706433/', 'https://0x7f.1/', 'https://0177.0.0.1/',
      'https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://[::127.0.0.1]/',
      'https://10.0.0.5/', 'https://169.254.169.254/latest/meta-data/', 'https://[fd00::1]/', 'https://[fe80::1]/',
      'https://0.0.0.0/', 'https://[::]/', 'https://100.64.0.1/', 'https://[64:ff9b::a00:1]/'
    ]
    for (const url of urls) assert.throws(() => checkUrlSyntax(url, STRICT), refusedWith('private_address'), url)
    assert.throws(() => checkUrlSyntax('https://10.0.0.5/', STRICT),
      { message: '10.0.0.5 is not a public address; webhooks are delivered only to public addresses.' })
    // The URL's host as the parser normalized it (what is stored and shown), not a description of its range.
    assert.throws(() => checkUrlSyntax('https://2130706433/', STRICT),
      { message: '127.0.0.1 is not a public address; webhooks are delivered only to public addresses.' })
  })

  test('when an address is refused, then the message does not say which kind of range it is in; the error keeps that for the log', () => {
    for (const [url, range] of [['https://127.0.0.1/', 'loopback'], ['https://169.254.169.254/', 'linkLocal'], ['https://10.0.0.5/', 'private'], ['https://100.64.0.1/', 'carrierGradeNat']]) {
      assert.throws(() => checkUrlSyntax(url as string, STRICT), (error) => {
        assert.ok(error instanceof DestinationError)
        assert.doesNotMatch(error.message, /loopback|private address|link-local|carrier|metadata|reserved|shared/i, url)
        assert.equal(error.range, range)
        return true
      })
    }
  })

  test('when the host is a public address, or private networks are allowed, then an address is accepted', () => {
    assert.equal(checkUrlSyntax('https://8.8.8.8/', STRICT).hostname, '8.8.8.8')
    assert.equal(checkUrlSyntax('https://[2606:4700:4700::1111]/', STRICT).hostname, '[2606:4700:4700::1111]')
    assert.equal(checkUrlSyntax('http://127.0.0.1:8080/', OPEN).hostname, '127.0.0.1')
    assert.equal(checkUrlSyntax('http://[::1]/', OPEN).hostname, '[::1]')
  })
})

describe('checkDestination', () => {
  test('when every address of the name is public, then the URL is accepted', async () => {
    const resolve = resolver({ 'hooks.example.com': ['93.184.216.34', '2606:2800:220:1::1'] })
    const url = await checkDestination('https://hooks.example.com/in', STRICT, resolve)
    assert.equal(url.hostname, 'hooks.example.com')
  })

  test('when the name resolves to a private, loopback or metadata address, then it is refused naming the host, never the address or its range', async () => {
    for (const address of ['10.0.0.5', '127.0.0.1', '169.254.169.254', '::1', 'fd00::1', '::ffff:127.0.0.1']) {
      const resolve = resolver({ 'api.example.com': [address] })
      await assert.rejects(checkDestination('https://api.example.com/', STRICT, resolve), (error) => {
        refusedWith('private_address')(error)
        const { message, address: logged } = error as DestinationError
        assert.equal(message, 'api.example.com is not a public address (or does not resolve); webhooks are delivered only to public addresses.', address)
        assert.equal(logged, address, 'the address stays on the error, for the operator\'s log')
        return true
      })
    }
  })

  test('when any one of several addresses is not public, then the name is refused', async () => {
    const resolve = resolver({ 'mixed.example.com': ['93.184.216.34', '192.168.0.10'] })
    await assert.rejects(checkDestination('https://mixed.example.com/', STRICT, resolve), (error) => {
      assert.ok(error instanceof DestinationError)
      assert.equal(error.address, '192.168.0.10')
      return true
    })
  })

  test('when the name does not resolve, or resolves to nothing, then the message is the one of a private address: the answers do not tell which internal names exist', async () => {
    const messageFor = async (resolve: Resolve): Promise<string> => {
      try {
        await checkDestination('https://db.example.com/', STRICT, resolve)
      } catch (error) {
        assert.ok(error instanceof DestinationError)
        return error.message
      }
      return assert.fail('refused')
    }
    const internal = await messageFor(resolver({ 'db.example.com': ['10.0.0.7'] }))
    assert.equal(await messageFor(resolver({})), internal)
    assert.equal(await messageFor(resolver({ 'db.example.com': [] })), internal)
    await assert.rejects(checkDestination('https://nowhere.invalid/', STRICT, resolver({})), refusedWith('unresolvable'))
  })

  test('when resolving fails for now (EAI_AGAIN), then the refusal says to try again', async () => {
    const flaky: Resolve = async () => { throw Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }) }
    await assert.rejects(checkDestination('https://hooks.example.com/', STRICT, flaky), { message: 'hooks.example.com could not be resolved just now; try again.' })
  })

  test('when the host is an address, then nothing is resolved', async () => {
    const calls: string[] = []
    await checkDestination('https://8.8.8.8/', STRICT, resolver({}, calls))
    await assert.rejects(checkDestination('https://[::1]/', STRICT, resolver({}, calls)), refusedWith('private_address'))
    assert.deepEqual(calls, [])
  })

  test('when private networks are allowed, then the name is not resolved and any address is accepted', async () => {
    const calls: string[] = []
    const url = await checkDestination('http://internal.test:8080/', OPEN, resolver({ 'internal.test': ['10.0.0.1'] }, calls))
    assert.equal(url.port, '8080')
    assert.deepEqual(calls, [])
  })

  test('when the syntax is wrong, then it is refused before anything is resolved', async () => {
    const calls: string[] = []
    await assert.rejects(checkDestination('https://u:p@hooks.example.com/', STRICT, resolver({}, calls)), refusedWith('userinfo'))
    assert.deepEqual(calls, [])
  })
})
