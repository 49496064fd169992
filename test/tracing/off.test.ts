/**
 * Tracing is off unless the environment names an OTLP endpoint, and off means absent: no provider, context manager
 * or propagator registered with the OpenTelemetry API, no Fastify plugin, no diagnostics-channel subscriber.
 */
import assert from 'node:assert/strict'
import { hasSubscribers } from 'node:diagnostics_channel'
import { describe, test } from 'node:test'
import { tracingRequested } from '../../src/tracing/env.js'
import { tracingOn } from '../../src/tracing/spans.js'
import { auth, pet, testApp } from '../helpers/app.js'

/** Where the OpenTelemetry API (version 1) keeps whatever was registered with it: nothing, until something is. */
const API_GLOBAL = Symbol.for('opentelemetry.js.api.1')

describe('whether to trace', () => {
  test('when no OTLP endpoint is set, then tracing is off; with either endpoint variable, on', () => {
    assert.equal(tracingRequested({}), false)
    assert.equal(tracingRequested({ OTEL_SERVICE_NAME: 'petstore', OTEL_TRACES_SAMPLER: 'always_on' }), false)
    assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), false, 'an empty value is no value')
    assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), true)
    assert.equal(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }), true)
  })

  test('when the SDK is disabled or the traces exporter is none, then tracing is off whatever the endpoint', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }
    assert.equal(tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: 'true' }), false)
    assert.equal(tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: ' TRUE ' }), false)
    assert.equal(tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: 'false' }), true)
    assert.equal(tracingRequested({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }), false)
    assert.equal(tracingRequested({ ...endpoint, OTEL_TRACES_EXPORTER: 'otlp' }), true)
  })
})

describe('without tracing', () => {
  test('when the app serves requests with no OTEL variables, then nothing of OpenTelemetry is registered', async (t) => {
    const { request, key } = await testApp(t, {}, { pets: [pet(1)] })
    assert.equal((await request({ method: 'GET', url: '/v1/inventory', headers: auth(key) })).statusCode, 200)
    const patched = await request({ method: 'PATCH', url: '/v1/inventory/1', headers: { ...auth(key), 'content-type': 'application/json' }, payload: '{"quantity":3}' })
    assert.equal(patched.statusCode, 200)

    assert.equal(tracingOn(), false)
    assert.equal((globalThis as Record<symbol, unknown>)[API_GLOBAL], undefined, 'no tracer provider, context manager or propagator')
    assert.equal(hasSubscribers('fastify.initialization'), false, 'nothing waits for Fastify instances')
  })
})
