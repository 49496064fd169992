/**
 * A bench-only probe of the SQLite write path, preloaded into a server process (never part of the service):
 *
 *   SQLITE_PROBE_OUT=/tmp/probe node --import ./bench/sqlite-probe.js bin/petstore.js serve
 *
 * It patches better-sqlite3's prototypes in that process only, so the service's code is the same with and without it
 * and costs nothing when it is not loaded. Per thread it writes `<SQLITE_PROBE_OUT>.<threadId>.json` when the
 * process exits (and every second before, so that a killed process leaves what it had):
 *
 * - `commits`: each group commit (an outermost transaction): its start, the time of its BEGIN IMMEDIATE and body
 *   (`bodyMs`), of its COMMIT (`commitMs`: the WAL write and its fsync, and SQLite's auto-checkpoint when it runs
 *   inside it), its batch (the PATCHes in it: runs of the stock UPDATE) and the WAL's frame count after it;
 * - `checkpoints`: every `PRAGMA wal_checkpoint` run on this thread, timed, with its result (log, checkpointed);
 *   on a connection that checkpoints by itself (wal_autocheckpoint > 0), the probe turns that off and runs the same
 *   PASSIVE checkpoint at the same point SQLite would (right after the COMMIT that took the WAL to the threshold,
 *   on the same thread), so the checkpoint is timed apart from the COMMIT;
 * - `gc`: GC pauses (PerformanceObserver 'gc'), main thread only;
 * - `stalls`: event-loop gaps of 5 ms or more seen by a 1 ms interval (their end and length), and the
 *   monitorEventLoopDelay histogram (`eventLoopDelay`, resolution 1 ms), main thread only; SIGUSR2 starts the
 *   measured window (`window`: the histogram starts again) and a second SIGUSR2 ends it (the histogram is kept).
 *
 * Times are performance.timeOrigin-relative milliseconds turned into epoch milliseconds, so threads compare.
 */
