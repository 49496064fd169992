/**
 * Preloaded into a service instance by the `costs-pg-2x` scenario (`node --import bench/pg-count.js bin/petstore.js
 * serve`): counts what the instance sends to PostgreSQL, client side, because pg_stat_statements is not in
 * shared_preload_libraries on every server. Every Client#query call is one query, a round trip (the pool's query goes
 * through it); its statements are counted from its answer, which holds one result per statement when the text held
 * several (the group commit's BEGIN, row locks, EXECUTEs and COMMIT: src/store/postgres/group-commit.ts).
 * BEGIN/START opens a transaction and COMMIT/ROLLBACK/END closes it, and a statement outside one is a transaction of
 * its own (autocommit). Queries are also counted by their first 60 characters (whitespace collapsed), which names
 * them well enough to tell them apart.
 *
 * On SIGUSR2 it writes { seq, queries, statements, transactions, byStatement } to BENCH_PG_COUNT_FILE (through a rename, so
 * a reader never sees half a file); seq counts the writes, so the harness knows the file answers its signal. The
 * cost on the request path is a counter increment and a map lookup per statement.
 */
import { renameSync, writeFileSync } from 'node:fs'
import pg from 'pg'

const file = process.env.BENCH_PG_COUNT_FILE
if (file !== undefined && file !== '') {
  const counts = { seq: 0, queries: 0, statements: 0, transactions: 0, byStatement: {} }
  const inTransaction = Symbol('benchInTransaction')
  /** Counts the statements a query ran, by their command tags, in order, on `client`. */
  const tally = (client, commands) => {
    for (const command of commands) {
      counts.statements++
      const head = String(command ?? '').toUpperCase()
      if (head === 'BEGIN' || head === 'START') {
        client[inTransaction] = true
        counts.transactions++
      } else if (head === 'COMMIT' || head === 'ROLLBACK' || head === 'END') {
        client[inTransaction] = false
      } else if (client[inTransaction] !== true) {
        counts.transactions++
      }
    }
  }
  const query = pg.Client.prototype.query
  pg.Client.prototype.query = function (config, ...rest) {
    const text = typeof config === 'string' ? config : config?.text
    if (typeof text !== 'string') return query.call(this, config, ...rest)
    const label = text.replace(/\s+/g, ' ').trim().slice(0, 60)
    const head = label.split(' ', 1)[0]
    counts.queries++
    counts.byStatement[label] = (counts.byStatement[label] ?? 0) + 1
    const answer = query.call(this, config, ...rest)
    if (typeof answer?.then !== 'function') {
      tally(this, [head])
      return answer
    }
    // Counted when answered: a simple query of several statements (the group commit's) answers one result per
    // statement, each with its command tag; a failed one counts as one statement (the rest did not run).
    return answer.then((result) => {
      tally(this, Array.isArray(result) ? result.map((r) => r.command) : [head])
      return result
    }, (error) => {
      tally(this, [head])
      throw error
    })
  }
  process.on('SIGUSR2', () => {
    counts.seq++
    writeFileSync(`${file}.tmp`, JSON.stringify(counts))
    renameSync(`${file}.tmp`, file)
  })
}
