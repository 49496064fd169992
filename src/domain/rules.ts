/** The rules on the records (src/model.ts): bounds of text, what a key's scope and expiry allow, plan limits. */
import { KEY_SCOPES, type ApiKeyRecord, type KeyScope, type Plan } from '../model.js'

/** The longest note a stock change may carry. */
export const MAX_NOTE_LENGTH = 500

/** The longest reference (an order, an invoice, a count sheet) a stock change may carry. */
export const MAX_REFERENCE_LENGTH = 128

/** The longest name of a pet, category, tag or key. */
export const MAX_NAME_LENGTH = 200

/** The longest photo URL of a pet. */
export const MAX_URL_LENGTH = 2048

/** True when a key of scope `held` may call an operation that needs `needed` (write includes read). */
export function scopeCovers (held: KeyScope, needed: KeyScope): boolean {
  return KEY_SCOPES.indexOf(held) >= KEY_SCOPES.indexOf(needed)
}

/** True when the key has expired at `now` (ms). */
export function isExpired (key: Pick<ApiKeyRecord, 'expiresAt'>, now: number): boolean {
  return key.expiresAt !== null && key.expiresAt.getTime() <= now
}

export interface Limits { perMinute: number, perDay: number }

export type PlanTable = Readonly<Record<Exclude<Plan, 'enterprise'>, Limits>>

/** The published plan table (the spec's Limits section), the default of configuration; enterprise limits are per key. */
export const PLAN_LIMITS: PlanTable = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 }
}

/** The limits a key is held to: its plan's, or its own for enterprise keys. */
export function limitsOf (key: Pick<ApiKeyRecord, 'plan' | 'perMinute' | 'perDay'>, plans: PlanTable): Limits | null {
  if (key.plan !== 'enterprise') return plans[key.plan]
  return key.perMinute === null || key.perDay === null ? null : { perMinute: key.perMinute, perDay: key.perDay }
}
