/**
 * The sampler and the trace ids of a traced process, made here rather than by the SDK so that the service can ask the
 * sampler itself, once, as a request arrives (src/tracing/spans.ts, startServerSpan), and make nothing at all for a
 * request it leaves out (docs/adr/0044-tracing-costs-what-it-samples.md); a request with no caller's context is decided
 * by the sampler's rule without asking it (docs/adr/0053-new-traces-decided-by-the-samplers-rule.md). The SDK gets the
 * same two objects: the spans it makes ask the same sampler, and the request's server span keeps the trace id the
 * decision was made on.
 */
import { diag } from '@opentelemetry/api'
import { otelVariable } from './env.js'
import { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, RandomIdGenerator, TraceIdRatioBasedSampler, type IdGenerator, type Sampler } from '@opentelemetry/sdk-trace'

/** OTEL_TRACES_SAMPLER_ARG as the SDK reads it for the ratio samplers: 1 when missing or out of [0, 1]. */
function ratio (env: Readonly<Record<string, string | undefined>>): number {
  const text = otelVariable(env, 'OTEL_TRACES_SAMPLER_ARG')
  const value = text === undefined ? Number.NaN : Number(text)
  if (Number.isNaN(value) || value < 0 || value > 1) {
    diag.error(`OTEL_TRACES_SAMPLER_ARG=${text ?? ''} is blank or out of range ([0..1]), defaulting to 1.`)
    return 1
  }
  return value
}

/**
 * How the configured sampler decides a request that brings no caller's context, known beforehand so that the service
 * can decide it without asking (src/tracing/spans.ts): always, never, or on the trace id as TraceIdRatioBasedSampler
 * does, kept when the four 32-bit words of the id XORed together fall below `below`.
 */
export type RootRule = 'always' | 'never' | { below: number }

/** What TraceIdRatioBasedSampler keeps of ids at `ratio`: its upper bound on the XOR of the id's words. */
function ratioRule (ratio: number): RootRule {
  return { below: ratio === 1 ? 2 ** 32 : Math.floor(ratio * 0xffffffff) }
}

/**
 * The sampler OTEL_TRACES_SAMPLER (and _ARG) name, as the OpenTelemetry SDK builds it from them
 * (@opentelemetry/sdk-node's createSamplerFromEnv): `parentbased_always_on` when unset or unknown; with the rule it
 * applies to a request that brings no caller's context.
 */
export function samplingFromEnv (env: Readonly<Record<string, string | undefined>>): { sampler: Sampler, root: RootRule } {
  const name = otelVariable(env, 'OTEL_TRACES_SAMPLER')
  switch (name) {
    case 'always_on': return { sampler: new AlwaysOnSampler(), root: 'always' }
    case 'always_off': return { sampler: new AlwaysOffSampler(), root: 'never' }
    case 'parentbased_always_off': return { sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }), root: 'never' }
    case 'traceidratio': {
      const value = ratio(env)
      return { sampler: new TraceIdRatioBasedSampler(value), root: ratioRule(value) }
    }
    case 'parentbased_traceidratio': {
      const value = ratio(env)
      return { sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(value) }), root: ratioRule(value) }
    }
    case undefined:
    case 'parentbased_always_on':
      return { sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), root: 'always' }
    default:
      diag.error(`unknown OTEL_TRACES_SAMPLER value "${name}", using default`)
      return { sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), root: 'always' }
  }
}

/** A random 32-bit word, drawn as the SDK's RandomIdGenerator draws each word of an id. */
const word = (): number => Math.random() * 2 ** 32 >>> 0

/**
 * Random trace and span ids, as the SDK makes them, except that a request's new trace id is drawn before its server
 * span exists: the sampler decides on it (a ratio sampler reads the id), then the SDK is handed the same id (`next`)
 * for the span it starts right after, synchronously.
 */
export class RequestTraceIds implements IdGenerator {
  readonly #random = new RandomIdGenerator()
  readonly #words = Buffer.alloc(16)
  #next: string | undefined

  /** A new random trace id, not handed out to anyone yet. */
  fresh (): string {
    return this.#random.generateTraceId()
  }

  /**
   * A new trace id for a request that brings no caller's context, when `rule` keeps it; null when it leaves the request
   * out, decided on the id's words before any id is made (most requests are left out). The words are drawn as the SDK
   * draws them, so the id is one its generator could have made, and TraceIdRatioBasedSampler keeps exactly the ids a
   * ratio rule keeps: it XORs the same four words, read back from the hex.
   */
  root (rule: RootRule): string | null {
    if (rule === 'never') return null
    if (rule === 'always') return this.fresh()
    const w0 = word()
    const w1 = word()
    const w2 = word()
    let w3 = word()
    // An id of zeros is not valid: the SDK's generator makes its last byte 1.
    if ((w0 | w1 | w2 | w3) === 0) w3 = 1
    if (((w0 ^ w1 ^ w2 ^ w3) >>> 0) >= rule.below) return null
    return this.#hex(w0, w1, w2, w3)
  }

  #hex (w0: number, w1: number, w2: number, w3: number): string {
    const words = this.#words
    words.writeUInt32BE(w0, 0)
    words.writeUInt32BE(w1, 4)
    words.writeUInt32BE(w2, 8)
    words.writeUInt32BE(w3, 12)
    return words.toString('hex')
  }

  /** The id the next generateTraceId returns (once); undefined takes it back. */
  next (traceId: string | undefined): void {
    this.#next = traceId
  }

  generateTraceId (): string {
    const next = this.#next
    if (next === undefined) return this.#random.generateTraceId()
    this.#next = undefined
    return next
  }

  generateSpanId (): string {
    return this.#random.generateSpanId()
  }
}
