/**
 * The run's settings, from the BENCH_* environment variables (bench/README.md); read once, when the runner starts.
 * A bad value stops the run with exit code 2.
 */
import { hasCommand } from './support.js'

function numberFromEnv (name: string, fallback: number, integer: boolean): number {
  const text = process.env[name]
  if (text === undefined || text === '') return fallback
  const value = Number(text)
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    console.error(`bench: ${name} must be a positive ${integer ? 'integer' : 'number'}, got "${text}"`)
    process.exit(2)
  }
  return value
}

const QUICK = process.env.BENCH_QUICK === '1'

export const settings = {
  quick: QUICK,
  rounds: numberFromEnv('BENCH_ROUNDS', QUICK ? 1 : 3, true),
  duration: numberFromEnv('BENCH_DURATION', QUICK ? 2 : 5, false),
  // PostgreSQL instances sharing a core need a few seconds before they reach their pace.
  warmup: numberFromEnv('BENCH_WARMUP', QUICK ? 1 : 3, false),
  connections: numberFromEnv('BENCH_CONNECTIONS', 50, true),
  // The latency scenario: seconds measured at each fixed rate, after seconds of warm-up at that rate, and its cases.
  latencyDuration: numberFromEnv('BENCH_LATENCY_DURATION', QUICK ? 3 : 20, false),
  latencyWarmup: numberFromEnv('BENCH_LATENCY_WARMUP', QUICK ? 1 : 5, false),
  latencyCases: (process.env.BENCH_LATENCY_CASES ?? '').split(',').map((s) => s.trim()).filter((s) => s !== ''),
  postgresUrl: process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  redisUrl: process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379',
  // wrk when installed: a C load generator parses a 475 KB response far faster than autocannon, which on one
  // core becomes the limit before the bare server does.
  loadGenerator: process.env.BENCH_LOADGEN ?? (hasCommand('wrk') ? 'wrk' : 'autocannon'),
  only: (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter((s) => s !== ''),
  // The tracing scenario's sampler (OTEL_TRACES_SAMPLER and _ARG of the traced service): every request by default.
  tracesSampler: process.env.BENCH_TRACES_SAMPLER ?? 'always_on',
  tracesSamplerArg: process.env.BENCH_TRACES_SAMPLER_ARG ?? '',
  // The tracing scenario's fresh pairs of services: the traced process's cost differs from one start to the next.
  tracingStarts: numberFromEnv('BENCH_TRACING_STARTS', QUICK ? 1 : 3, true),
  // The traced service's OTLP protocol: the exporters' default (what a deployment gets unless it says otherwise).
  tracesProtocol: process.env.BENCH_TRACES_PROTOCOL ?? 'http/protobuf'
}
