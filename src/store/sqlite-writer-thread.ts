/**
 * The writer thread of a serving SQLite store (./sqlite/writer.ts): a store of its own on the same file, whose areas
 * run the writes the event loop sends. Each message's writes start as it arrives, so those that join the group commit
 * share its transaction and its fsync with any that arrived with them; a message's answers go back together once all
 * of them are settled.
 *
 * Its connection does not checkpoint in its commits (wal_autocheckpoint=0) when the serving connection has a
 * checkpointer thread, unless that failed (then 'checkpoint-in-commits').
 */
import { parentPort, workerData } from 'node:worker_threads'
import { SqliteStore } from './sqlite-store.js'
import { sendError, type FromWriter, type ToWriter, type WriteCall, type WriteReply, type WriterSettings } from './sqlite/writer.js'

const settings = workerData as WriterSettings
const store = new SqliteStore(settings.path, { busyTimeoutMs: settings.busyTimeoutMs, checkpointInCommits: settings.checkpointInCommits })
const areas = store as unknown as Record<string, Record<string, (...args: unknown[]) => Promise<unknown>>>

/** Starts one write: its promise, or the error it threw before it had one. */
function start ([area, method, args]: WriteCall): Promise<unknown> {
  try {
    const target = areas[area]
    const run = target?.[method]
    if (target === undefined || typeof run !== 'function') throw new Error(`the SQLite writer has no write ${area}.${method}`)
    return run.apply(target, args)
  } catch (error) {
    return Promise.reject(error)
  }
}

async function run (seq: number, calls: WriteCall[]): Promise<void> {
  const settled = await Promise.allSettled(calls.map(start))
  const replies = settled.map((outcome): WriteReply => outcome.status === 'fulfilled' ? [true, outcome.value] : [false, sendError(outcome.reason)])
  try {
    parentPort?.postMessage({ seq, replies } satisfies FromWriter)
  } catch (error) {
    // A result that cannot be cloned: each write of the message fails with that, and the thread goes on.
    const failed = sendError(error)
    parentPort?.postMessage({ seq, replies: calls.map((): WriteReply => [false, failed]) } satisfies FromWriter)
  }
}

/** Messages being answered: closing waits for them. */
const running = new Set<Promise<void>>()

parentPort?.on('message', (message: ToWriter) => {
  if (message === 'checkpoint-in-commits') {
    store.checkpointInCommits()
  } else if (message === 'close') {
    // The thread ends once its connection is closed, whatever else is left on its loop (a timer, a failed close):
    // the serving side waits for that end.
    // (Node delivers what the thread posted before it exits, so every answer sent reaches the event loop.)
    void Promise.allSettled(running).then(() => store.close()).finally(() => { process.exit(0) })
  } else {
    // Started at once, as requests start their writes: messages that arrive together join one group commit.
    const answered = run(message.seq, message.calls).finally(() => { running.delete(answered) })
    running.add(answered)
  }
})
