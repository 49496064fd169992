/**
 * docs/observability.md against the app: its table of operation names lists every operation of the API (and
 * nothing else), and its metrics table every metric the service exports. A new route or metric without its line in
 * the page fails here.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { Metrics } from '../../src/metrics/index.js'
import { testApp } from '../helpers/app.js'

const PAGE = readFileSync(new URL('../../docs/observability.md', import.meta.url), 'utf8')

/** The rows of the first table after `heading`, as the text of their cells. */
function tableAfter (heading: string): string[][] {
  const start = PAGE.indexOf(`\n${heading}\n`)
  assert.ok(start !== -1, `the page has the heading ${heading}`)
  const lines = PAGE.slice(start).split('\n')
  const first = lines.findIndex((line) => line.startsWith('|'))
  const rows: string[][] = []
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break
    rows.push(line.slice(1, -1).split('|').map((cell) => cell.trim()))
  }
  return rows
}

/** The text between the first pair of backquotes in a cell. */
const quoted = (cell: string | undefined): string => /`([^`]+)`/.exec(cell ?? '')?.[1] ?? ''

describe('docs/observability.md', () => {
  test('when the API has an operation, then the table of operation names lists it with its method and path, and lists nothing else', async (t) => {
    const { request } = await testApp(t)
    const document = (await request({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, { operationId?: string }>> }
    const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => [operation.operationId, `${method.toUpperCase()} /v1${path}`]))
    assert.ok(operations.length >= 18, 'the document lists the API')
    const documented = tableAfter('### The operation label').map(([name, requested]) => [quoted(name), quoted(requested)])
    assert.deepEqual(documented.toSorted(), operations.toSorted())
  })

  test('when the service exports a metric, then the metrics table lists it', async () => {
    // With the process metrics, as `petstore serve` has them: prom-client's own (process_*, nodejs_*) share one row.
    const exported = (await new Metrics({ processMetrics: true }).registry.getMetricsAsJSON()).map((metric) => metric.name)
      .filter((name) => !name.startsWith('process_') && !name.startsWith('nodejs_'))
    assert.ok(exported.includes('petstore_build_info'))
    const documented = new Set(tableAfter('## Metrics').map(([name]) => quoted(name)))
    assert.deepEqual(exported.filter((name) => !documented.has(name)), [], 'exported, not in the table')
    assert.deepEqual([...documented].filter((name) => name.startsWith('petstore_') && !exported.includes(name)), [], 'in the table, not exported')
  })
})
