/**
 * patch: PATCH /v1/inventory/{petId} rotating over 10,000 pets, with durable SQLite commits (synchronous=FULL); its
 * ratio is against get-10's ceiling (GET). Target: ratio >= 0.40.
 */
import { join } from 'node:path'
import { serviceOnly } from '../measure.js'
import type { Scenario, ScenarioResult, Side } from '../scenario.js'
import { prepareStore, scenarioDir, startService } from '../servers.js'
import { Cleanup } from '../support.js'

export const patch: Scenario = {
  id: 'patch',
  title: 'PATCH /v1/inventory/{petId}, durable SQLite commits',
  target: 0.40,
  run: (result, context) => patchScenario(result, context.get10Ceiling())
}

/** Pets in the store of the PATCH scenario: enough that the writes do not all hit the same few rows. */
const PATCH_PETS = 10_000

/** patch: PATCH with durable commits (SQLite, synchronous=FULL by default), rotating over the pets. */
async function patchScenario (result: ScenarioResult, ceiling: Side | null): Promise<void> {
  await Cleanup.scope(async (cleanup) => {
    const dir = scenarioDir(result.id)
    const env = { LOG_LEVEL: 'warn', DATABASE_URL: join(dir, 'petstore.db') }
    const service = await startService('service', env, await prepareStore(env, PATCH_PETS), cleanup)
    result.notes.push(`${PATCH_PETS} pets, ratio against get-10's ceiling (GET)`)
    await serviceOnly(result, service, ceiling, { patchPets: PATCH_PETS })
  })
}

