/**
 * The entities' schemas (TypeBox): one definition of each record's shape and bounds, used by the API (request
 * validation, response serialization, the OpenAPI document) and by the import (each imported record is checked
 * against the same schema, ./validation.ts).
 */
import { Type, type Static } from 'typebox'
import { MAX_NAME_LENGTH, MAX_NOTE_LENGTH, MAX_REFERENCE_LENGTH, MAX_URL_LENGTH } from './rules.js'
import {
  HOLD_EVENTS, LOW_STOCK, MAX_ORDER_QUANTITY, MAX_QUANTITY, MAX_QUANTITY_TEXT, ORDER_STATES, ORDER_STATUSES, PET_STATUSES, STOCK_CHANGED, STOCK_REASONS,
  type HoldEvent
} from '../model.js'
import { HOLD_ID_PATTERN } from './selling.js'
import { SAFE_TEXT_PATTERN, SAFE_TEXT_RULE } from './text.js'

/**
 * An int64 as the service writes it: a bare JSON number (bigint inside the service, serialized digit for
 * digit by fast-json-stringify).
 */
export const Int64 = Type.Unsafe<bigint>({ type: 'integer', format: 'int64' })

/** Text people name things with, printed by the CLI: bounded, and nothing a terminal interprets. */
const Name = (options: { examples?: string[], description?: string } = {}) =>
  Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, pattern: SAFE_TEXT_PATTERN, ...options })

export const PetStatus = Type.Enum(PET_STATUSES, { type: 'string', description: 'Status of the pet' })
export const OrderStatus = Type.Enum(ORDER_STATUSES, { type: 'string', description: 'Status of the order' })

export const InventoryItem = Type.Object({
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'Identifier of the animal the entry tracks' }),
  quantity: Type.Integer({ minimum: 0, maximum: MAX_QUANTITY, description: 'Current stock count' }),
  status: PetStatus
}, { additionalProperties: false, description: 'The stock entry of one pet' })

/** What each reason means to a shop, in the words the schema descriptions use (docs/adr/0034-reasons-of-a-shop.md). */
const REASON_MEANINGS = '`arrival`: new stock came in (a delivery, a litter); `return`: a customer brought units back; ' +
  '`adjustment`: a manual correction with no better reason (the default); `sale`: units were sold; `loss`: units were ' +
  'lost to death, escape or damage; `recount`: a stock count found a different number and this corrects it. `sale` and ' +
  '`loss` normally take stock away, but no sign is enforced for any reason: a sale or loss undone is recorded with the ' +
  'same reason and the opposite sign.'

export const StockReason = Type.Enum(STOCK_REASONS, {
  type: 'string',
  default: 'adjustment',
  description: `Why the stock changes, recorded in the stock ledger. ${REASON_MEANINGS}`
})

/** The reference a stock change may carry: what it was for, in the caller's own terms. */
export const StockReference = Type.String({
  minLength: 1,
  maxLength: MAX_REFERENCE_LENGTH,
  // Shown by `petstore inventory history` on operators' terminals, like notes.
  pattern: SAFE_TEXT_PATTERN,
  description: 'What the change was for, in your own terms: an order, an invoice, a count sheet. Recorded in the stock ledger ' +
    `and shown as \`reference\` in the change feed, the change stream and webhooks (1 to ${MAX_REFERENCE_LENGTH} characters; ${SAFE_TEXT_RULE})`,
  examples: ['order-10482']
})

export const InventoryUpdate = Type.Object({
  quantity: Type.Integer({ minimum: 0, maximum: MAX_QUANTITY, description: `The new stock count, 0 to ${MAX_QUANTITY_TEXT}` }),
  reason: Type.Optional(StockReason),
  note: Type.Optional(Type.String({
    minLength: 1,
    maxLength: MAX_NOTE_LENGTH,
    // Notes are printed on operators' terminals by `petstore inventory history`.
    pattern: SAFE_TEXT_PATTERN,
    description: `A short free-text note recorded in the stock ledger (1 to ${MAX_NOTE_LENGTH} characters; ${SAFE_TEXT_RULE})`,
    examples: ['Delivery 2026-11-22 from the breeder']
  })),
  reference: Type.Optional(StockReference)
}, { additionalProperties: false, description: 'Sets the stock quantity of one pet; reason, note and reference are recorded in the stock ledger' })
export type InventoryUpdate = Static<typeof InventoryUpdate>

