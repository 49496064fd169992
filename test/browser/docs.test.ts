/**
 * The /docs page in a real headless Chromium (Debian's `chromium`, driven by playwright-core): it renders the
 * operations, takes a key and makes a real call to this server, and loads nothing from anywhere else.
 * Without Chromium these tests fail when CI=true and are skipped elsewhere (CHROMIUM_PATH overrides the path).
 */
import assert from 'node:assert/strict'
import { constants } from 'node:fs'
import { access, mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test, type TestContext } from 'node:test'
import { chromium, type Browser, type Page, type Request } from 'playwright-core'
import { pet, testApp, type TestApp } from '../helpers/app.js'
import { requireService } from '../helpers/services.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
  '--no-first-run', '--disable-component-update', '--disable-sync']
// Generous: a loaded CI machine parses the 1.5 MB Swagger UI bundle slowly. Locator waits return as soon as ready.
const WAIT_MS = 30_000

async function executable (path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

interface OpenedPage {
  page: Page
  base: string
  /** Every request the page made, in order. */
  requests: Request[]
  /** Console errors (CSP refusals among them) and uncaught errors reported by the page. */
  problems: string[]
}

/** Serves the app on an ephemeral port and opens /docs in a fresh browser context (no shared storage). */
async function openDocs (t: TestContext, browser: Browser, { app }: TestApp): Promise<OpenedPage> {
  const base = await app.listen({ port: 0, host: '127.0.0.1' })
  const context = await browser.newContext()
  t.after(() => context.close())
  const page = await context.newPage()
  page.setDefaultTimeout(WAIT_MS)
  const requests: Request[] = []
  const problems: string[] = []
  page.on('request', (request) => requests.push(request))
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`))
  // Chromium reports Content-Security-Policy refusals and failed loads as console errors.
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error: ${message.text()}`)
  })
  await page.goto(`${base}/docs`)
  // The operations render once the bundle has loaded and fetched the document.
  await page.locator('.opblock').first().waitFor()
  return { page, base, requests, problems }
}

/** Runs a step; when it fails, saves a screenshot of the page and names it in the error. */
async function withScreenshot<T> (page: Page, step: () => Promise<T>): Promise<T> {
  try {
    return await step()
  } catch (error) {
    const path = join(await mkdtemp(join(tmpdir(), 'petstore-docs-')), 'failure.png')
    await page.screenshot({ path, fullPage: true }).catch(() => {})
    if (error instanceof Error) error.message += ` (screenshot: ${path})`
    throw error
  }
}

function assertOnlyOwnOrigin ({ requests, base }: OpenedPage): void {
  const origin = new URL(base).origin
  // data: URLs are inline content, not downloads.
  const elsewhere = requests.map((r) => r.url()).filter((url) => !url.startsWith('data:') && new URL(url).origin !== origin)
  assert.deepEqual(elsewhere, [], 'the page fetched from another origin')
}

if (await requireService('Chromium', CHROMIUM, () => executable(CHROMIUM), 'the /docs browser tests', 'CHROMIUM_PATH')) {
  describe('the /docs page in headless Chromium', { timeout: 180_000 }, () => {
    let browser: Browser
    before(async () => {
      browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: WAIT_MS })
    })
    after(() => browser?.close())

    test('when /docs is opened, then it lists the operations with everything served by the service', async (t) => {
      const opened = await openDocs(t, browser, await testApp(t))
      await withScreenshot(opened.page, async () => {
        await opened.page.locator('#operations-store-listOrders').waitFor()
        const listed = await opened.page.locator('.opblock-summary').evaluateAll((summaries) => summaries.map((summary) => [
          summary.querySelector('.opblock-summary-method')?.textContent,
          // Deprecated operations render their path in another class; [data-path] holds either.
          summary.querySelector('[data-path]')?.textContent,
          summary.querySelector('.opblock-summary-operation-id')?.textContent
        ].join(' ')))
        for (const operation of [
          'GET /inventory listInventory',
          'PATCH /inventory/{petId} updateInventory',
          'GET /pets/{petId} getPetById',
          'GET /store/orders listOrders'
        ]) assert.ok(listed.includes(operation), `${operation} is not among ${JSON.stringify(listed)}`)
        assert.ok(opened.requests.some((r) => r.url() === `${opened.base}/docs/json`), 'the page loaded its document from the service')
        assertOnlyOwnOrigin(opened)
        assert.deepEqual(opened.problems, [])
      })
    })

    test('when a key is authorized and listInventory is executed, then the page shows the real answer for that key', async (t) => {
      // Small ids: Swagger UI pretty-prints the body through JavaScript numbers, which cannot show ids above 2^53.
      const created = [pet(101, { quantity: 3 }), pet(202, { quantity: 0, status: 'sold' })]
      const app = await testApp(t, {}, { pets: created })
      const opened = await openDocs(t, browser, app)
      const { page, base } = opened
      await withScreenshot(page, async () => {
        await page.locator('.auth-wrapper button.authorize').click()
        const dialog = page.locator('.modal-ux')
        await dialog.locator('input#auth-bearer-value').fill(app.key)
        await dialog.getByRole('button', { name: 'Apply credentials' }).click()
        await dialog.getByRole('button', { name: 'Close' }).click()
        await dialog.waitFor({ state: 'detached' })

        const operation = page.locator('#operations-inventory-listInventory')
        await operation.locator('.opblock-summary').click()
        const action = operation.getByRole('button', { name: /^(Try it out|Execute)$/ })
        await action.first().waitFor()
        if (await operation.getByRole('button', { name: 'Try it out' }).isVisible()) {
          await operation.getByRole('button', { name: 'Try it out' }).click()
        }
        const call = page.waitForRequest((request) => request.url() === `${base}/v1/inventory`)
        await operation.getByRole('button', { name: 'Execute' }).click()
        assert.equal((await call).headers().authorization, `Bearer ${app.key}`)

        const answer = operation.locator('.live-responses-table .response')
        await answer.first().waitFor()
        assert.equal((await answer.locator('.response-col_status').first().innerText()).trim(), '200')
        const body = JSON.parse(await answer.locator('.highlight-code code').first().innerText()) as unknown
        assert.deepEqual(body, [
          { petId: 101, quantity: 3, status: 'available' },
          { petId: 202, quantity: 0, status: 'sold' }
        ])
        // The server counted the call against this key: one request gone from its window.
        const headers = await answer.locator('.response-col_description').first().innerText()
        const limit = Number(/x-ratelimit-limit: (\d+)/.exec(headers)?.[1])
        const remaining = Number(/x-ratelimit-remaining: (\d+)/.exec(headers)?.[1])
        assert.ok(limit > 0, `no X-RateLimit-Limit shown in: ${headers}`)
        assert.equal(remaining, limit - 1)

        assertOnlyOwnOrigin(opened)
        assert.deepEqual(opened.problems, [])
      })
    })

    test('when the page is reloaded after authorizing, then the key is still applied', async (t) => {
      const app = await testApp(t)
      const { page } = await openDocs(t, browser, app)
      await withScreenshot(page, async () => {
        await page.locator('.auth-wrapper button.authorize').click()
        await page.locator('.modal-ux input#auth-bearer-value').fill(app.key)
        await page.locator('.modal-ux').getByRole('button', { name: 'Apply credentials' }).click()
        await page.locator('.modal-ux').getByRole('button', { name: 'Close' }).click()
        await page.reload()
        await page.locator('.opblock').first().waitFor()
        await page.locator('.auth-wrapper button.authorize.locked').waitFor()
      })
    })
  })
}