import { openSync, readSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { isMainThread, threadId } from 'node:worker_threads'
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks'
import { setInterval } from 'node:timers'
import { Buffer } from 'node:buffer'
import { URL } from 'node:url'

const out = process.env.SQLITE_PROBE_OUT
if (out !== undefined && out !== '') install(out)

function install (out) {
  const require = createRequire(new URL('../package.json', import.meta.url))
  const Database = require('better-sqlite3')
  const Statement = Object.getPrototypeOf(new Database(':memory:').prepare('SELECT 1'))
  const now = () => performance.timeOrigin + performance.now()
  const data = { thread: threadId, main: isMainThread, origin: performance.timeOrigin, clock: { epochMs: now(), monotonicUs: Number(process.hrtime.bigint() / 1000n) }, commits: [], checkpoints: [], gc: [], stalls: [], eventLoopDelay: null }

  /** The serving connection's -shm file, to read the WAL's frame count (the wal-index header's mxFrame). */
  const shm = new WeakMap()
  const walFrames = (db) => {
    let fd = shm.get(db)
    if (fd === undefined) {
      try { fd = openSync(`${db.name}-shm`, 'r') } catch { fd = null }
      shm.set(db, fd)
    }
    if (fd === null) return null
    const b = Buffer.alloc(4)
    return readSync(fd, b, 0, 4, 16) === 4 ? b.readUInt32LE(0) : null
  }
  /** A wal_checkpoint row (bigint on a safeIntegers connection) as numbers. */
  const counts = (row) => row === undefined ? {} : { busy: Number(row.busy), log: Number(row.log), checkpointed: Number(row.checkpointed) }
  /** Connections whose auto-checkpoint the probe took over: the threshold. */
  const emulated = new WeakMap()

  const pragma = Database.prototype.pragma
  Database.prototype.pragma = function (source, options) {
    const checkpoint = /^\s*wal_checkpoint/i.test(source)
    const start = now()
    const result = pragma.call(this, source, options)
    // The application turns the auto-checkpoint off itself (a checkpointer elsewhere): nothing to take over.
    if (/^\s*wal_autocheckpoint\s*=\s*0/i.test(source)) emulated.delete(this)
    if (checkpoint) {
      const end = now()
      const row = Array.isArray(result) ? result[0] : undefined
      data.checkpoints.push({ start, ms: end - start, mode: source, emulated: false, ...counts(row) })
    }
    // The store sets synchronous last-but-two as it opens: its connection, whose auto-checkpoint is taken over.
    if (/^\s*synchronous\s*=\s*FULL/i.test(source) && this.name !== ':memory:') {
      const threshold = Number(pragma.call(this, 'wal_autocheckpoint', { simple: true }))
      if (threshold > 0) {
        pragma.call(this, 'wal_autocheckpoint = 0')
        emulated.set(this, threshold)
      }
    }
    return result
  }

  // Per outermost transaction: BEGIN, body, COMMIT.
  const running = new WeakMap()
  const run = Statement.run
  Statement.run = function (...args) {
    const source = this.source
    if (source.startsWith('BEGIN')) {
      const start = now()
      const result = run.apply(this, args)
      running.set(this.database, { start, updates: 0 })
      return result
    }
    if (source === 'COMMIT') {
      const tx = running.get(this.database)
      const start = now()
      const result = run.apply(this, args)
      const end = now()
      if (tx !== undefined) {
        running.delete(this.database)
        const frames = walFrames(this.database)
        data.commits.push({ start: tx.start, bodyMs: start - tx.start, commitMs: end - start, batch: tx.updates, walFrames: frames })
        const threshold = emulated.get(this.database)
        if (threshold !== undefined && frames !== null && frames >= threshold) {
          const rows = pragma.call(this.database, 'wal_checkpoint(PASSIVE)')
          const done = now()
          data.checkpoints.push({ start: end, ms: done - end, mode: 'auto (PASSIVE)', emulated: true, ...counts(rows[0]) })
        }
      }
      return result
    }
    if (source.startsWith('UPDATE inventory SET quantity')) {
      const tx = running.get(this.database)
      if (tx !== undefined) tx.updates++
    }
    return run.apply(this, args)
  }

  let histogram = null
  if (isMainThread) {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) data.gc.push({ start: performance.timeOrigin + entry.startTime, ms: entry.duration, kind: entry.detail?.kind, flags: entry.detail?.flags })
    }).observe({ entryTypes: ['gc'] })
    histogram = monitorEventLoopDelay({ resolution: 1 })
    histogram.enable()
    let last = now()
    setInterval(() => {
      const t = now()
      if (t - last >= 5) data.stalls.push({ end: t, ms: t - last })
      last = t
    }, 1).unref()
  }

  const file = `${out}.${threadId}.json`
  const snapshot = () => {
    if (histogram === null) return
    const ms = (ns) => ns / 1e6
    data.eventLoopDelay = {
      count: histogram.count,
      p50: ms(histogram.percentile(50)),
      p99: ms(histogram.percentile(99)),
      p999: ms(histogram.percentile(99.9)),
      max: ms(histogram.max),
      mean: ms(histogram.mean)
    }
  }
  // SIGUSR2 marks the measured window: the first starts it (the histogram starts again), the second ends it.
  if (isMainThread) {
    process.on('SIGUSR2', () => {
      if (data.window === undefined) {
        histogram?.reset()
        data.window = { start: now(), end: null }
      } else if (data.window.end === null) {
        snapshot()
        data.window.end = now()
      }
    })
  }
  const flush = () => {
    if (data.window?.end == null) snapshot()
    writeFileSync(file, JSON.stringify(data))
  }
  // The main thread writes only as the process exits: a write of the whole record while it serves would be a stall
  // of its own. Other threads (a checkpointer) write every second too, off the serving thread.
  if (!isMainThread) setInterval(flush, 1000).unref()
  process.on('exit', flush)
}
