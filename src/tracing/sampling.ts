/**
 * The sampler and the trace ids of a traced process, made here rather than by the SDK so that the service can ask the
 * sampler itself, once, as a request arrives (src/tracing/spans.ts, startServerSpan), and make nothing at all for a
 * request it leaves out (docs/adr/0044-tracing-costs-what-it-samples.md). The SDK gets the same two objects: the spans
 * it makes ask the same sampler, and the request's server span keeps the trace id the decision was made on.
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
 * The sampler OTEL_TRACES_SAMPLER (and _ARG) name, as the OpenTelemetry SDK builds it from them
 * (@opentelemetry/sdk-node's createSamplerFromEnv): `parentbased_always_on` when unset or unknown.
 */
export function samplerFromEnv (env: Readonly<Record<string, string | undefined>>): Sampler {
  const name = otelVariable(env, 'OTEL_TRACES_SAMPLER')
  switch (name) {
    case 'always_on': return new AlwaysOnSampler()
    case 'always_off': return new AlwaysOffSampler()
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'traceidratio': return new TraceIdRatioBasedSampler(ratio(env))
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio(env)) })
    case undefined:
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    default:
      diag.error(`unknown OTEL_TRACES_SAMPLER value "${name}", using default`)
      return new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }
}

/**
 * Random trace and span ids, as the SDK makes them, except that a request's new trace id is drawn before its server
 * span exists: the sampler decides on it (a ratio sampler reads the id), then the SDK is handed the same id (`next`)
 * for the span it starts right after, synchronously.
 */
export class RequestTraceIds implements IdGenerator {
  readonly #random = new RandomIdGenerator()
  #next: string | undefined

  /** A new random trace id, not handed out to anyone yet. */
  fresh (): string {
    return this.#random.generateTraceId()
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
