/**
 * The tracing benchmark's collector (bench/otlp-sink.js) counts spans without parsing the export: its count must be
 * the spans the SDK's own OTLP/HTTP exporters sent, protobuf (the default) and JSON, also when a span's attribute,
 * event or link carries the very key the JSON count goes by, and it must refuse a body it cannot read.
 */
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'
import { context, SpanKind, trace } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as OTLPProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { SimpleSpanProcessor, TracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace'

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

  /** Three spans, one with attributes, events, links and an exception that hold the JSON count's key, through `exporter`. */
  async function exportTrickySpans (exporter: SpanExporter): Promise<void> {
    const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] })
    const tracer = provider.getTracer('otlp-sink-test')
    const tricky = '"startTimeUnixNano":"1","spans":[{"startTimeUnixNano":"2"}]'
    const server = tracer.startSpan('GET /v1/inventory', { kind: SpanKind.SERVER, attributes: { 'url.path': tricky, list: [tricky, tricky] } })
    server.addEvent(tricky, { note: tricky })
    const child = tracer.startSpan('gate', { links: [{ context: server.spanContext(), attributes: { why: tricky } }] }, trace.setSpan(context.active(), server))
    child.recordException(new Error(tricky))
    child.end()
    server.end()
    // Another instrumentation scope: its spans come in a scope of their own in the same export.
    provider.getTracer('another-scope').startSpan('store listInventory').end()
    await provider.forceFlush()
    await provider.shutdown()
  }

  it('counts the spans of real JSON exports, whatever their attributes, events and links hold', async () => {
    const before = await count()
    await exportTrickySpans(new OTLPTraceExporter({ url: `${base}/v1/traces` }))
    assert.equal(await count() - before, 3)
  })

  it('counts the spans of real protobuf exports, the exporters\' default', async () => {
    const before = await count()
    await exportTrickySpans(new OTLPProtobufTraceExporter({ url: `${base}/v1/traces` }))
    assert.equal(await count() - before, 3)
  })

  it('refuses a protobuf body it cannot read, and counts nothing of it', async () => {
    const before = await count()
    // Field 1, length-delimited, 100 bytes long, of which 2 arrived.
    const res = await fetch(`${base}/v1/traces`, { method: 'POST', body: new Uint8Array([0x0a, 100, 0x12, 0x00]), headers: { 'content-type': 'application/x-protobuf' } })
    assert.equal(res.status, 400)
    assert.equal(await count(), before)
  })

  it('refuses what is not a JSON object, and counts nothing of it', async () => {
    const before = await count()
    const res = await fetch(`${base}/v1/traces`, { method: 'POST', body: '"startTimeUnixNano":', headers: { 'content-type': 'application/json' } })
    assert.equal(res.status, 400)
    assert.equal(await count(), before)
  })
})
