/** get-10k: get-10 with 10,000 entries (~475 KB), against a ceiling answering the same bytes. Target: ratio >= 0.8. */
import type { Scenario } from '../scenario.js'
import { getVsCeiling } from './get-10.js'

export const get10k: Scenario = {
  id: 'get-10k',
  title: 'GET /v1/inventory, 10,000 entries',
  target: 0.8,
  run: async (result) => { await getVsCeiling(result, 10_000) }
}
