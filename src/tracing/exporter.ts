/**
 * The exporter the environment names, as the SDK would pick it (docs/observability.md, "Tracing"): OTLP (the
 * default) over the protocol that OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL names
 * (http/protobuf by default, http/json, grpc), or the console (OTEL_TRACES_EXPORTER=console). Each OTLP exporter reads
 * its endpoint, headers and timeout itself. Only the one used is loaded (the gRPC one brings a gRPC client).
 */
import { diag } from '@opentelemetry/api'
import type { SpanExporter } from '@opentelemetry/sdk-trace'
import { otelVariable } from './env.js'

/** Whether the environment asks for the console exporter (OTEL_TRACES_EXPORTER=console) rather than OTLP. */
export function consoleExporterRequested (env: Readonly<Record<string, string | undefined>>): boolean {
  return otelVariable(env, 'OTEL_TRACES_EXPORTER')?.split(',')[0]?.trim().toLowerCase() === 'console'
}

/** The OTLP exporter over the protocol the environment names. */
export async function otlpExporter (env: Readonly<Record<string, string | undefined>>): Promise<SpanExporter> {
  const protocol = otelVariable(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? otelVariable(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf'
  switch (protocol) {
    case 'grpc':
      return new (await import('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter()
    case 'http/json':
      return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter()
    default:
      if (protocol !== 'http/protobuf') diag.warn(`Unsupported OTLP traces protocol: ${protocol}. Using http/protobuf.`)
      return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter()
  }
}
