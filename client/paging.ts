/**
 * Paging by `Link` headers (RFC 8288): the one place the client reads links. A page's `rel="next"` link is resolved
 * against the URL that was requested and followed as given: its cursor is opaque, and the link keeps the query.
 */
import type { Answer } from './transport.js'
import type { ChangePage, Hold, HoldPage, InventoryChange, InventoryItem, InventoryPage, Order, OrderPage } from './types.js'

/** The targets of a `Link` header with the given relation (RFC 8288), resolved against the request URL. */
export function linkTarget (header: string | null, rel: string, base: string): string | null {
  for (const link of header?.split(/,(?=\s*<)/) ?? []) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(link)
    if (match === null) continue
    const rels = /;\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))/i.exec(match[2] ?? '')
    const values = (rels?.[1] ?? rels?.[2] ?? '').toLowerCase().split(/\s+/)
    if (values.includes(rel)) return new URL(match[1] ?? '', base).href
  }
  return null
}

/** The answer's `rel="next"` link, absolute; null on the last page. */
function nextLink ({ meta, url }: Answer): string | null {
  return linkTarget(meta.headers.get('link'), 'next', url)
}

/** The value of `param` in a next link (the cursor to ask for the next page with); null without a link. */
const cursorOf = (nextUrl: string | null, param: string): string | null => nextUrl === null ? null : new URL(nextUrl).searchParams.get(param)

export function inventoryPage (answer: Answer): InventoryPage {
  const nextUrl = nextLink(answer)
  return {
    ...answer.meta,
    data: answer.body as InventoryItem[],
    nextUrl,
    nextCursor: cursorOf(nextUrl, 'cursor'),
    changesCursor: answer.meta.headers.get('changes-cursor')
  }
}

export function orderPage (answer: Answer): OrderPage {
  const nextUrl = nextLink(answer)
  return { ...answer.meta, data: answer.body as Order[], nextUrl, nextCursor: cursorOf(nextUrl, 'cursor') }
}

export function holdPage (answer: Answer): HoldPage {
  const nextUrl = nextLink(answer)
  return { ...answer.meta, data: answer.body as Hold[], nextUrl, nextCursor: cursorOf(nextUrl, 'cursor') }
}

export function changePage (answer: Answer): ChangePage {
  return { ...answer.meta, data: answer.body as InventoryChange[], nextCursor: cursorOf(nextLink(answer), 'after') }
}

/**
 * Every item of the pages from `first` on, page after page, until a page has no next link; with `untilEmpty`, an empty
 * page ends it too (the change feed's last page links to where the next changes will be).
 */
export async function * followNext<T> (first: string, load: (url: string) => Promise<Answer>, untilEmpty = false): AsyncGenerator<T, void, undefined> {
  let next: string | null = first
  while (next !== null) {
    const answer: Answer = await load(next)
    const items = answer.body as T[]
    yield * items
    if (untilEmpty && items.length === 0) return
    next = nextLink(answer)
  }
}
