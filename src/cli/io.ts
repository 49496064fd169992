import { createInterface } from 'node:readline'
import { type Readable, Writable } from 'node:stream'
import { cliCommand } from './invocation.js'

/** The time as a command reads it: milliseconds since the epoch. */
export type Clock = () => number

/** Where a CLI invocation reads its environment and writes its output: the process, or a test's buffers. */
export interface Io {
  stdout: (text: string) => void
  stderr: (text: string) => void
  env: Readonly<Record<string, string | undefined>>
  /** How the person running this types a petstore command (`petstore`, `npx petstore`): for messages that name one. */
  command: string
  /** stderr is a terminal: long commands (import) show progress there. Absent: not a terminal. */
  stderrIsTTY?: boolean
  /** The terminal's width, when stderr is one. */
  stderrColumns?: number
  /**
   * Reads a secret from standard input: all of it from a pipe or file, but no more than `maxBytes` and one byte (so
   * that the caller can tell more from enough, however much follows, even an input that never ends); on a terminal,
   * one line typed without echo, after `prompt` on stderr. The secret never appears on the command line, in the shell
   * history or on the screen.
   */
  readSecret: (prompt: string, maxBytes: number) => Promise<string>
}

/** One line from the terminal on stdin, typed without echo (readline writes its echo to a stream that drops it). */
async function readHidden (prompt: string): Promise<string> {
  process.stderr.write(prompt)
  const silent = new Writable({ write (_chunk, _encoding, done) { done() } })
  const lines = createInterface({ input: process.stdin, output: silent, terminal: true })
  try {
    return await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve)
      lines.once('close', () => resolve(''))
      lines.once('SIGINT', () => reject(new Error('interrupted')))
    })
  } finally {
    lines.close()
    process.stderr.write('\n')
  }
}

/** The first `maxBytes` + 1 bytes of `input` as text, and not a byte further: the rest is left unread. */
async function readAtMost (input: Readable, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of input) {
    chunks.push(chunk as Buffer)
    size += (chunk as Buffer).length
    // Leaving the loop destroys the stream: nothing more is read.
    if (size > maxBytes) break
  }
  return Buffer.concat(chunks).subarray(0, maxBytes + 1).toString('utf8')
}

export const defaultIo: Io = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  get command () { return cliCommand(process.argv[1], process.env.PATH) },
  stderrIsTTY: process.stderr.isTTY === true,
  get stderrColumns () { return process.stderr.columns },
  readSecret: async (prompt, maxBytes) => process.stdin.isTTY ? await readHidden(prompt) : await readAtMost(process.stdin, maxBytes)
}
