/**
 * The change feed's entries as JSON, as the feed (GET /v1/inventory/changes), the change stream and webhooks send them:
 * each entry serialized by the schema of its own type (./entities.ts), compiled once, byte for byte what Fastify would
 * send for that schema. Not one serializer of the union: fast-json-stringify picks an anyOf member by validating the
 * value, and a bigint id is no JSON Schema integer to its validator, so no member would ever match.
 */
import fastJson from 'fast-json-stringify'
import { Type } from 'typebox'
import { HOLD_EVENTS, LOW_STOCK, STOCK_CHANGED, type HoldEvent } from '../model.js'
import {
  EventEnvelope, HoldEventData, HoldEventEntry, InventoryChange, InventoryChangedEvent, LowStockData, LowStockEntry, TypedInventoryChange
} from './entities.js'
import type { EntryView } from './feed.js'

const changes = fastJson(Type.Array(InventoryChange))
const change = fastJson(InventoryChange)
const typedChange = fastJson(TypedInventoryChange)
const holdEntry = fastJson(HoldEventEntry)
const lowStockEntry = fastJson(LowStockEntry)

/** The webhook bodies of the events beside stock changes, by type (documented in the OpenAPI document's `webhooks`). */
export const EVENT_BODIES = {
  ...Object.fromEntries(HOLD_EVENTS.map((type) => [type, EventEnvelope(type, HoldEventData, `A hold event of one pet (${type})`)])) as
    Record<HoldEvent, ReturnType<typeof EventEnvelope>>,
  [LOW_STOCK]: EventEnvelope(LOW_STOCK, LowStockData, 'A pet\'s on-hand quantity fell to or below its reorder point')
}
const stockBody = fastJson(InventoryChangedEvent)
const holdBodies = Object.fromEntries(HOLD_EVENTS.map((type) => [type, fastJson(EVENT_BODIES[type])])) as Record<HoldEvent, (body: unknown) => string>
const lowStockBody = fastJson(EVENT_BODIES[LOW_STOCK])

/** An entry with its time as text, as every schema writes it. */
const timed = <T extends { at: Date }>(entry: T): Omit<T, 'at'> & { at: string } => ({ ...entry, at: entry.at.toISOString() })

/**
 * One entry's JSON. `typed`: as the feed shows it when the request names `types` (with `type`); else a stock change
 * exactly as the feed showed it before it had types (events are only served when named, so always typed).
 */
export function entryJson (entry: EntryView, typed: boolean): string {
  switch (entry.type) {
    case STOCK_CHANGED:
      return typed ? typedChange(timed(entry)) : change(timed(entry))
    case LOW_STOCK:
      return lowStockEntry(timed(entry))
    default:
      return holdEntry(timed(entry))
  }
}

/** A page of the feed as a JSON array (see entryJson for `typed`). */
export function entriesJson (entries: readonly EntryView[], typed: boolean): string {
  if (!typed && entries.every((entry) => entry.type === STOCK_CHANGED)) return changes(entries.map(timed))
  return `[${entries.map((entry) => entryJson(entry, typed)).join(',')}]`
}

/**
 * The body of a webhook delivery: `{type, timestamp, data}`, the data being the entry as the feed shows it without its
 * type (the envelope names it), so that an `inventory.changed` body stays what it was.
 */
export function eventJson (entry: EntryView): string {
  const envelope = { type: entry.type, timestamp: entry.at.toISOString(), data: timed(entry) }
  switch (entry.type) {
    case STOCK_CHANGED:
      return stockBody(envelope)
    case LOW_STOCK:
      return lowStockBody(envelope)
    default:
      return holdBodies[entry.type](envelope)
  }
}
