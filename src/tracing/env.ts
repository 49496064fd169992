/**
 * Whether the environment asks for traces, read as the OpenTelemetry SDK reads it: an OTLP endpoint is set
 * (OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT for traces alone), the SDK is not disabled
 * (OTEL_SDK_DISABLED=true) and the traces exporter is not `none`. Everything else (service name, sampler, resource
 * attributes, protocol) the SDK reads itself. This module imports nothing, so that bin/petstore.js can ask before
 * any other module is loaded.
 */
export function tracingRequested (env: Readonly<Record<string, string | undefined>>): boolean {
  const value = (name: string): string => otelVariable(env, name) ?? ''
  if (value('OTEL_EXPORTER_OTLP_ENDPOINT') === '' && value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') === '') return false
  if (value('OTEL_SDK_DISABLED').toLowerCase() === 'true') return false
  // The SDK sets up no tracer provider when `none` comes first.
  return value('OTEL_TRACES_EXPORTER').split(',')[0]?.trim().toLowerCase() !== 'none'
}

/** A variable as the OpenTelemetry SDK reads it: trimmed, and an empty value is no value (the specification's rule). */
export function otelVariable (env: Readonly<Record<string, string | undefined>>, name: string): string | undefined {
  const value = env[name]?.trim()
  return value === undefined || value === '' ? undefined : value
}
