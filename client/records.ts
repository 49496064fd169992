/**
 * The records and bodies of the API, taken from the service's OpenAPI document (./schema.ts, generated): what the
 * calls send and return, and the rate-limit window an answer reports. The lowest layer of the client's types:
 * it imports only the document.
 */
import type { paths } from './schema.js'

export type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never
export type ResponsesOf<O> = O extends { responses: infer R } ? R : never
export type Operation<P extends keyof paths, M extends keyof paths[P]> = paths[P][M]

/** One stock entry; `petId` is an exact int64. */
export type InventoryItem = JsonOf<ResponsesOf<Operation<'/inventory', 'get'>>[200]>[number]
/** The body of updateInventory: the new absolute quantity and, optionally, why. */
export type InventoryUpdate = JsonOf<NonNullable<Operation<'/inventory/{petId}', 'patch'>['requestBody']>>
/** The body of adjustInventory: what to add to the quantity (negative to take away) and, optionally, why. */
export type InventoryAdjustment = JsonOf<NonNullable<Operation<'/inventory/{petId}/adjustments', 'post'>['requestBody']>>
/** Why a write changes the stock: arrival, return, adjustment (the default), sale, loss or recount. */
export type StockReason = NonNullable<InventoryUpdate['reason']>
/** The body of batchUpdateInventory: 1 to 100 changes, each a quantity to set or a delta to add for one pet. */
export type InventoryBatch = JsonOf<NonNullable<Operation<'/inventory/batch', 'post'>['requestBody']>>
/** One entry a batch left, with its new ETag. */
export type BatchEntry = JsonOf<ResponsesOf<Operation<'/inventory/batch', 'post'>>[200]>['entries'][number]
/** Why one change of a refused batch cannot apply (`PetstoreError.failures`). */
export type BatchFailure = NonNullable<JsonOf<ResponsesOf<Operation<'/inventory/batch', 'post'>>[409]>['failures']>[number]
/** An entry of the feed, of any form: a stock change as served without `types`, or a typed entry. */
type FeedEntry = JsonOf<ResponsesOf<Operation<'/inventory/changes', 'get'>>[200]>[number]
/** One stock change from the feed (as it serves them without `types`); `cursor` is where the feed resumes after it. */
export type InventoryChange = Exclude<FeedEntry, { type: string }>
/**
 * One entry of the feed asked for with `types`: a stock change or an event of availability (a hold's, a low-stock
 * crossing), told apart by `type`.
 */
export type ChangeEntry = Extract<FeedEntry, { type: string }>
/** A pet (deprecated operation); ids are exact int64. */
export type Pet = JsonOf<ResponsesOf<Operation<'/pets/{petId}', 'get'>>[200]>
/** A store order; `id` and `petId` are exact int64. */
export type Order = JsonOf<ResponsesOf<Operation<'/store/orders', 'get'>>[200]>[number]
/** Query of listOrders: page size, cursor from the previous page, status filter. */
export type OrderQuery = NonNullable<Operation<'/store/orders', 'get'>['parameters']['query']>
/** An order with its state (`placed`, `approved`, `delivered`, `cancelled`) and what the API adds; ids are exact int64. */
export type OrderDetails = JsonOf<ResponsesOf<Operation<'/store/orders/{orderId}', 'get'>>[200]>
/**
 * The body of placeOrder: one pet (any Int64Input), its units (held until the order is delivered or cancelled), a ship
 * date and a reference.
 */
export type OrderPlacement = WithPetId<JsonOf<NonNullable<Operation<'/store/orders', 'post'>['requestBody']>>>
/** A hold of units of one or more pets: its lines, state at the instant of the answer, expiry and reference. */
export type Hold = JsonOf<ResponsesOf<Operation<'/holds/{holdId}', 'get'>>[200]>
type HoldBody = JsonOf<NonNullable<Operation<'/holds', 'post'>['requestBody']>>
/** The body of placeHold: 1 to 100 lines (a pet once each, any Int64Input), an optional duration in seconds and reference. */
export type HoldPlacement = Omit<HoldBody, 'lines'> & { lines: Array<WithPetId<HoldBody['lines'][number]>> }
/** Query of listHolds: by pet (any Int64Input), reference or state (at the instant of the answer), page size and cursor. */
export type HoldQuery = Omit<NonNullable<Operation<'/holds', 'get'>['parameters']['query']>, 'petId'> & { petId?: Int64Input }
/** A line that asked for more units than there were (`PetstoreError.shortages` on 409 `insufficient_stock`). */
export type Shortage = NonNullable<JsonOf<ResponsesOf<Operation<'/holds', 'post'>>[409]>['shortages']>[number]

/** The calling key's standing: plan, scopes, both windows (`limit`, `remaining`, `reset`, `used`), ban and expiry. */
export type RateLimitStatus = JsonOf<ResponsesOf<Operation<'/rate_limit', 'get'>>[200]>

/** An id as the client accepts it: a bigint, a safe integer, or the canonical decimal text of an int64. */
export type Int64Input = bigint | number | string
/** A body whose `petId` the client takes as any Int64Input (it sends the exact int64). */
type WithPetId<B extends { petId: bigint }> = Omit<B, 'petId'> & { petId: Int64Input }

/** The rate-limit window that binds the key right now (`X-RateLimit-*`); `reset` is Unix time in seconds. */
export interface RateLimit {
  limit: number
  remaining: number
  reset: number
}
