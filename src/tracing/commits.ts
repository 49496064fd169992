/**
 * The span of each SQLite group commit, in traced processes only: the server gives this observer to the SQLite store
 * it opens (src/store/sqlite/group-commit.ts, and src/store/sqlite/writer.ts for a serving store's writer thread), so
 * the store's own code makes no span. A commit's span holds the transaction's statements; it is a child of the store
 * call that asked first and links to the others it serves.
 */
import type { Context } from '@opentelemetry/api'
import type { CommitObserver } from '../store/sqlite/group-commit.js'
import { activeContext, endSpan, linkTo, SpanKind, startSpan } from './spans.js'

export const commitSpans: CommitObserver = {
  // Where the write was asked for: the commit's span links to it.
  queued: () => activeContext(),
  committing: (writes) => {
    const links = writes.slice(1).map((context) => linkTo(context as Context | undefined)).filter((link) => link !== null)
    // Under the first write, whoever scheduled the commit (on the writer thread, a call that does not join it may have).
    const span = startSpan('sqlite commit', SpanKind.CLIENT, { 'db.system.name': 'sqlite', 'petstore.sqlite.writes': writes.length }, links,
      writes[0] as Context | undefined)
    return span === null ? null : (error) => { endSpan(span, error) }
  }
}
