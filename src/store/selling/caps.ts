/** The caps on what one quota may hold (HoldCaps), as both stores check them inside a hold's placement. */
import type { HoldLine } from '../../model.js'
import type { NewHold, PlaceHoldResult } from './types.js'

/**
 * The refusal of a hold that would take its quota past a cap, given what the quota holds now (its active, unexpired
 * holds and their units); null when it fits.
 */
export function capRefusal (now: { holds: bigint | number, units: bigint | number }, lines: readonly HoldLine[], hold: NewHold): PlaceHoldResult | null {
  const holds = Number(now.holds)
  const units = Number(now.units)
  if (holds + 1 > hold.caps.activeHolds) return { status: 'limit_reached', cap: 'activeHolds', current: holds, max: hold.caps.activeHolds }
  const asked = lines.reduce((sum, line) => sum + line.quantity, 0)
  if (units + asked > hold.caps.heldUnits) return { status: 'limit_reached', cap: 'heldUnits', current: units, max: hold.caps.heldUnits }
  return null
}
