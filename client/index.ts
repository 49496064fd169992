/**
 * A small typed client for the Petstore Inventory Service: the package `@petstore/inventory-client` (client/package.json,
 * no runtime dependencies), also importable as `petstore-inventory/client` from the service's own package.
 *
 * Types come from the service's OpenAPI document (client/schema.ts, generated); int64 values are bigint,
 * parsed losslessly from the JSON (client/int64.ts, generated, says where they are). Retries follow the API's
 * client rules: on 429 `rate_limited` wait exactly `Retry-After`; on 502/503/504 and network errors back off
 * exponentially with full jitter; give up after `maxAttempts` tries; never retry `key_banned` or another 4xx.
 * Every write carries an `Idempotency-Key`, made once per call and sent again with each of its retries, so a retried
 * write never applies twice (a write whose first try is still running is retried after 409 `idempotency_key_in_flight`).
 *
 * The parts, by what they do: ./transport.ts sends a call by those rules; ./inventory.ts, ./changes.ts, ./stream.ts,
 * ./pets.ts, ./orders.ts, ./holds.ts and ./rate-limit.ts are the operations, as the service's routes are (./selling.ts
 * what the hold and order writes share); ./paging.ts follows
 * `Link` headers; ./int64-values.ts keeps ids exact; ./errors.ts and ./types.ts are what a caller sees.
 */
import { changeOperations } from './changes.js'
import { holdOperations } from './holds.js'
import { inventoryOperations } from './inventory.js'
import { orderOperations } from './orders.js'
import { petOperations } from './pets.js'
import { rateLimitOperations } from './rate-limit.js'
import { changeStream } from './stream.js'
import { createTransport } from './transport.js'
import type { ClientOptions, PetstoreClient } from './types.js'

export { InsufficientScopeError, InsufficientStockError, PetstoreError, type ApiErrorCode, type ClientErrorCode } from './errors.js'
export type {
  BatchEntry, BatchFailure, BatchResult, ChangeEntry, ChangePage, ClientOptions, Conditional, DeprecationInfo, Hold, HoldPage, HoldPlacement,
  HoldQuery, Int64Input, InventoryAdjustment, InventoryReadOptions, InventoryBatch, InventoryChange, InventoryItem, InventoryListing, InventoryPage,
  InventoryPageQuery, InventoryUpdate, Order, OrderDetails, OrderPage, OrderPlacement, OrderQuery, Pet, PetstoreClient, RateLimit, RateLimitedEvent,
  RateLimitStatus, ResponseMeta, SellingOptions, SellingResult, Shortage, StockReason, StreamOptions, WriteOptions, WriteResult
} from './types.js'

/**
 * Creates a client. Nothing is sent until a method is called. The client remembers a `key_banned` answer
 * until its `Retry-After` has passed: meanwhile every call fails at once with that error, without a request.
 */
export function createClient (options: ClientOptions): PetstoreClient {
  const transport = createTransport(options)
  return {
    ...inventoryOperations(transport),
    ...changeOperations(transport),
    streamChanges: changeStream(transport),
    ...petOperations(transport),
    ...orderOperations(transport),
    ...holdOperations(transport),
    ...rateLimitOperations(transport)
  }
}
