/**
 * The records the service deals in, and the range of their quantities, at the bottom of the code: the store returns
 * them, the domain rules on them, the API, the CLI and the error catalogue show them. int64 identifiers are bigint;
 * counts that fit a double are numbers. The rules on them (text bounds, scopes, plan limits) are the domain's:
 * src/domain/rules.ts.
 */

export const PET_STATUSES = ['available', 'pending', 'sold'] as const
export type PetStatus = typeof PET_STATUSES[number]

/** The classic Petstore's order statuses: what the order listing shows and an import writes. */
export const ORDER_STATUSES = ['placed', 'approved', 'delivered'] as const
export type OrderStatus = typeof ORDER_STATUSES[number]
/**
 * The states of an order placed through the API: the classic ones, and `cancelled` (the classic Petstore deleted a
 * cancelled order; ours keeps it, out of the classic listing). placed -> approved -> delivered; placed or approved ->
 * cancelled.
 */
export const ORDER_STATES = [...ORDER_STATUSES, 'cancelled'] as const
export type OrderState = typeof ORDER_STATES[number]

/**
 * The states of a hold: `active` until it is confirmed (its units sold), released, or expired. A hold whose expiry has
 * passed counts as expired from that instant, whatever its stored state (a sweeper records it later).
 */
export const HOLD_STATES = ['active', 'confirmed', 'released', 'expired'] as const
export type HoldState = typeof HOLD_STATES[number]

export const PLANS = ['free', 'pro', 'business', 'enterprise'] as const
export type Plan = typeof PLANS[number]

/** The deployments a service runs as (PETSTORE_ENV); each issues keys of its own. */
export const ENVIRONMENTS = ['production', 'staging'] as const
export type Environment = typeof ENVIRONMENTS[number]

/** Key prefixes tell production keys from staging keys at a glance (and to secret scanners). */
export const KEY_PREFIXES: Record<Environment, string> = { production: 'psk_live_', staging: 'psk_test_' }

/** Stock quantities are bounded like Shopify's: 0 to one billion inclusive. */
export const MAX_QUANTITY = 1_000_000_000
/**
 * MAX_QUANTITY as messages and descriptions write it: 1,000,000,000. Grouped by hand: Intl.NumberFormat would load
 * ICU's locale data, about 25 ms, at the start of every process and command.
 */
export const MAX_QUANTITY_TEXT = String(MAX_QUANTITY).replace(/\B(?=(?:\d{3})+$)/g, ',')

/** Order quantities are int32 in the classic Petstore. */
export const MAX_ORDER_QUANTITY = 2_147_483_647

export interface InventoryItem {
  petId: bigint
  quantity: number
  status: PetStatus
}

/**
 * Why a stock quantity was set through the API: the spec's new arrivals, returns and manual adjustments, and a shop's
 * sales, losses (death, escape, damage) and recounts (a stock count's correction). docs/adr/0034-reasons-of-a-shop.md
 */
export const STOCK_REASONS = ['arrival', 'return', 'adjustment', 'sale', 'loss', 'recount'] as const
export type StockReason = typeof STOCK_REASONS[number]

/** Reasons in the stock ledger: the API's, plus `import` for quantities set by `petstore import`. */
export type LedgerReason = StockReason | 'import'

/** A stock entry with its revision: a counter that grows with every change to what the entry shows. */
export interface StockEntry extends InventoryItem {
  revision: bigint
}

/** The type of a stock change wherever the service names events (the change feed, the stream, webhooks). */
export const STOCK_CHANGED = 'inventory.changed'
/** The events of a hold: placed, and how it ended (docs/adr/0040-availability-events-opt-in.md: served only when asked for). */
export const HOLD_EVENTS = ['hold.placed', 'hold.confirmed', 'hold.released', 'hold.expired'] as const
export type HoldEvent = typeof HOLD_EVENTS[number]
/** A pet's on-hand quantity fell to or below its reorder point (once per crossing). */
export const LOW_STOCK = 'inventory.low_stock'
/** The events the stock ledger records beside stock changes: what changes availability without changing a count. */
export const LEDGER_EVENTS = [...HOLD_EVENTS, LOW_STOCK] as const
export type LedgerEvent = typeof LEDGER_EVENTS[number]
/** Every type of the change feed, stock changes first: what `types` and a webhook subscription's `events` name. */
export const CHANGE_TYPES = [STOCK_CHANGED, ...LEDGER_EVENTS] as const
export type ChangeType = typeof CHANGE_TYPES[number]

/** What every row of the stock ledger has. */
interface LedgerRecord {
  /** Increases with every row: the order in which they were committed. */
  id: bigint
  petId: bigint
  /** The quantity after a stock change; for an event, the pet's on-hand quantity as it stood. */
  quantity: number
  /** What the row was for, as the caller named it (an order, an invoice, a count sheet, a hold's); null when none was sent. */
  reference: string | null
  /** The API key that made the change (its public id); null for the operator CLI and the sweeper. */
  keyId: string | null
  /** The X-Request-Id of the API request that made the change; null for the operator CLI and the sweeper. */
  requestId: string | null
  at: Date
}

/** One recorded stock change: a quantity set, adjusted, imported or sold. */
export interface StockChangeEntry extends LedgerRecord {
  /** Null: a stock change, not an event (inventory.changed wherever events are named). */
  event: null
  /** The quantity before the change; null when the change created the stock entry (an import). */
  previousQuantity: number | null
  reason: LedgerReason
  note: string | null
  /** The batch the change was part of (all its changes share it); null for a change made alone. */
  batchId: string | null
  /**
   * The pet's status after the change, when the change set it (an import that changed the status, or created the
   * entry); null when the change left the status as it was (every API change).
   */
  status: PetStatus | null
  /** The status before, when the change changed an existing entry's status; else null. */
  previousStatus: PetStatus | null
  /** The hold whose confirmation sold the units (reason `sale`); null for every other change. */
  holdId: string | null
  held: null
  reorderPoint: null
}

