/** RFC 3339 date-time with a mandatory offset, e.g. 2027-12-31T23:59:59Z or 2026-06-01T12:00:00.5+02:00. */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$/

/**
 * True for a real RFC 3339 date-time. Date.parse alone accepts other shapes, rolls 2026-02-30 over into
 * March and takes 24:00:00; RFC 3339 allows none of these.
 */
export function isRfc3339DateTime (text: string): boolean {
  const m = RFC3339.exec(text)
  if (m === null) return false
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const lastDay = new Date(Date.UTC(year, month, 0)).getUTCDate()
  const offsetOk = m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59)
  return month >= 1 && month <= 12 && day >= 1 && day <= lastDay && hour <= 23 && minute <= 59 && second <= 59 && offsetOk
}