export const InventoryAdjustment = Type.Object({
  delta: Type.Integer({
    minimum: -MAX_QUANTITY,
    maximum: MAX_QUANTITY,
    not: { const: 0 },
    description: `What to add to the stock count: positive for arrivals and returns, negative for what left; not 0, at most ${MAX_QUANTITY_TEXT} either way`,
    examples: [3, -1]
  }),
  reason: Type.Optional(StockReason),
  note: InventoryUpdate.properties.note,
  reference: Type.Optional(StockReference)
}, { additionalProperties: false, description: 'Adds to (or, negative, takes from) the stock quantity of one pet; reason, note and reference are recorded in the stock ledger' })
export type InventoryAdjustment = Static<typeof InventoryAdjustment>

/** The most changes one batch may hold. */
export const MAX_BATCH_CHANGES = 100

export const InventoryBatchChange = Type.Object({
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'The pet whose stock entry changes; a pet appears at most once in a batch' }),
  quantity: Type.Optional(Type.Integer({ ...InventoryUpdate.properties.quantity, description: 'Sets the stock count (as PATCH); give quantity or delta' })),
  delta: Type.Optional(Type.Integer({ ...InventoryAdjustment.properties.delta, description: 'Adds to the stock count (as an adjustment); give quantity or delta' })),
  ifMatch: Type.Optional(Type.String({
    minLength: 1,
    maxLength: 64,
    description: 'The entry\'s ETag (e.g. "r7", quotes included): the change applies only to an unchanged entry',
    examples: ['"r7"']
  })),
  reason: Type.Optional(StockReason),
  note: InventoryUpdate.properties.note,
  reference: Type.Optional(StockReference)
}, { additionalProperties: false, description: 'One change of a batch: a quantity to set or a delta to add, for one pet' })
export type InventoryBatchChange = Static<typeof InventoryBatchChange>

export const InventoryBatch = Type.Object({
  changes: Type.Array(InventoryBatchChange, { minItems: 1, maxItems: MAX_BATCH_CHANGES, description: `1 to ${MAX_BATCH_CHANGES} changes, applied together or not at all` })
}, { additionalProperties: false, description: 'Stock changes of several pets, applied in one transaction' })
export type InventoryBatch = Static<typeof InventoryBatch>

export const InventoryChange = Type.Object({
  changeId: Type.Unsafe<bigint>({ ...Int64, description: 'The change\'s id: unique, but on PostgreSQL not increasing in feed order; page with `cursor`' }),
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'The pet whose stock changed' }),
  previousQuantity: Type.Union([Type.Integer(), Type.Null()], { description: 'The quantity before; null when the change created the entry (an import)' }),
  quantity: Type.Integer({ description: 'The quantity after' }),
  reason: Type.Enum([...STOCK_REASONS, 'import'], { type: 'string', description: `Why, as recorded; \`import\` for the operator's imports. ${REASON_MEANINGS}` }),
  note: Type.Union([Type.String(), Type.Null()], { description: 'The note sent with the change' }),
  reference: Type.Union([Type.String(), Type.Null()], { description: 'The reference sent with the change (an order, an invoice, a count sheet); null when none was sent' }),
  at: Type.String({ format: 'date-time', description: 'When the change was asked for (a change that waited for a lock may carry an earlier time than the one before it)' }),
  batchId: Type.Union([Type.String(), Type.Null()], { description: 'Shared by the changes of one batch; null for a change made alone' }),
  status: Type.Union([PetStatus, Type.Null()], {
    description: 'The pet\'s status after the change, when the change set it: an import that changed the status (then ' +
      '`quantity` may equal `previousQuantity`) or created the entry. Null when the status stayed as it was (every change ' +
      'made through the API)'
  }),
  previousStatus: Type.Union([PetStatus, Type.Null()], { description: 'The status before, when the change changed an existing entry\'s status; else null' }),
  requestId: Type.Union([Type.String(), Type.Null()], { description: 'The X-Request-Id of the request that made it, for changes made with your own key; null for others\'' }),
  cursor: Type.String({ description: 'Where the feed resumes after this change: store it, and send it as `after`' })
}, { additionalProperties: false, description: 'One stock change' })

const IdName = (what: string) => Type.Object({
  id: Int64,
  name: Name()
}, { additionalProperties: false, description: what })

export const Pet = Type.Object({
  id: Int64,
  name: Name({ examples: ['doggie'] }),
  status: PetStatus,
  category: Type.Optional(IdName('The category of the pet')),
  tags: Type.Optional(Type.Array(IdName('A tag'))),
  photoUrls: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH, pattern: SAFE_TEXT_PATTERN })))
}, { additionalProperties: false, description: 'A pet (classic Petstore fields)' })

/** A reorder point: the quantity at or below which a pet's stock is low (docs/adr/0036-low-stock-once-per-crossing.md). */
export const ReorderPointValue = Type.Integer({
  minimum: 0,
  maximum: MAX_QUANTITY,
  description: `The stock count at or below which the pet is low, 0 to ${MAX_QUANTITY_TEXT}`,
  examples: [3]
})

