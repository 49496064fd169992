/**
 * The gate's decision on a traced request's server span, in traced processes only (the app wraps the gate's
 * admission with traceGate when tracingOn()): a wrapper that leaves the gate (src/http/plugins/access.ts) and the
 * gatekeeper (src/access/admission.ts) alone. No span of its own (docs/adr/0050-one-span-per-request-and-its-io.md):
 * the key lookup and the limiter's Redis commands it makes are the server span's children, as the handler's are.
 */
import type { Span } from '@opentelemetry/api'
import { keyIdOf, type Admission, type AdmissionRequest, type Gatekeeper } from '../access/admission.js'
import { serverSpanOf } from './spans.js'

/** The rate-limit decision an admission stands for, as traces show it (the metrics' decision names). */
function decisionOf (admission: Admission): string | null {
  switch (admission.outcome) {
    case 'admitted':
    case 'unauthenticated':
    case 'insufficient_scope':
      // Counted and let through to the answer (a 401 or 403 is counted against its caller like any request).
      return 'allowed'
    case 'unavailable':
      return null
    default:
      return admission.outcome
  }
}

/** What the gate decided, on the request's server span: the key id (never the key) and the decision. */
function describeAdmission (server: Span, admission: Admission): Admission {
  const keyId = keyIdOf(admission)
  const decision = decisionOf(admission)
  server.setAttribute('petstore.admission', admission.outcome)
  if (keyId !== null) server.setAttribute('petstore.key.id', keyId)
  if (decision !== null) {
    server.setAttribute('petstore.ratelimit.decision', decision)
    server.setAttribute('petstore.ratelimit.remaining', admission.quota.shown.remaining)
  }
  return admission
}

/**
 * The gatekeeper's admission of a request, its decision written on the request's server span when the request is
 * traced. `request` is the HTTP request asked about.
 */
export function traceGate (gatekeeper: Pick<Gatekeeper, 'admit'>): (asked: AdmissionRequest, request: object) => Admission | Promise<Admission> {
  return (asked, request) => {
    const server = serverSpanOf(request)
    const admission = gatekeeper.admit(asked)
    if (server === undefined) return admission
    return admission instanceof Promise ? admission.then((settled) => describeAdmission(server, settled)) : describeAdmission(server, admission)
  }
}
