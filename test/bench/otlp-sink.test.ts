/**
 * The tracing benchmark's collector (bench/otlp-sink.js) counts spans without parsing the export: its count must be
 * the spans the SDK's own OTLP/HTTP JSON exporter sent, also when a span's attribute, event or link carries the very
 * key it counts by, and it must refuse a body that is not a JSON object.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import { context, SpanKind, trace } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'

const SINK = fileURLToPath(new URL('../../bench/otlp-sink.js', import.meta.url))

describe('bench/otlp-sink.js', () => {
  let sink: ChildProcess
  let base = ''

  before(async () => {
    sink = spawn(process.execPath, [SINK], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    sink.stdout?.setEncoding('utf8')
    for await (const chunk of sink.stdout as AsyncIterable<string>) {
      out += chunk
      const port = /listening (\d+)/.exec(out)?.[1]
      if (port !== undefined) {
        base = `http://127.0.0.1:${port}`
        break
      }
    }
  })

  after(async () => {
    sink.kill('SIGTERM')
    if (sink.exitCode === null) await once(sink, 'exit')
  })

  const count = async (): Promise<number> => Number(await (await fetch(`${base}/count`)).text())

  it('counts the spans of real exports, whatever their attributes, events and links hold', async () => {
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${base}/v1/traces` }) })] })
    const tracer = provider.getTracer('otlp-sink-test')
    const tricky = '"startTimeUnixNano":"1","spans":[{"startTimeUnixNano":"2"}]'
    const server = tracer.startSpan('GET /v1/inventory', { kind: SpanKind.SERVER, attributes: { 'url.path': tricky, list: [tricky, tricky] } })
    server.addEvent(tricky, { note: tricky })
    const child = tracer.startSpan('gate', { links: [{ context: server.spanContext(), attributes: { why: tricky } }] }, trace.setSpan(context.active(), server))
    child.recordException(new Error(tricky))
    child.end()
    server.end()
    tracer.startSpan('store listInventory').end()
    await provider.forceFlush()
    assert.equal(await count(), 3)
    await provider.shutdown()
  })

  it('refuses what is not a JSON object, and counts nothing of it', async () => {
    const before = await count()
    const res = await fetch(`${base}/v1/traces`, { method: 'POST', body: '"startTimeUnixNano":', headers: { 'content-type': 'application/json' } })
    assert.equal(res.status, 400)
    assert.equal(await count(), before)
  })
})