/** The body of PUT /v1/inventory/{petId}/reorder-point. */
export const ReorderPointUpdate = Type.Object({
  reorderPoint: ReorderPointValue
}, { additionalProperties: false, description: 'Sets the reorder point of one pet' })

/** A pet's reorder point as the API answers it. */
export const ReorderPoint = Type.Object({
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'The pet' }),
  reorderPoint: ReorderPointValue,
  low: Type.Boolean({
    description: 'Whether the pet\'s stock is at or below its point since it last crossed it: true from the crossing (when the ' +
      '`inventory.low_stock` event is recorded) until the quantity rises above the point again'
  })
}, { additionalProperties: false, description: 'The reorder point of one pet' })

/** A pet as `petstore import` reads it: the pet and, optionally, its stock quantity and reorder point. */
export const PetRecord = Type.Object({
  ...Pet.properties,
  quantity: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_QUANTITY, description: 'The stock quantity' })),
  reorderPoint: Type.Optional(Type.Integer({ ...ReorderPointValue, description: 'The reorder point (absent: the pet\'s point is left as it is)' }))
}, { additionalProperties: false })

export const Order = Type.Object({
  id: Int64,
  petId: Int64,
  quantity: Type.Integer({ minimum: 1, maximum: MAX_ORDER_QUANTITY }),
  shipDate: Type.String({ format: 'date-time', maxLength: 64 }),
  status: OrderStatus,
  complete: Type.Boolean()
}, { additionalProperties: false, description: 'A store order' })

/** The states of an order placed through the API: the classic statuses, and cancelled. */
export const OrderState = Type.Enum(ORDER_STATES, {
  type: 'string',
  description: 'The order\'s state: `placed` (its units are held), `approved`, `delivered` (sold: the units left the stock), ' +
    'or `cancelled` (the hold released; the classic listing leaves cancelled orders out)'
})

/** What the caller names an order by: bounded and printable, as a stock change's reference. */
const OrderReference = Type.String({
  minLength: 1,
  maxLength: MAX_REFERENCE_LENGTH,
  pattern: SAFE_TEXT_PATTERN,
  description: `What the order is in your own terms (your shop's order number): kept with the order, and recorded with its hold's ` +
    `events and its sale in the stock ledger (1 to ${MAX_REFERENCE_LENGTH} characters; ${SAFE_TEXT_RULE})`,
  examples: ['web-10482']
})

/** The body of POST /v1/store/orders. */
export const OrderPlacement = Type.Object({
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'The pet ordered; it must have a stock entry' }),
  quantity: Type.Integer({ minimum: 1, maximum: MAX_QUANTITY, description: `Units ordered, 1 to ${MAX_QUANTITY_TEXT}; held until the order is delivered or cancelled` }),
  shipDate: Type.Optional(Type.String({ format: 'date-time', maxLength: 64, description: 'When the order ships (RFC 3339); the instant it is placed when not given' })),
  reference: Type.Optional(OrderReference)
}, { additionalProperties: false })
export type OrderPlacement = Static<typeof OrderPlacement>

/**
 * An order as GET /v1/store/orders/{orderId} and the order writes show it: the classic Order's fields (status among
 * the four states) and what the API adds. The classic listing keeps the classic Order above.
 */
export const OrderDetail = Type.Object({
  ...Order.properties,
  status: OrderState,
  source: Type.Enum(['api', 'import'], { type: 'string', description: '`api`: placed through POST /v1/store/orders; `import`: written by `petstore import` (never moved by the API)' }),
  reference: Type.Union([OrderReference, Type.Null()], { description: 'What the caller named the order by; null when none was sent (and for imported orders)' }),
  holdId: Type.Union([Type.String({ pattern: HOLD_ID_PATTERN }), Type.Null()], {
    description: 'The hold that keeps the order\'s units (it cannot be moved through /v1/holds: 409 `hold_of_order`); null for imported orders'
  }),
  createdAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the order was placed; null for imported orders' }),
  updatedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the order last moved; null for imported orders' })
}, { additionalProperties: false, description: 'A store order, with its state and what the API adds' })

/** The event of a stock change, as webhooks and the change stream name it. */
export const INVENTORY_CHANGED = STOCK_CHANGED

/** The body of an `inventory.changed` webhook delivery: the change exactly as the feed shows it. */
export const InventoryChangedEvent = Type.Object({
  type: Type.Literal(INVENTORY_CHANGED, { description: 'The event type' }),
  timestamp: Type.String({ format: 'date-time', description: 'When the change was made (the change\'s `at`)' }),
  data: InventoryChange
}, { additionalProperties: false, description: 'A stock change, as GET /v1/inventory/changes shows it' })

