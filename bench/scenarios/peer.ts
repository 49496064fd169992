/**
 * peer: the service beside a peer built the usual way (bench/peer/server.js), in get-10's rounds or its own: Fastify 5
 * + @fastify/bearer-auth (its auth function: the SHA-256 of the token looked up in a set of hashes) +
 * @fastify/rate-limit (one window, in memory, its default headers, a limit that never binds) + on every request a
 * better-sqlite3 SELECT of the ten stock rows from a WAL file, serialized through a response schema. It answers the
 * service's bytes (its table is filled from the service's answer; checked), and has no logger, so any doubt favours
 * the peer. Its ratio is the peer's to the ceiling; the target is the service's requests/s over the peer's: >= 2.
 */
import { emptyResult, type PeerRounds, type Scenario, type ScenarioResult } from '../scenario.js'
import { getVsCeiling } from './get-10.js'

export const peer: Scenario = {
  id: 'peer',
  title: 'GET /v1/inventory, 10 entries: the peer (Fastify + bearer-auth + rate-limit + SQLite WAL)',
  target: null,
  run: (result, context) => peerScenario(result, context.peerRounds)
}

/**
 * The peer (bench/peer/server.js): GET /v1/inventory built the usual way, Fastify 5 + @fastify/bearer-auth +
 * @fastify/rate-limit + a better-sqlite3 query of a WAL file and schema serialization on every request, answering
 * the service's ten entries byte for byte. It is measured in get-10's rounds (ceiling, service, peer), so all three
 * share one ceiling; without get-10 (BENCH_ONLY, or get-10 failed) the same three-way rounds run here. The ratio
 * is the peer's to the ceiling; the check is the service's requests/s over the peer's, same rounds: at least 2.
 */
async function peerScenario (result: ScenarioResult, fromGet10: PeerRounds | null): Promise<void> {
  const rounds = fromGet10 ?? await getVsCeiling(emptyResult('peer', 'the service beside the peer', null), 10, true)
  if (rounds === null) throw new Error('get-10 returned no peer rounds')
  if (rounds.error !== null) throw rounds.error
  if (rounds.peer === null) throw new Error('the peer was not measured')
  result.service = rounds.peer
  result.ceiling = rounds.ceiling
  // Shared with get-10: get-10's row flags the ceiling's own problems.
  result.ceilingFrom = fromGet10 === null ? 'own' : 'get-10'
  result.peakRssMb = rounds.peakRssMb
  const times = rounds.peer.rps > 0 ? rounds.service.rps / rounds.peer.rps : null
  result.checks.push({
    name: 'service/peer',
    value: times,
    text: times === null ? '-' : `${times.toFixed(2)}x`,
    target: '>= 2x',
    met: times === null ? null : times >= 2,
    flag: 'SERVICE BELOW 2x PEER'
  })
  if (!rounds.sameBytes) result.flags.push('PEER ANSWER DIFFERS FROM THE SERVICE\'S')
  result.notes.push(`the peer in ${fromGet10 === null ? 'its own' : 'get-10\'s'} rounds (ceiling, service, peer); ` +
    `service ${Math.round(rounds.service.rps)} rps, p99 ${rounds.service.p99.toFixed(2)} ms in the same rounds; ` +
    `service / peer ${times === null ? '-' : times.toFixed(2)}x (target >= 2x)` +
    (rounds.sameBytes ? '; the peer answers the service\'s bytes and content type' : '; the peer does NOT answer the service\'s bytes and content type'))
  result.details = {
    serviceRps: rounds.service.rps,
    serviceP99: rounds.service.p99,
    serviceOverPeer: times,
    sameBytesAsService: rounds.sameBytes,
    roundsFrom: fromGet10 === null ? 'own' : 'get-10'
  }
}