/** What an event row has none of: the fields of a stock change. */
interface NoStockChange {
  previousQuantity: null
  reason: null
  note: null
  batchId: null
  status: null
  previousStatus: null
}

/** A hold placed, confirmed, released or expired, for one pet of it: what is held of the pet changed. */
export interface HoldEventEntry extends LedgerRecord, NoStockChange {
  event: HoldEvent
  holdId: string
  /** The units of the pet held (by every hold that counts) after the event. */
  held: number
  reorderPoint: null
}

/** A pet's on-hand quantity fell to or below its reorder point. */
export interface LowStockEntry extends LedgerRecord, NoStockChange {
  event: typeof LOW_STOCK
  holdId: null
  held: null
  /** The point crossed. */
  reorderPoint: number
}

/**
 * One row of the stock ledger: a stock change (event null), or an event of availability that changes no count and joins
 * no pet's chain of changes (src/store/selling/types.ts).
 */
export type LedgerEntry = StockChangeEntry | HoldEventEntry | LowStockEntry

export interface Category { id: bigint, name: string }
export interface Tag { id: bigint, name: string }

export interface Pet {
  id: bigint
  name: string
  status: PetStatus
  category?: Category
  tags?: Tag[]
  photoUrls?: string[]
}

export interface Order {
  id: bigint
  petId: bigint
  quantity: number
  /** RFC 3339 date-time. */
  shipDate: string
  status: OrderStatus
  complete: boolean
}

/** Units of one pet held by a hold. */
export interface HoldLine {
  petId: bigint
  quantity: number
}

/**
 * Units of pets held for a checkout or an order: counted against what is available from when it is placed until it
 * is confirmed (the units are sold: they leave the stock), released, or expires.
 */
export interface Hold {
  /** `hold_` and 20 random base64url characters. */
  id: string
  /** As stored: a hold still `active` here whose expiresAt has passed is expired (see holdStateAt). */
  state: HoldState
  /** One line per pet, ordered by petId; a pet appears once. */
  lines: HoldLine[]
  /** What the hold is for, as the caller named it (a cart, a checkout, an order); null when none was sent. */
  reference: string | null
  /** Whose quota placed it (its caps count there) and the key that did; null key for the operator CLI. */
  quotaId: string
  keyId: string | null
  createdAt: Date
  /** When it stops counting; null for the hold of an order (it lasts until the order is delivered or cancelled). */
  expiresAt: Date | null
  /** When it was confirmed, released or (as recorded) expired; null while active. */
  endedAt: Date | null
  /** The order it keeps the stock of; null for a checkout's hold. */
  orderId: bigint | null
}

/** An order placed through the API or imported: the classic Order, and what the API adds. */
export interface OrderRecord extends Omit<Order, 'status'> {
  status: OrderState
  /** import: written by `petstore import`; api: placed through POST /v1/store/orders (with a hold). */
  source: 'import' | 'api'
  reference: string | null
  /** The hold that keeps the order's stock (api orders); null for imported orders. */
  holdId: string | null
  /** null for imported orders. */
  createdAt: Date | null
  updatedAt: Date | null
}

/** A pet as imported: the record plus its optional stock entry. */
export interface PetImport extends Pet {
  /**
   * The pet's stock. Without it a new pet gets no inventory entry, and an existing entry is left as it is:
   * re-importing the catalogue never wipes stock that PATCH has changed since.
   */
  quantity?: number
  /**
   * The pet's reorder point (src/store/alerts/types.ts). Without it the pet's point is left as it is; with it, set in
   * the import's transaction, and a crossing it makes is recorded like one made through the API.
   */
  reorderPoint?: number
}

export interface ApiKeyRecord {
  /** Public identifier, safe to log and print (never the key itself). */
  id: string
  name: string | null
  plan: Plan
  /** Per-key limits; set for enterprise keys only. */
  perMinute: number | null
  perDay: number | null
  createdAt: Date
  revokedAt: Date | null
  /** The latest ban, if the key was ever banned; it is in force while `until` lies ahead. */
  ban: Ban | null
  /**
   * What the key may do: `read` calls read operations only; `storefront` also places and moves holds and orders, never a
   * stock write; `write` calls every operation (each scope includes the ones before it, KEY_SCOPES).
   */
  scope: KeyScope
  /** When the key stops working (null: never); rotation sets it on the key it replaces. */
  expiresAt: Date | null
  /**
   * Whose rate-limit windows, strikes and bans the key shares: its own id, or, for a key made by rotation, the
   * quota id of the key it replaced. Rotating never resets or doubles a quota.
   */
  quotaId: string
  /** The key that replaced this one by rotation, if any. */
  replacedBy: string | null
  /** When the key was last presented, as recorded (at most once a minute per instance; null: never). */
  lastUsedAt: Date | null
  /** When the key last called a deprecated operation, recorded the same way (null: never). */
  lastDeprecatedUseAt: Date | null
}

/**
 * The scopes of keys, least first: each includes those before it. A storefront key reads, and places, confirms and
 * releases holds and orders, but never sets or adjusts a count; a write key does everything.
 */
export const KEY_SCOPES = ['read', 'storefront', 'write'] as const
export type KeyScope = typeof KEY_SCOPES[number]

/** A temporary ban of a key that kept sending after 429. */
export interface Ban {
  since: Date
  until: Date
  /** The ban's length when imposed (kept after an early lift, for the doubling of repeat bans). */
  seconds: number
}
