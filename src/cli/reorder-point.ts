/**
 * `petstore inventory reorder-point PETID [N | --clear] [--json]`: set, remove or show the reorder point of one pet,
 * through the same domain as PUT, DELETE and GET /v1/inventory/{petId}/reorder-point.
 */
import type { Config } from '../config.js'
import { clearReorderPoint, getReorderPoint, setReorderPoint } from '../domain/alerts.js'
import { AppError } from '../errors.js'
import { parseInt64 } from '../int64.js'
import { MAX_QUANTITY, MAX_QUANTITY_TEXT } from '../model.js'
import type { ReorderPoint } from '../store/alerts/types.js'
import { parse, UsageError, withStore } from './common.js'
import type { Clock, Io } from './io.js'
import { table } from './table.js'

/** The point as a table for people, or one JSON object for programs (petId a bare number, digit for digit). */
function shown (point: ReorderPoint, json: boolean): string {
  if (json) return `{"petId":${point.petId},"reorderPoint":${point.reorderPoint},"low":${point.low}}\n`
  return table(['PET', 'REORDER POINT', 'LOW'], [[String(point.petId), String(point.reorderPoint), point.low ? 'yes' : 'no']])
}

function pointOf (text: string): number {
  if (!/^(0|[1-9][0-9]{0,9})$/.test(text) || Number(text) > MAX_QUANTITY) throw new UsageError(`N must be an integer from 0 to ${MAX_QUANTITY_TEXT}`)
  return Number(text)
}

export async function reorderPointCommand (args: string[], config: Config, io: Io, clock: Clock): Promise<number> {
  const options = { clear: { type: 'boolean' }, json: { type: 'boolean' } } as const
  // One or two arguments: the pet, and the point to set.
  const given = args.filter((arg) => !arg.startsWith('--')).length
  const { values, positionals } = parse(args, options, Math.min(Math.max(given, 1), 2))
  const petId = parseInt64(positionals[0] as string)
  if (petId === null) throw new UsageError('PETID must be an integer from -9223372036854775808 to 9223372036854775807')
  const json = values.json === true
  const text = positionals[1]
  if (text !== undefined && values.clear === true) throw new UsageError('give either N (to set the point) or --clear (to remove it), not both')
  try {
    if (values.clear === true) {
      const had = await withStore(config, 'write', (store) => clearReorderPoint(store, petId))
      io.stderr(had ? `Removed the reorder point of pet ${petId}.\n` : `Pet ${petId} had no reorder point.\n`)
      return 0
    }
    const point = text === undefined
      ? await withStore(config, 'read', (store) => getReorderPoint(store, petId))
      : await withStore(config, 'write', (store) => setReorderPoint(store, petId, pointOf(text), { keyId: null, requestId: null }, clock))
    io.stdout(shown(point, json))
    if (text !== undefined && point.low) io.stderr(`Pet ${petId} is at or below its reorder point: an inventory.low_stock event was recorded.\n`)
    return 0
  } catch (error) {
    if (!(error instanceof AppError) || error.code !== 'not_found') throw error
    io.stderr(`petstore: ${text === undefined && values.clear !== true ? error.message : `pet ${petId} has no stock entry`}\n`)
    return 1
  }
}