/** What each hold event means, in the words the schema descriptions use. */
export const HOLD_EVENT_MEANINGS: Record<HoldEvent, string> = {
  'hold.placed': 'a hold was placed (or an order placed with it): its units of the pet are held from now on',
  'hold.confirmed': 'a hold was confirmed (or its order delivered): its units were sold and left the stock (an `inventory.changed` ' +
    'with reason `sale` came just before)',
  'hold.released': 'a hold was released (or its order cancelled): its units are available again',
  'hold.expired': 'a hold expired: its units stopped counting at its expiry (the event is recorded by a sweeper, shortly after)'
}

/** The cursor and change id every entry of the feed carries, events too. */
const placeFields = {
  changeId: Type.Unsafe<bigint>({ ...Int64, description: 'The entry\'s id: unique, but on PostgreSQL not increasing in feed order; page with `cursor`' }),
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'The pet whose availability changed' })
}
const cursorField = { cursor: Type.String({ description: 'Where the feed resumes after this entry: store it, and send it as `after`' }) }

/**
 * One pet's part of a hold event, as the feed, the stream and webhooks show it: what is on hand, held and available of
 * the pet right after the event, so that a follower can mirror what can be sold.
 */
export const HoldEventData = Type.Object({
  ...placeFields,
  holdId: Type.String({ description: 'The hold (`hold_...`)' }),
  reference: Type.Union([Type.String(), Type.Null()], { description: 'The hold\'s reference (a cart, a checkout, an order); null when none was sent' }),
  quantity: Type.Integer({ description: 'The pet\'s on-hand quantity as it stands after the event' }),
  held: Type.Integer({ minimum: 0, description: 'The pet\'s units held by every hold that counts, after the event' }),
  available: Type.Integer({ minimum: 0, description: 'What can be sold of the pet after the event: max(0, quantity - held)' }),
  at: Type.String({ format: 'date-time', description: 'When it happened (for hold.expired: when the sweeper recorded it, at or after the hold\'s expiry)' }),
  ...cursorField
}, { additionalProperties: false, description: 'A hold\'s change of one pet\'s availability (one event per pet of the hold)' })

/** A crossing of a pet's reorder point, as the feed, the stream and webhooks show it. */
export const LowStockData = Type.Object({
  ...placeFields,
  quantity: Type.Integer({ description: 'The pet\'s on-hand quantity after the change that crossed the point' }),
  reorderPoint: Type.Integer({ minimum: 0, description: 'The pet\'s reorder point: the quantity is at or below it' }),
  at: Type.String({ format: 'date-time', description: 'When the change that crossed it was made' }),
  ...cursorField
}, { additionalProperties: false, description: 'A pet\'s on-hand quantity fell to or below its reorder point (once per crossing: again only after it rose above)' })

const typeField = (types: readonly string[], what: string) => ({
  type: types.length === 1
    ? Type.Literal(types[0] as string, { description: `The entry's type: ${what}` })
    : Type.Enum(types, { type: 'string', description: `The entry's type: ${what}` })
})

/** A stock change as the feed shows it when `types` is given: with its type. */
export const TypedInventoryChange = Type.Object({ ...typeField([INVENTORY_CHANGED], 'a stock change'), ...InventoryChange.properties },
  { additionalProperties: false, description: 'One stock change (with `types`)' })
/** A hold event as the feed shows it (`types` names it). */
export const HoldEventEntry = Type.Object({ ...typeField(HOLD_EVENTS, 'a hold placed, confirmed, released or expired'), ...HoldEventData.properties },
  { additionalProperties: false, description: 'One hold event of one pet (with `types`)' })
/** A low-stock crossing as the feed shows it (`types` names it). */
export const LowStockEntry = Type.Object({ ...typeField([LOW_STOCK], 'a reorder point crossed'), ...LowStockData.properties },
  { additionalProperties: false, description: 'One low-stock crossing (with `types`)' })

/**
 * An entry of the change feed: a stock change as it always was, or, when the request names `types`, an entry of one of
 * them with its `type`.
 */
export const FeedEntry = Type.Union([InventoryChange, TypedInventoryChange, HoldEventEntry, LowStockEntry], {
  description: 'Without `types`: a stock change, exactly as before `types` existed (no `type` field). With `types`: every ' +
    'entry carries `type` (`inventory.changed`, a hold event, `inventory.low_stock`) and that type\'s fields'
})

/** The body of a webhook delivery of a hold event or a low-stock crossing: the entry's data, as the feed shows it, in an envelope. */
export function EventEnvelope (type: string, data: typeof HoldEventData | typeof LowStockData, what: string) {
  return Type.Object({
    type: Type.Literal(type, { description: 'The event type' }),
    timestamp: Type.String({ format: 'date-time', description: 'When it happened (the data\'s `at`)' }),
    data
  }, { additionalProperties: false, description: what })
}
