/**
 * Preloaded into a service instance by the `costs-pg-2x` scenario (`node --import bench/pg-count.js bin/petstore.js
 * serve`): counts the statements the instance sends to PostgreSQL, client side, because pg_stat_statements is not
 * in shared_preload_libraries on every server. Every Client#query call is one statement (the pool's query goes
 * through it); BEGIN/START opens a transaction and COMMIT/ROLLBACK/END closes it, and a statement outside one is a
 * transaction of its own (autocommit). Statements are also counted by their first 60 characters (whitespace
 * collapsed), which names them well enough to tell them apart.
 *
 * On SIGUSR2 it writes { seq, statements, transactions, byStatement } to BENCH_PG_COUNT_FILE (through a rename, so
 * a reader never sees half a file); seq counts the writes, so the harness knows the file answers its signal. The
 * cost on the request path is a counter increment and a map lookup per statement.
 */
import { renameSync, writeFileSync } from 'node:fs'
import pg from 'pg'

const file = process.env.BENCH_PG_COUNT_FILE
if (file !== undefined && file !== '') {
  const counts = { seq: 0, statements: 0, transactions: 0, byStatement: {} }
  const inTransaction = Symbol('benchInTransaction')
  const query = pg.Client.prototype.query
  pg.Client.prototype.query = function (config, ...rest) {
    const text = typeof config === 'string' ? config : config?.text
    if (typeof text === 'string') {
      const label = text.replace(/\s+/g, ' ').trim().slice(0, 60)
      const head = label.split(' ', 1)[0].toUpperCase()
      counts.statements++
      if (head === 'BEGIN' || head === 'START') {
        this[inTransaction] = true
        counts.transactions++
      } else if (head === 'COMMIT' || head === 'ROLLBACK' || head === 'END') {
        this[inTransaction] = false
      } else if (this[inTransaction] !== true) {
        counts.transactions++
      }
      counts.byStatement[label] = (counts.byStatement[label] ?? 0) + 1
    }
    return query.call(this, config, ...rest)
  }
  process.on('SIGUSR2', () => {
    counts.seq++
    writeFileSync(`${file}.tmp`, JSON.stringify(counts))
    renameSync(`${file}.tmp`, file)
  })
}
