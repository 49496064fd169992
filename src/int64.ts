/** int64 identifiers travel as bigint inside the service; JavaScript numbers lose integers above 2^53. */
export const INT64_MIN = -(2n ** 63n)
export const INT64_MAX = 2n ** 63n - 1n

const DECIMAL_INTEGER = /^-?(0|[1-9][0-9]{0,18})$/

/** Parses the canonical decimal text of an int64 (no sign '+', no leading zeros); null when it is not one. */
export function parseInt64 (text: string): bigint | null {
  if (!DECIMAL_INTEGER.test(text)) return null
  const value = BigInt(text)
  return value >= INT64_MIN && value <= INT64_MAX ? value : null
}

export function isInt64 (value: bigint): boolean {
  return value >= INT64_MIN && value <= INT64_MAX
}
