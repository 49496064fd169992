#!/usr/bin/env node
// The operator CLI. The TypeScript sources are compiled to dist/ by `npm install` (the prepare script).
// Node.js 22 or newer (package.json engines): say so plainly instead of failing somewhere inside.
const major = Number(process.versions.node.split('.')[0])
if (major < 22) {
  process.stderr.write(`petstore: Node.js 22 or newer is required (22, 24 and 26 are supported); this is ${process.version}\n`)
  process.exit(1)
}
// First of all, before the heap grows: keep nextTick's fast path for the life of the process (src/tick-shape.ts).
const { keepTickShape } = await import('../dist/tick-shape.js')
keepTickShape()
// Traces (docs/observability.md): started before the CLI is imported, so that the instrumentations see pg and ioredis
// load. Only `serve` traces, and only when the environment names an OTLP endpoint; otherwise nothing of it loads.
const { tracingRequested } = await import('../dist/tracing/env.js')
if (process.argv[2] === 'serve' && tracingRequested(process.env)) {
  const [{ startTracing }, { ConfigError }] = await Promise.all([import('../dist/tracing/start.js'), import('../dist/errors.js')])
  try {
    await startTracing(process.env)
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    // As the CLI says every configuration error (src/cli/main.ts): exit 2, the reason, no stack.
    process.stderr.write(`petstore: invalid configuration: ${error.message}\n`)
    process.exit(2)
  }
}
const { main } = await import('../dist/cli/main.js')
process.exitCode = await main(process.argv.slice(2))
