import { createInterface } from 'node:readline'
import { Writable } from 'node:stream'
import { text } from 'node:stream/consumers'

/** Where a CLI invocation reads its environment and writes its output: the process, or a test's buffers. */
export interface Io {
  stdout: (text: string) => void
  stderr: (text: string) => void
  env: Readonly<Record<string, string | undefined>>
  /** stderr is a terminal: long commands (import) show progress there. Absent: not a terminal. */
  stderrIsTTY?: boolean
  /** The terminal's width, when stderr is one. */
  stderrColumns?: number
  /**
   * Reads a secret from standard input: all of it from a pipe or file; on a terminal, one line typed without echo,
   * after `prompt` on stderr. The secret never appears on the command line, in the shell history or on the screen.
   */
  readSecret: (prompt: string) => Promise<string>
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

export const defaultIo: Io = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  stderrIsTTY: process.stderr.isTTY === true,
  get stderrColumns () { return process.stderr.columns },
  readSecret: async (prompt) => process.stdin.isTTY ? await readHidden(prompt) : await text(process.stdin)
}
