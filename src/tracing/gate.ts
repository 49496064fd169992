/**
 * The gate's span, in traced processes only (the app wraps the gate's admission with traceGate when tracingOn()): like
 * the store's spans (./store.ts), a wrapper that leaves the gate (src/http/plugins/access.ts) and the gatekeeper
 * (src/access/admission.ts) alone. The span is active while the gatekeeper works, so that the key lookup, the
 * limiter's Redis commands and a conditional read's store call are its children.
 */
import type { Span } from '@opentelemetry/api'
import { keyIdOf, type Admission, type AdmissionRequest, type Gatekeeper } from '../access/admission.js'
import { endSpan, serverSpanOf, SpanKind, startSpan, within } from './spans.js'

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

/** What the gate decided, on its span and on the request's server span: the key id (never the key) and the decision. */
function describeAdmission (request: object, gate: Span, admission: Admission): void {
  const keyId = keyIdOf(admission)
  const decision = decisionOf(admission)
  const attributes = {
    'petstore.admission': admission.outcome,
    ...(keyId === null ? {} : { 'petstore.key.id': keyId }),
    ...(decision === null ? {} : { 'petstore.ratelimit.decision': decision, 'petstore.ratelimit.remaining': admission.quota.shown.remaining })
  }
  gate.setAttributes(attributes)
  serverSpanOf(request)?.setAttributes(attributes)
}

/**
 * The gatekeeper's admission of a request, traced: the gate (authentication and the rate-limit decision) as a span of
 * its own, its decision also on the request's server span. `request` is the HTTP request asked about, whose server
 * span (serverSpanOf) gets the decision.
 */
export function traceGate (gatekeeper: Pick<Gatekeeper, 'admit'>): (asked: AdmissionRequest, request: object) => Admission | Promise<Admission> {
  return (asked, request) => {
    const span = startSpan('gate', SpanKind.INTERNAL)
    if (span === null) return gatekeeper.admit(asked)
    const settle = (admission: Admission): Admission => {
      describeAdmission(request, span, admission)
      endSpan(span)
      return admission
    }
    let admission: Admission | Promise<Admission>
    try {
      admission = within(span, () => gatekeeper.admit(asked))
    } catch (error) {
      endSpan(span, error)
      throw error
    }
    if (!(admission instanceof Promise)) return settle(admission)
    return admission.then(settle, (error: unknown) => {
      endSpan(span, error)
      throw error
    })
  }
}
